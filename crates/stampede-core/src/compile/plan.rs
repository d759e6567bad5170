//! Validation and compilation: a [`ScenarioFile`] becomes a [`Plan`], the immutable,
//! ready-to-run form shared by every worker. Templates are compiled here once; requests
//! made only of constants are serialized here once. The plan's types (`plan_types`) and the
//! load's (`load`) are defined below this compiler and re-exported here.

use std::collections::{HashMap, HashSet};

use crate::compile::budget;
use crate::compile::check::StatusCheck;
use crate::compile::data::DataSource;
use crate::compile::extract::Extractor;
use crate::compile::files::Files;
use crate::compile::flow::{BlockPlan, Node, RepeatPlan};
pub use crate::compile::load::{
    CapacitySearch, CapacityStep, DEFAULT_GRACE, DEFAULT_MAX_WAIT, DEFAULT_MAX_WAITING, LoadPlan, ramp_target,
};
use crate::compile::load::{capacity_search, compile_load};
pub use crate::compile::plan_types::{GroupPlan, Once, Plan, Protocol, ScenarioPlan, ScopedVar, StepPlan, ThinkPlan};
use crate::compile::request::{RequestPlan, compile_request};
use crate::compile::template::{Escape, Scope, Template};
use crate::compile::threshold::{self, Threshold};
use crate::error::{Problem, Problems};
use crate::wire::url::HttpUrl;
use stampede_model::Dur;
pub use stampede_model::StepKey;
use stampede_model::scenario::{DataMode, OnError, OnExhausted, VarScope};
use stampede_model::scenario::{
    Executor, ScenarioFile, StatusItem, StatusSpec, Step as StepSpec, Think, ThresholdSpec,
};
use std::sync::Arc;

/// Options for compiling a scenario file.
#[derive(Debug, Default, Clone)]
pub struct CompileOptions {
    /// Replaces the file's `baseUrl` (used for `builtin` and by runners).
    pub base_url: Option<String>,
    /// Environment for `{{env.NAME}}`; `None` reads the process environment.
    pub env: Option<HashMap<String, String>>,
    /// Folder data file paths are relative to (the scenario file's); default: the current one.
    pub base_dir: Option<std::path::PathBuf>,
    /// Keep only the data rows of runner `index` of `count`.
    pub data_partition: Option<(u32, u32)>,
    /// File contents by the path the scenario names (data files, multipart uploads), used
    /// instead of reading the disk: the operator validates with the files of `spec.data`.
    pub files: Option<Arc<std::collections::BTreeMap<String, Vec<u8>>>>,
    /// The seed of generated values; default: a random one (each run differs).
    pub seed: Option<u64>,
    /// This runner's index and the number of runners, for `runner.index` and `uniqueId()`.
    pub runner: Option<(u32, u32)>,
    /// The services a server described by reflection (`grpc.reflect`, asked when a run is
    /// prepared). Without them such a scenario's methods and messages are not checked
    /// (`stampede validate`, the operator): they are when it runs.
    pub reflected: Option<prost_reflect::DescriptorPool>,
}

/// The flow being compiled: its scenario, the names taken in it, and its steps so far.
struct Flow<'a> {
    scenario: &'a str,
    names: HashSet<String>,
    groups: HashSet<String>,
    steps: Vec<StepPlan>,
    /// How many blocks the one compiling is inside ([`budget::BLOCK_DEPTH`]).
    depth: usize,
}

/// The scenario name `init` steps are reported under.
pub const INIT: &str = "init";
/// The scenario name `setup` steps are reported under, and the prefix of their values.
pub const SETUP: &str = "setup";
/// The scenario name `teardown` steps are reported under.
pub const TEARDOWN: &str = "teardown";

/// Placeholder base URL used to validate a `builtin` scenario without starting a server.
pub const BUILTIN_PLACEHOLDER: &str = "http://127.0.0.1:9";

/// Validates and compiles a scenario file, collecting every problem found. It runs on a
/// thread of its own with a known stack ([`budget::COMPILE_STACK`]), whatever thread calls it
/// (an operator's async worker has 2 MiB): with the budgets, no file can take the caller down.
pub fn compile(file: &ScenarioFile, opts: &CompileOptions) -> Result<Plan, Vec<Problem>> {
    on_compile_thread(|| compile_here(file, opts))
}

/// The file's `baseUrl` as [`compile`] resolves it (the caller's, the built-in target's
/// placeholder, or the file's with its constant `vars`), without compiling the rest: what a
/// scenario with `grpc.reflect` asks its server at, before it compiles once with the answer.
pub fn resolve_base_url(file: &ScenarioFile, opts: &CompileOptions) -> Result<Option<String>, Vec<Problem>> {
    on_compile_thread(|| {
        let mut c = Compiler::new(file, opts);
        let base_url = c.base_url_and_vars(opts.base_url.as_deref());
        if c.problems.is_empty() { Ok(base_url) } else { Err(c.problems.into_vec()) }
    })
}

/// Runs `work` on a thread of its own with the compiler's stack ([`budget::COMPILE_STACK`]):
/// expressions are compiled and constant ones evaluated as deep as the budgets allow, whatever
/// the caller's stack (a tokio worker's is 2 MiB).
fn on_compile_thread<T: Send>(work: impl FnOnce() -> Result<T, Vec<Problem>> + Send) -> Result<T, Vec<Problem>> {
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("stampede-compile".into())
            .stack_size(budget::COMPILE_STACK)
            .spawn_scoped(s, work)
        {
            Ok(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(e) => Err(vec![Problem::new("(file)", format!("cannot start a thread to compile it: {e}"))]),
        }
    })
}

impl<'a> Compiler<'a> {
    /// A compiler of `file` with `opts`, nothing compiled yet.
    fn new(file: &'a ScenarioFile, opts: &'a CompileOptions) -> Compiler<'a> {
        let base_dir = opts.base_dir.as_deref().unwrap_or(std::path::Path::new("."));
        let seed = opts.seed.or(file.seed).unwrap_or_else(|| fastrand::u64(..));
        Compiler {
            file,
            files: Files::new(base_dir, opts.files.as_deref()),
            problems: Problems::default(),
            scope: Scope { env: opts.env.clone(), ..Scope::default() },
            data: Vec::new(),
            step_keys: Vec::new(),
            group_keys: Vec::new(),
            slot_count: 0,
            test_generator: crate::compile::expr::Gen::outside_load(seed, crate::compile::random::Stream::Test, 0, 1),
            vars: Vec::new(),
            pending_vars: Vec::new(),
            protos: crate::compile::grpc::Protos::new(opts.reflected.clone()),
            seed,
        }
    }
}

fn compile_here(file: &ScenarioFile, opts: &CompileOptions) -> Result<Plan, Vec<Problem>> {
    let mut c = Compiler::new(file, opts);
    let shared_load = c.shared_load();
    let base_url = c.base_url_and_vars(opts.base_url.as_deref());
    if file.grpc.as_ref().is_some_and(|g| g.reflect) && base_url.is_none() {
        c.problems.add("grpc.reflect", "asks the server at `baseUrl` for its services: the scenario needs a `baseUrl`");
    }
    c.data_sources(opts.data_partition);
    let (setup, setup_outputs) = c.setup_steps();
    let setup_json =
        setup_outputs.iter().map(|(_, slot)| *slot).filter(|slot| c.scope.json_slots.contains(slot)).collect();
    let init = c.once_steps(INIT, &file.init);
    c.define_vars(true);
    let (scenarios, own_groups) = c.scenarios();
    let teardown = c.once_steps(TEARDOWN, &file.teardown);
    let thresholds = c.thresholds();
    let transport = crate::compile::http::compile_transport(&file.http, c.files, &mut c.problems);
    let groups: Vec<GroupPlan> = shared_load.map(|load| c.shared_group(load)).into_iter().chain(own_groups).collect();
    if let Some(t) = &file.builtin_target {
        if file.base_url.as_deref() != Some("builtin") {
            c.problems.add("builtinTarget", "applies only with `baseUrl: builtin`");
        }
        if t.concurrency == Some(0) {
            c.problems.add("builtinTarget.concurrency", "must be at least 1");
        }
        if t.concurrency.is_some() && t.service_time.is_none_or(Dur::is_zero) {
            c.problems.add(
                "builtinTarget.concurrency",
                "needs a `serviceTime` above 0 (capacity = concurrency / serviceTime)",
            );
        }
        if t.queue_limit.is_some() && t.concurrency.is_none() {
            c.problems.add("builtinTarget.queueLimit", "needs `concurrency` (without it no request waits)");
        }
    }
    let capacity = file.load.as_ref().filter(|l| l.executor == Executor::Capacity).map(capacity_search);
    if file.scenarios.iter().filter_map(|s| s.load.as_ref()).any(|l| l.executor == Executor::Capacity) {
        c.problems.add("scenarios", "`executor: capacity` applies to the file's `load` only");
    }
    if capacity.is_some() && groups.len() > 1 {
        c.problems.add("load", "a capacity search needs every scenario under the file's `load`");
    }
    if !c.problems.is_empty() || groups.is_empty() {
        return Err(c.problems.into_vec());
    }
    Ok(Plan {
        name: file.name.clone(),
        base_url,
        groups,
        scenarios: Arc::new(scenarios),
        step_keys: c.step_keys,
        slot_count: c.slot_count,
        thresholds,
        data: Arc::new(c.data),
        cookies: file.http.cookies,
        transport: Arc::new(transport),
        capacity,
        undelivered_load: file.undelivered_load,
        seed: c.seed,
        redactor: crate::compile::secrets::Redactor::new(c.scope.env_read.take()),
        runner: opts.runner.unwrap_or((0, 1)),
        vars: c.vars,
        init: Arc::new(init),
        setup: Arc::new(setup),
        teardown: Arc::new(teardown),
        setup_outputs,
        setup_json,
        group_keys: c.group_keys,
    })
}

/// The state of one compilation: what has been compiled so far, and the problems found.
struct Compiler<'a> {
    file: &'a ScenarioFile,
    files: Files<'a>,
    problems: Problems,
    /// Names templates may use: constants, and VU value slots.
    scope: Scope,
    data: Vec<DataSource>,
    step_keys: Vec<StepKey>,
    group_keys: Vec<StepKey>,
    /// VU value slots handed out so far: data columns first, then extracted values.
    slot_count: usize,
    /// The generator of the `test`-scoped variables, computed now in their order: one stream
    /// for them all (two `uuid()` differ), the same on every runner that shares the seed.
    test_generator: crate::compile::expr::Gen,
    /// The plan's seed (the caller's, the file's, or a random one).
    seed: u64,
    vars: Vec<ScopedVar>,
    /// The `vars` that name what is not known before the steps (values `init` extracts, data
    /// columns, `setup.NAME`), defined after `init` ([`Compiler::define_vars`]).
    pending_vars: Vec<String>,
    /// The `.proto` files' services, compiled at the first `grpc` step.
    protos: crate::compile::grpc::Protos,
}

impl Compiler<'_> {
    /// Whether some scenario runs under the file's `load`.
    fn shared_load_used(&self) -> bool {
        self.file.scenarios.iter().any(|s| s.load.is_none())
    }

    /// The file's `load`, which the scenarios without their own share.
    fn shared_load(&mut self) -> Option<LoadPlan> {
        match (&self.file.load, self.shared_load_used()) {
            (Some(spec), true) => compile_load(spec, "load", &mut self.problems),
            (None, true) => {
                self.problems.add("load", "missing: the scenarios without a `load` of their own need the file's");
                None
            }
            (Some(_), false) => {
                self.problems.add("load", "no scenario uses it: each has its own `load`");
                None
            }
            (None, false) => None,
        }
    }

    /// `baseUrl` (the caller's when given; `builtin` stands for the caller's built-in target)
    /// and `vars`, which become constants of the scope.
    fn base_url_and_vars(&mut self, given: Option<&str>) -> Option<String> {
        let base_url = match (given, &self.file.base_url) {
            (Some(b), _) => Some(b.trim_end_matches('/').to_string()),
            (None, Some(b)) if b == "builtin" => Some(BUILTIN_PLACEHOLDER.to_string()),
            (None, Some(b)) => match self.base_url_template(b) {
                Ok(t) => {
                    let value = t.as_const().unwrap_or_default().trim_end_matches('/').to_string();
                    if let Err(e) = HttpUrl::parse(&value) {
                        self.problems.add("baseUrl", e);
                    }
                    Some(value)
                }
                Err(e) => {
                    self.problems.add("baseUrl", e);
                    // Keep later templates from failing for the same reason.
                    Some(BUILTIN_PLACEHOLDER.to_string())
                }
            },
            (None, None) => None,
        };
        if let Some(b) = &base_url {
            self.scope.consts.insert("baseUrl".into(), b.clone());
        }
        for name in self.file.vars.keys() {
            if name == "baseUrl" || name.starts_with("env.") || name.is_empty() || is_builtin(name) {
                self.problems.add(format!("vars.{name}"), "this name is reserved");
                continue;
            }
            self.pending_vars.push(name.clone());
        }
        self.define_vars(false);
        base_url
    }

    /// Defines the pending `vars` in their order (one may use another before it). Before the
    /// steps (`after_init` false) one that does not compile waits: it may name a value `init`
    /// extracts, a data column or `setup.NAME`, all known after `init`, when what still does
    /// not compile is a problem.
    fn define_vars(&mut self, after_init: bool) {
        for name in std::mem::take(&mut self.pending_vars) {
            let Some(spec) = self.file.vars.get(&name) else { continue };
            if let Err(e) = self.define_var(&name, spec, after_init) {
                if after_init {
                    self.problems.add(format!("vars.{name}"), e);
                } else {
                    self.pending_vars.push(name);
                }
            }
        }
    }

    /// Defines variable `name`: a number, a boolean or a list as a typed constant; a template
    /// by [`Compiler::add_var`], typed when it is one hole alone (`"{{ vu.id }}"`).
    fn define_var(
        &mut self,
        name: &str,
        spec: &stampede_model::scenario::VarSpec,
        after_init: bool,
    ) -> Result<(), crate::compile::template::TemplateError> {
        use crate::compile::template::{TemplateError, lone_hole};
        if let Some(value) = spec.typed() {
            let json = value.to_json();
            let text = crate::compile::extract::value_text(&json);
            if text.len() > budget::TEMPLATE_BYTES {
                return Err(TemplateError::Budget(budget::over(
                    "template.bytes",
                    format!("a value of {} bytes", text.len()),
                )));
            }
            self.scope.consts.insert(name.to_string(), text);
            self.scope.typed.insert(name.to_string(), json);
            return Ok(());
        }
        let src = spec.template().unwrap_or_default();
        let t = Template::compile(src, &self.scope, Escape::None)?;
        let json = match lone_hole(src) {
            Some(_) => Some(Template::json(&serde_json::Value::String(src.to_string()), &self.scope)?),
            None => None,
        };
        if after_init && spec.scope() == VarScope::Test && t.as_const().is_none() {
            return Err(TemplateError::Misplaced(
                "a `test` variable is computed once before any VU runs: it cannot use a value of `init`, `setup` \
                 or a data row (use `scope: vu` or `iteration`)"
                    .into(),
            ));
        }
        self.add_var(name, t, json, spec.scope(), after_init);
        Ok(())
    }

    /// `baseUrl`'s template. It may use constant `vars` (`http://{{host}}:{{port}}`, as JMeter's
    /// and Postman's host variables), and they theirs: each one named is folded in first, once
    /// (a circle is an unknown variable), so this ends after at most twice as many rounds as
    /// there are `vars`.
    fn base_url_template(&mut self, b: &str) -> Result<Template, crate::compile::template::TemplateError> {
        use crate::compile::template::TemplateError;
        let mut pending: Vec<String> = Vec::new();
        loop {
            let src = match pending.last().and_then(|name| self.file.vars.get(name)) {
                Some(spec) => match (spec.template(), spec.typed()) {
                    (Some(t), _) => t,
                    (None, Some(typed)) => {
                        // A number or a boolean (`port: 8080`): its text.
                        let text = crate::compile::extract::value_text(&typed.to_json());
                        self.scope.consts.insert(pending.pop().unwrap_or_default(), text);
                        continue;
                    }
                    (None, None) => "",
                },
                None => b,
            };
            match Template::compile(src, &self.scope, Escape::None) {
                Ok(t) => match pending.pop() {
                    None => return Ok(t),
                    Some(name) => {
                        let value = t.as_const().ok_or_else(|| TemplateError::NotConstant(name.clone()))?;
                        self.scope.consts.insert(name, value.to_string());
                    }
                },
                Err(TemplateError::UnknownVariable(name))
                    if self.file.vars.contains_key(&name) && !pending.contains(&name) =>
                {
                    pending.push(name);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Adds variable `name`: a constant when its template is one, else by its scope — a
    /// template used in place (each use fresh), a slot filled per iteration or per VU, or a
    /// value computed now for the whole test. `json` is its template as a JSON value when it
    /// is one hole alone: the value keeps its type (a constant in `typed`, a JSON slot).
    fn add_var(&mut self, name: &str, t: Template, json: Option<Template>, per: VarScope, after_init: bool) {
        let typed = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok().filter(|v| !v.is_string());
        if let Some(value) = t.as_const() {
            self.scope.consts.insert(name.to_string(), value.to_string());
            if let Some(v) = json.as_ref().and_then(Template::as_const).and_then(typed) {
                self.scope.typed.insert(name.to_string(), v);
            }
            return;
        }
        match per {
            VarScope::Use => {
                self.scope.macros.insert(name.to_string(), Arc::new(t));
            }
            VarScope::Iteration | VarScope::Vu => {
                self.scope.weights.insert(self.slot_count, t.expansion().max(1));
                self.scope.slots.insert(name.to_string(), self.slot_count);
                let template = match json {
                    Some(json) => {
                        self.scope.json_slots.insert(self.slot_count);
                        json
                    }
                    None => t,
                };
                self.vars.push(ScopedVar { slot: self.slot_count, template, per, after_init });
                self.slot_count += 1;
            }
            VarScope::Test => {
                // One hole alone is drawn once, as JSON: its text is that value's.
                let value = self.test_generator.lend(|| json.as_ref().unwrap_or(&t).render(&[]));
                match crate::compile::template::take_render_error() {
                    Some(e) => self.problems.add(format!("vars.{name}"), format!("expression {e}")),
                    None if json.is_none() => {
                        self.scope.consts.insert(name.to_string(), value);
                    }
                    None => {
                        let text = match typed(&value) {
                            Some(v) => {
                                let text = crate::compile::extract::value_text(&v);
                                self.scope.typed.insert(name.to_string(), v);
                                text
                            }
                            None => crate::compile::template::slot_text(&value).into_owned(),
                        };
                        self.scope.consts.insert(name.to_string(), text);
                    }
                }
            }
        }
    }

    /// The data files, loaded now; each column gets a VU value slot.
    fn data_sources(&mut self, partition: Option<(u32, u32)>) {
        for (name, spec) in &self.file.data {
            if name.is_empty() || name.contains('.') || name == "env" {
                self.problems.add(format!("data.{name}"), "a data source needs a name without dots, other than `env`");
                continue;
            }
            let (columns, rows) = match crate::compile::data::load(name, spec, self.files, partition) {
                Ok(loaded) => loaded,
                Err(e) => {
                    self.problems.add(format!("data.{name}"), e);
                    continue;
                }
            };
            let first_slot = self.slot_count;
            for col in &columns {
                self.scope.slots.insert(format!("{name}.{col}"), self.slot_count);
                self.slot_count += 1;
            }
            if spec.mode == DataMode::Random && spec.on_exhausted.is_some() {
                self.problems.add(
                    format!("data.{name}.onExhausted"),
                    "applies to `mode: sequential` or `unique`; random rows never run out",
                );
            }
            let on_exhausted = spec.on_exhausted.unwrap_or(if spec.mode == DataMode::Unique {
                OnExhausted::Stop
            } else {
                OnExhausted::Loop
            });
            self.data.push(DataSource {
                name: name.clone(),
                columns,
                rows: Arc::new(rows),
                mode: spec.mode,
                on_exhausted,
                first_slot,
            });
        }
    }

    /// Every scenario with its steps, and the load groups of those with a `load` of their own.
    /// The `init` steps, reported under scenario `init`; what they extract stays visible to
    /// every scenario.
    /// Steps run outside the scenarios' iterations (`setup`, `init`, `teardown`), reported
    /// under scenario `name`.
    fn once_steps(&mut self, name: &'static str, specs: &[StepSpec]) -> ScenarioPlan {
        if !specs.is_empty() && self.file.scenarios.iter().any(|s| s.name == name) {
            self.problems
                .add(name, format!("a scenario is named `{name}`, the name `{name}` steps are reported under"));
        }
        let first_own_slot = self.slot_count;
        let mut flow =
            Flow { scenario: name, names: HashSet::new(), groups: HashSet::new(), steps: Vec::new(), depth: 0 };
        let nodes = self.flow(&mut flow, specs, name, &format!("{name}, step"), first_own_slot);
        ScenarioPlan { name: name.to_string(), weight: 0, steps: flow.steps, flow: nodes }
    }

    /// The `setup` steps; what they extract becomes `setup.NAME` (the same slot) for every
    /// later step, and no longer `NAME`. Returns them with those (name, slot) pairs.
    fn setup_steps(&mut self) -> (ScenarioPlan, Vec<(String, usize)>) {
        let before = self.scope.slots.clone();
        let setup = self.once_steps(SETUP, &self.file.setup);
        let mut outputs: Vec<(String, usize)> =
            self.scope.slots.iter().filter(|(n, _)| !before.contains_key(*n)).map(|(n, s)| (n.clone(), *s)).collect();
        outputs.sort();
        self.scope.slots = before;
        for (name, slot) in &outputs {
            self.scope.slots.insert(format!("{SETUP}.{name}"), *slot);
        }
        (setup, outputs)
    }

    fn scenarios(&mut self) -> (Vec<ScenarioPlan>, Vec<GroupPlan>) {
        let file = self.file;
        if file.scenarios.is_empty() {
            self.problems.add("scenarios", "at least one scenario is needed");
        } else if self.shared_load_used() && file.scenarios.iter().filter(|s| s.load.is_none()).all(|s| s.weight == 0) {
            self.problems.add(
                "scenarios",
                "the weights of the scenarios sharing `load` are all 0, so none of them would ever run",
            );
        }
        let mut names = HashSet::new();
        let mut scenarios = Vec::new();
        let mut own_groups = Vec::new();
        for (si, sc) in file.scenarios.iter().enumerate() {
            let sc_loc = location(&sc.name, "scenario", format!("scenarios[{si}]"), &mut self.problems);
            if !names.insert(sc.name.as_str()) {
                self.problems.add(&sc_loc, "another scenario has the same name");
            }
            if sc.steps.is_empty() {
                self.problems.add(&sc_loc, "a scenario needs at least one step");
            }
            // A value extracted in this scenario is visible to its later steps only.
            let outer_slots = self.scope.slots.clone();
            let outer_json = self.scope.json_slots.clone();
            let first_own_slot = self.slot_count;
            let mut flow =
                Flow { scenario: &sc.name, names: HashSet::new(), groups: HashSet::new(), steps: Vec::new(), depth: 0 };
            let nodes = self.flow(
                &mut flow,
                &sc.steps,
                &format!("{sc_loc}, steps"),
                &format!("{sc_loc}, step"),
                first_own_slot,
            );
            self.scope.slots = outer_slots;
            self.scope.json_slots = outer_json;
            scenarios.push(ScenarioPlan { name: sc.name.clone(), weight: sc.weight, steps: flow.steps, flow: nodes });
            if let Some(spec) = &sc.load
                && let Some(load) = compile_load(spec, &format!("{sc_loc}: load"), &mut self.problems)
            {
                own_groups.push(GroupPlan {
                    name: sc.name.clone(),
                    load,
                    scenarios: vec![si],
                    cumulative_weights: vec![u64::from(sc.weight.max(1))],
                });
            }
        }
        (scenarios, own_groups)
    }

    /// A list of steps and blocks (`at` is where the list is, `kind` what a step of it is
    /// called in messages): each step compiled once into `flow.steps`, the nodes returned.
    fn flow(
        &mut self,
        flow: &mut Flow<'_>,
        specs: &[StepSpec],
        at: &str,
        kind: &str,
        first_own_slot: usize,
    ) -> Vec<Node> {
        let mut nodes = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let position = format!("{at}[{i}]");
            let is_block = !spec.steps.is_empty() || spec.repeat.is_some() || spec.group.is_some();
            if !is_block {
                if !flow.names.insert(spec.name.clone()) && !spec.name.trim().is_empty() {
                    let message = format!("another step of this scenario is named `{}`", spec.name);
                    self.problems.add(format!("{position}.name"), message);
                }
                let loc = location(&spec.name, kind, position, &mut self.problems);
                if let Some(step) = self.step(flow.scenario, spec, &loc, first_own_slot) {
                    flow.steps.push(step);
                    nodes.push(Node::Step(flow.steps.len() - 1));
                }
                continue;
            }
            let loc = match (&spec.group, spec.name.trim()) {
                (Some(g), _) => format!("{kind} group `{g}`"),
                (None, "") => position.clone(),
                (None, name) => format!("{kind} `{name}`"),
            };
            if let Some(block) = self.block(flow, spec, (&loc, &position, kind), first_own_slot) {
                nodes.push(Node::Block(Box::new(block)));
            }
        }
        nodes
    }

    /// A block: its condition, its repeat, its group and its steps.
    fn block(
        &mut self,
        flow: &mut Flow<'_>,
        spec: &StepSpec,
        (loc, position, kind): (&str, &str, &str),
        first_own_slot: usize,
    ) -> Option<BlockPlan> {
        let before = self.problems.len();
        for (field, set) in [
            ("request", spec.request.is_some()),
            ("grpc", spec.grpc.is_some()),
            ("ws", spec.ws.is_some()),
            ("check", spec.check.is_some()),
            ("think", spec.think.is_some()),
            ("extract", !spec.extract.is_empty()),
            ("onError", spec.on_error != OnError::default()),
        ] {
            if set {
                self.problems.add(
                    format!("{loc}: {field}"),
                    "belongs to a step, not to a block (a block has `steps`; put it on one of them)",
                );
            }
        }
        if spec.steps.is_empty() {
            self.problems.add(format!("{loc}: steps"), "a block (`repeat` or `group`) needs at least one step");
        }
        if flow.depth >= budget::BLOCK_DEPTH {
            self.problems.add(loc, budget::over("block.depth", format!("a block inside {} others", flow.depth)));
            return None;
        }
        let when = spec.when.as_deref().and_then(|src| self.condition(src, &format!("{loc}: if")));
        let group = spec.group.as_ref().map(|name| {
            if name.trim().is_empty() {
                self.problems.add(format!("{loc}: group"), "a group needs a name");
            } else if !flow.groups.insert(name.clone()) {
                self.problems.add(format!("{loc}: group"), "another group of this scenario has the same name");
            }
            self.group_keys.push(StepKey { scenario: flow.scenario.to_string(), step: name.clone() });
            self.group_keys.len() - 1
        });
        // The loop's variable is visible inside the block only: what the name meant before the
        // block (a value extracted earlier, or nothing) is what it means after it.
        let kept = spec.repeat.as_ref().map(|r| {
            let name = loop_variable(r);
            (self.scope.slots.get(&name).copied(), self.scope.json_slots.clone(), name)
        });
        let repeat = spec.repeat.as_ref().and_then(|r| self.repeat(r, &format!("{loc}: repeat")));
        flow.depth += 1;
        let body = self.flow(flow, &spec.steps, &format!("{position}.steps"), kind, first_own_slot);
        flow.depth -= 1;
        if let Some((slot, json, name)) = kept {
            match slot {
                Some(slot) => self.scope.slots.insert(name, slot),
                None => self.scope.slots.remove(&name),
            };
            self.scope.json_slots = json;
        }
        (self.problems.len() == before).then(|| BlockPlan {
            at: loc.to_string(),
            when,
            repeat: repeat.map(|(_, r)| r),
            group,
            body,
        })
    }

    /// A condition (`if`, `while`), or `None` when it does not compile (recorded at `at`).
    fn condition(&mut self, src: &str, at: &str) -> Option<crate::compile::expr::Expr> {
        crate::compile::flow::compile(src, &self.scope).map_err(|e| self.problems.add(at, e)).ok()
    }

    /// A block's `repeat`: its variable's name and the compiled repeat.
    fn repeat(&mut self, spec: &stampede_model::scenario::RepeatSpec, at: &str) -> Option<(String, RepeatPlan)> {
        use crate::compile::flow::Count;
        use stampede_model::scenario::Count as CountSpec;
        let given = [spec.count.is_some(), spec.for_each.is_some(), spec.while_.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            self.problems.add(at, "needs exactly one of `count`, `forEach` and `while`");
            return None;
        }
        if spec.max == Some(0) {
            self.problems.add(format!("{at}.max"), "must be at least 1");
        }
        if let Some(max) = spec.max.filter(|m| u64::from(*m) > budget::LOOP_PASSES) {
            self.problems.add(format!("{at}.max"), budget::over("loop.passes", format!("`max: {max}`")));
            return None;
        }
        if let Some(CountSpec::Times(n)) = spec.count.as_ref().filter(|_| spec.max.is_none())
            && u64::from(*n) > budget::LOOP_PASSES
        {
            self.problems.add(format!("{at}.count"), budget::over("loop.passes", format!("`count: {n}`")));
            return None;
        }
        let name = loop_variable(spec);
        if name.is_empty() || name.contains('.') || is_builtin(&name) || self.scope.consts.contains_key(&name) {
            self.problems
                .add(format!("{at}.as"), format!("`{name}` is already a variable or reserved; pick another name"));
            return None;
        }
        let plan = if let Some(count) = &spec.count {
            let count = match count {
                CountSpec::Times(n) => Count::Fixed(u64::from(*n)),
                CountSpec::Expr(src) => Count::Expr(self.condition(src, &format!("{at}.count"))?),
            };
            RepeatPlan::Count { count, max: spec.max, slot: self.slot_count }
        } else if let Some(src) = &spec.for_each {
            RepeatPlan::ForEach {
                list: self.condition(src, &format!("{at}.forEach"))?,
                max: spec.max,
                slot: self.slot_count,
            }
        } else {
            let Some(max) = spec.max else {
                self.problems.add(
                    format!("{at}.max"),
                    "`while` needs a bound: the most times the block may run (e.g. `max: 10`)",
                );
                return None;
            };
            let src = spec.while_.as_deref().unwrap_or_default();
            // The condition may read the loop's number.
            self.scope.slots.insert(name.clone(), self.slot_count);
            self.scope.json_slots.insert(self.slot_count);
            RepeatPlan::While { cond: self.condition(src, &format!("{at}.while"))?, max, slot: self.slot_count }
        };
        self.scope.slots.insert(name.clone(), self.slot_count);
        self.scope.json_slots.insert(self.slot_count);
        self.slot_count += 1;
        Some((name, plan))
    }

    /// One step: its request, status check, named checks, think time and extractors.
    /// `None` when its request has problems (they are recorded).
    fn step(&mut self, scenario: &str, step: &StepSpec, loc: &str, first_own_slot: usize) -> Option<StepPlan> {
        let metric = self.step_keys.len();
        self.step_keys.push(StepKey { scenario: scenario.to_string(), step: step.name.clone() });
        let given = [step.request.is_some(), step.grpc.is_some(), step.ws.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            self.problems.add(loc, "a step has one of `request`, `grpc` and `ws`, not several");
            return None;
        }
        let when = step.when.as_deref().and_then(|src| self.condition(src, &format!("{loc}: if")));
        let (request, protocol) = self.action(step, loc)?;
        let grpc = matches!(protocol, Protocol::Grpc(_));
        let explicit = step.check.as_ref().and_then(|c| c.status.as_ref()).map(|spec| {
            let at = format!("{loc}: check.status");
            if grpc {
                crate::compile::grpc::compile_status(spec, &at, &mut self.problems)
            } else {
                compile_status(spec, &at, &mut self.problems)
            }
        });
        let default = match protocol {
            Protocol::Grpc(_) => (0, 0),
            Protocol::Ws(_) => (101, 101),
            Protocol::Http => (200, 399),
        };
        let accept = explicit.clone().unwrap_or(StatusCheck { ranges: vec![default] });
        let think = step.think.as_ref().map(|t| match t {
            Think::Fixed(d) => ThinkPlan::Fixed(d.get()),
            Think::Range(r) => {
                if r.min > r.max {
                    self.problems.add(format!("{loc}: think"), "min is greater than max");
                }
                ThinkPlan::Uniform(r.min.get(), r.max.get().max(r.min.get()))
            }
        });
        let checks = match &step.check {
            Some(spec) => crate::compile::check::compile(
                spec,
                explicit,
                &self.scope,
                &mut self.problems.under(format!("{loc}: ")),
            ),
            None => Vec::new(),
        };
        let extract = self.extractors(step, loc, first_own_slot);
        Some(StepPlan {
            name: step.name.clone(),
            metric,
            request,
            protocol,
            accept,
            needs_body: StepPlan::reads_body(&extract, &checks),
            needs_headers: StepPlan::reads_headers(&extract, &checks),
            checks,
            think,
            extract,
            on_error: step.on_error,
            when,
        })
    }

    /// A step's request: HTTP, a gRPC call or a WebSocket session. `None` when it has problems
    /// (they are recorded).
    fn action(&mut self, step: &StepSpec, loc: &str) -> Option<(RequestPlan, Protocol)> {
        if let Some(spec) = &step.grpc {
            let pool = self.protos.pool(self.file, self.files, &mut self.problems)?;
            let (request, plan) = crate::compile::grpc::compile_call(
                spec,
                pool,
                self.file,
                &self.scope,
                self.files,
                loc,
                &mut self.problems,
            )?;
            return Some((request, Protocol::Grpc(Box::new(plan))));
        }
        if let Some(spec) = &step.ws {
            let (request, plan) =
                crate::compile::ws::compile_session(spec, self.file, &self.scope, self.files, loc, &mut self.problems)?;
            return Some((request, Protocol::Ws(Box::new(plan))));
        }
        let Some(request) = &step.request else {
            self.problems.add(loc, "a step needs a `request`, `grpc` or `ws` (or `steps`, making it a block)");
            return None;
        };
        let request = compile_request(request, self.file, &self.scope, self.files, loc, &mut self.problems)?;
        Some((request, Protocol::Http))
    }

    /// A step's extractors, each into a VU value slot: a new one, or the same one when this
    /// scenario extracted the name before (the later value replaces the earlier).
    fn extractors(&mut self, step: &StepSpec, loc: &str, first_own_slot: usize) -> Vec<Extractor> {
        let mut extract = Vec::new();
        for (name, spec) in &step.extract {
            let at = format!("{loc}: extract.{name}");
            if name.is_empty()
                || name.starts_with("env.")
                || name == "baseUrl"
                || is_builtin(name)
                || self.scope.consts.contains_key(name)
            {
                self.problems.add(at, "this name is already a variable or reserved");
                continue;
            }
            if let Some(source) = self.data.iter().find(|d| {
                name.strip_prefix(d.name.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|column| d.columns.iter().any(|c| c == column))
            }) {
                let message = format!("this name is a column of the data source `{}`; pick another name", source.name);
                self.problems.add(at, message);
                continue;
            }
            let slot = match self.scope.slots.get(name) {
                Some(&slot) if slot >= first_own_slot => slot,
                _ => {
                    self.slot_count += 1;
                    self.slot_count - 1
                }
            };
            match crate::compile::extract::compile(name, spec, slot) {
                Ok(e) => {
                    self.scope.slots.insert(name.clone(), slot);
                    if e.gives_json() {
                        self.scope.json_slots.insert(slot);
                    } else {
                        self.scope.json_slots.remove(&slot);
                    }
                    extract.push(e);
                }
                Err(e) => self.problems.add(at, e),
            }
        }
        extract
    }

    /// The thresholds, whose selectors must name existing scenarios and steps.
    fn thresholds(&mut self) -> Vec<Threshold> {
        let mut thresholds = Vec::new();
        for (i, spec) in self.file.thresholds.iter().enumerate() {
            let src = spec.expression();
            match threshold::parse(src).and_then(|t| t.check_selectors(&self.step_keys, &self.group_keys).map(|()| t)) {
                Ok(mut t) => {
                    if let ThresholdSpec::Full(o) = spec {
                        t.abort_on_fail = o.abort_on_fail;
                        t.delay_abort_eval = o.delay_abort_eval.map(Dur::get).unwrap_or_default();
                        if o.delay_abort_eval.is_some() && !o.abort_on_fail {
                            self.problems
                                .add(format!("thresholds[{i}].delayAbortEval"), "goes with `abortOnFail: true`");
                        }
                    }
                    thresholds.push(t)
                }
                Err(e) => self.problems.add(format!("thresholds[{i}] `{src}`"), e),
            }
        }
        thresholds
    }

    /// The group of the scenarios without a `load` of their own, picked by weight.
    fn shared_group(&self, load: LoadPlan) -> GroupPlan {
        let members: Vec<usize> =
            (0..self.file.scenarios.len()).filter(|&i| self.file.scenarios[i].load.is_none()).collect();
        let cumulative_weights = members
            .iter()
            .scan(0u64, |sum, &i| {
                *sum += u64::from(self.file.scenarios[i].weight);
                Some(*sum)
            })
            .collect();
        GroupPlan { name: "default".into(), load, scenarios: members, cumulative_weights }
    }
}

/// The name of a repeat's variable: `as`, else `item` for `forEach` and `index` otherwise.
fn loop_variable(spec: &stampede_model::scenario::RepeatSpec) -> String {
    spec.as_.clone().unwrap_or_else(|| if spec.for_each.is_some() { "item" } else { "index" }.into())
}

/// Whether `name` is (under) a variable every expression has (`vu`, `runner`, `test`,
/// `response`) or the setup's values (`setup`).
fn is_builtin(name: &str) -> bool {
    let root = name.split('.').next().unwrap_or_default();
    crate::compile::expr::BUILTIN_ROOTS.contains(&root) || root == SETUP
}

/// Where a named thing is, for messages: ``scenario `buy` `` when it has a name; else its
/// position (`scenarios[2]`), with a problem saying the name is missing.
fn location(name: &str, kind: &str, position: String, problems: &mut Problems) -> String {
    if name.trim().is_empty() {
        let what = kind.rsplit(' ').next().unwrap_or(kind);
        problems.add(format!("{position}.name"), format!("a {what} needs a name"));
        position
    } else {
        format!("{kind} `{name}`")
    }
}

fn compile_status(spec: &StatusSpec, loc: &str, problems: &mut Problems) -> StatusCheck {
    let items: Vec<&StatusItem> = match spec {
        StatusSpec::One(i) => vec![i],
        StatusSpec::Many(v) => v.iter().collect(),
    };
    if items.is_empty() {
        problems.add(loc, "the list of accepted statuses is empty");
    }
    let mut ranges = Vec::new();
    for item in items {
        match parse_status_item(item) {
            Ok(r) => ranges.push(r),
            Err(e) => problems.add(loc, e),
        }
    }
    StatusCheck { ranges }
}

fn parse_status_item(item: &StatusItem) -> Result<(u16, u16), String> {
    let valid = |c: u16| (100..=599).contains(&c);
    match item {
        StatusItem::Code(c) if valid(*c) => Ok((*c, *c)),
        StatusItem::Code(c) => Err(format!("{c} is not an HTTP status (100-599)")),
        StatusItem::Pattern(p) => {
            let p = p.trim();
            let bad = || format!("`{p}` is not a status, a class like 2xx, or a range like 200-299");
            if let Some(class) = p.strip_suffix("xx").or_else(|| p.strip_suffix("XX")) {
                let d: u16 = class.parse().map_err(|_| bad())?;
                if (1..=5).contains(&d) {
                    return Ok((d * 100, d * 100 + 99));
                }
                return Err(bad());
            }
            if let Some((a, b)) = p.split_once('-') {
                let lo: u16 = a.trim().parse().map_err(|_| bad())?;
                let hi: u16 = b.trim().parse().map_err(|_| bad())?;
                if valid(lo) && valid(hi) && lo <= hi {
                    return Ok((lo, hi));
                }
                return Err(bad());
            }
            let c: u16 = p.parse().map_err(|_| bad())?;
            if valid(c) { Ok((c, c)) } else { Err(bad()) }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
