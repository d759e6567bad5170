//! The plan's types: the ready-to-run form of a scenario file ([`Plan`]) — its groups of VUs,
//! its scenarios and their steps — which `plan` compiles and every worker shares.

use std::sync::Arc;
use std::time::Duration;

use crate::compile::check::{CheckPlan, StatusCheck};
use crate::compile::data::DataSource;
use crate::compile::flow::Node;
use crate::compile::load::{CapacitySearch, LoadPlan};
use crate::compile::request::RequestPlan;
use crate::compile::template::Template;
use crate::compile::threshold::Threshold;
use stampede_model::StepKey;
use stampede_model::scenario::{OnError, VarScope};

/// Which of the steps a test runs once, outside the load: `setup` before it, `teardown` after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Once {
    /// The `setup` steps, run once before the load.
    Setup,
    /// The `teardown` steps, run once after the load.
    Teardown,
}

/// The ready-to-run form of a scenario file.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The test's name (the file's `name`), shown in reports.
    pub name: String,
    /// `baseUrl` after resolution (the built-in target's address when `builtin`).
    pub base_url: Option<String>,
    /// Groups of VUs running side by side: the file's `load` (shared by the scenarios without
    /// their own, by weight), then one per scenario with its own `load`.
    pub groups: Vec<GroupPlan>,
    /// Shared (a capacity search's plateaus are the same plan at other rates).
    pub scenarios: Arc<Vec<ScenarioPlan>>,
    /// (scenario, step) names by metric index.
    pub step_keys: Vec<StepKey>,
    /// Number of per-VU value slots (extracted values).
    pub slot_count: usize,
    /// Pass/fail criteria evaluated on the merged results.
    pub thresholds: Vec<Threshold>,
    /// Data files, loaded once and shared by all VUs.
    pub data: Arc<Vec<DataSource>>,
    /// Each VU keeps a cookie jar.
    pub cookies: bool,
    /// HTTP version, connection layout and TLS.
    pub transport: Arc<crate::wire::settings::TransportPlan>,
    /// `executor: capacity`: the search; the one group's load is its first plateau.
    pub capacity: Option<CapacitySearch>,
    /// What an open model's undelivered load does to the verdict.
    pub undelivered_load: stampede_model::scenario::UndeliveredLoad,
    /// The seed of the VUs' generators (`uuid()`, `randomInt`…): the same seed, the same choices.
    pub seed: u64,
    /// This runner's index and the number of runners (0 of 1 on one machine).
    pub runner: (u32, u32),
    /// `vars` kept per iteration or per VU, each in its slot.
    pub vars: Vec<ScopedVar>,
    /// Steps each VU runs once before its first iteration (`init`); shared like `scenarios`.
    pub init: Arc<ScenarioPlan>,
    /// Steps run once for the test before the load (`setup`), and after it (`teardown`).
    pub setup: Arc<ScenarioPlan>,
    /// The `teardown` steps (no steps when the file has none).
    pub teardown: Arc<ScenarioPlan>,
    /// What `setup` extracts: each name with its slot, which VUs read as `setup.NAME`.
    pub setup_outputs: Vec<(String, usize)>,
    /// The slots of `setup_outputs` that hold JSON (`json:` extractors): passed to runners as
    /// their text when they are strings ([`Plan::portable_setup_value`]).
    pub setup_json: std::collections::HashSet<usize>,
    /// (scenario, group) names of the `group` blocks, by their transaction index.
    pub group_keys: Vec<StepKey>,
    /// What error samples may not keep: the environment's values the file read.
    pub redactor: crate::compile::secrets::Redactor,
}

/// A variable kept for an iteration or a VU's life (`vars.NAME.scope`).
#[derive(Clone, Debug)]
pub struct ScopedVar {
    /// The VU slot holding the variable's current value.
    pub slot: usize,
    /// The variable's `vars` value, rendered into `slot` each iteration or once per VU (`per`).
    pub template: Template,
    /// [`VarScope::Iteration`] or [`VarScope::Vu`].
    pub per: VarScope,
    /// It uses what the `init` steps extract (or a data row, or `setup.NAME`): computed once
    /// the VU ran them, not before.
    pub after_init: bool,
}

/// VUs that follow one load model and run some scenarios.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupPlan {
    /// `default` for the file's `load`, else the scenario's name.
    pub name: String,
    /// The load model these VUs follow, defaults applied.
    pub load: LoadPlan,
    /// Indices into [`Plan::scenarios`].
    pub scenarios: Vec<usize>,
    /// Running sums of the scenarios' weights, for picking one per iteration.
    pub cumulative_weights: Vec<u64>,
}

impl GroupPlan {
    /// Picks a scenario by weight.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> usize {
        let total = *self.cumulative_weights.last().unwrap_or(&0);
        if self.scenarios.len() == 1 || total == 0 {
            return self.scenarios[0];
        }
        let r = rng.u64(0..total);
        self.scenarios[self.cumulative_weights.partition_point(|&c| c <= r)]
    }
}

impl Plan {
    /// A setup value as it goes to runners and into the run's Secret: a JSON slot's string as
    /// its text (`SETUP-1`, not `"SETUP-1"`), anything else as it is.
    pub fn portable_setup_value(&self, slot: usize, value: &str) -> String {
        if self.setup_json.contains(&slot)
            && let Ok(serde_json::Value::String(text)) = serde_json::from_str::<serde_json::Value>(value)
        {
            return text;
        }
        value.to_string()
    }

    /// A setup value from [`Plan::portable_setup_value`] as its slot holds it: a JSON slot's
    /// text that is no JSON number, boolean, list or object as a JSON string.
    pub fn slot_setup_value(&self, slot: usize, value: &str) -> String {
        if !self.setup_json.contains(&slot) {
            return value.to_string();
        }
        match serde_json::from_str::<serde_json::Value>(value) {
            Ok(serde_json::Value::String(_)) | Err(_) => serde_json::to_string(value).unwrap_or_default(),
            Ok(_) => value.to_string(),
        }
    }

    /// The most VUs that run at once, all groups together.
    pub fn max_vus(&self) -> u32 {
        self.groups.iter().map(|g| g.load.max_vus()).sum()
    }

    /// Planned length of the longest group (`None` when one is bounded by iterations only); of
    /// a capacity search, its longest.
    pub fn planned_duration(&self) -> Option<std::time::Duration> {
        if let Some(c) = &self.capacity {
            // With each plateau's graceful stop and the second between plateaus in a cluster.
            return Some(c.longest() + (self.graceful_stop() + Duration::from_secs(1)) * c.max_plateaus());
        }
        self.groups.iter().map(|g| g.load.planned_duration()).try_fold(Duration::ZERO, |a, d| d.map(|d| a.max(d)))
    }

    /// The longest graceful stop of any group.
    pub fn graceful_stop(&self) -> Duration {
        self.groups.iter().map(|g| g.load.graceful_stop()).max().unwrap_or_default()
    }

    /// This plan with its one group running a constant `rate` per second for `duration`: one
    /// plateau of a capacity search.
    pub fn plateau(&self, rate: f64, duration: Duration) -> Plan {
        let mut plan = self.clone();
        plan.capacity = None;
        for g in &mut plan.groups {
            if let LoadPlan::ArrivalRate { start_rate, stages, .. } = &mut g.load {
                *start_rate = rate;
                *stages = vec![(duration, rate)];
            }
        }
        plan
    }

    /// `constant-vus`, or the groups' executors joined with `+`.
    pub fn executor_name(&self) -> String {
        if self.capacity.is_some() {
            return "capacity".into();
        }
        self.groups.iter().map(|g| g.load.executor_name()).collect::<Vec<_>>().join(" + ")
    }
}

/// One user flow.
#[derive(Debug)]
pub struct ScenarioPlan {
    /// The scenario's name, shown in reports (`init`, `setup` or `teardown` for those steps).
    pub name: String,
    /// Its share of its group's iterations (`weight`, default 1; 0 for `init`, `setup`, `teardown`).
    pub weight: u32,
    /// Its steps, each once (those inside blocks too), in the order they are written.
    pub steps: Vec<StepPlan>,
    /// What runs: its steps and blocks, in order.
    pub flow: Vec<Node>,
}

/// One compiled step.
#[derive(Debug)]
pub struct StepPlan {
    /// The step's `name`, unique within its scenario and shown in reports.
    pub name: String,
    /// Index into per-step metrics.
    pub metric: usize,
    /// The HTTP request; for gRPC and WebSocket steps the call's or the handshake's request.
    pub request: RequestPlan,
    /// What the step speaks.
    pub protocol: Protocol,
    /// Statuses that count as answers rather than errors: the explicit status check, else
    /// 200–399 for HTTP, OK (0) for gRPC, 101 for a WebSocket upgrade.
    pub accept: StatusCheck,
    /// Named checks, counted one by one.
    pub checks: Vec<CheckPlan>,
    /// The pause after the step (`think`); `None`: no pause.
    pub think: Option<ThinkPlan>,
    /// Values taken from the response for later steps.
    pub extract: Vec<crate::compile::extract::Extractor>,
    /// What a failed step does next (`onError`: continue, next iteration, or abort the run).
    pub on_error: OnError,
    /// Runs only when this holds (`if:`).
    pub when: Option<crate::compile::expr::Expr>,
    /// The response body must be kept (for extractors and checks); decided once, here.
    pub needs_body: bool,
    /// Every response header must be kept (for extractors and checks).
    pub needs_headers: bool,
}

impl StepPlan {
    /// Whether the step's extractors or checks read the response body.
    pub(crate) fn reads_body(extract: &[crate::compile::extract::Extractor], checks: &[CheckPlan]) -> bool {
        extract.iter().any(crate::compile::extract::Extractor::needs_body) || checks.iter().any(CheckPlan::needs_body)
    }

    /// Whether the step's extractors or checks read the response's headers.
    pub(crate) fn reads_headers(extract: &[crate::compile::extract::Extractor], checks: &[CheckPlan]) -> bool {
        extract.iter().any(crate::compile::extract::Extractor::needs_headers)
            || checks.iter().any(CheckPlan::needs_headers)
    }
}

/// What a step speaks.
#[derive(Debug)]
pub enum Protocol {
    /// An HTTP request.
    Http,
    /// A gRPC call: its method, messages and deadline.
    Grpc(Box<crate::compile::grpc::GrpcPlan>),
    /// A WebSocket session: the handshake, then its actions.
    Ws(Box<crate::compile::ws::WsPlan>),
}

/// Think time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinkPlan {
    /// The same pause every time (`think: 500ms`).
    Fixed(Duration),
    /// A pause drawn uniformly from `min` to `max`, both included (`think: {min, max}`).
    Uniform(Duration, Duration),
}

impl ThinkPlan {
    /// The pause for one step: fixed, or drawn from `rng` in whole microseconds.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Duration {
        match *self {
            ThinkPlan::Fixed(d) => d,
            ThinkPlan::Uniform(lo, hi) => {
                let span = (hi - lo).as_micros() as u64;
                lo + Duration::from_micros(if span == 0 { 0 } else { rng.u64(0..=span) })
            }
        }
    }
}
