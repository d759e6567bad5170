//! One run from start to report: start the built-in target when asked, compile, run,
//! measure the generator itself, build the report.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub(crate) mod capacity;
mod reflection;

use crate::client::tls::TlsPlan;
use crate::compile::plan::{CompileOptions, Plan};
use crate::error::{Problem, RunError, ScenarioError};
use crate::output::report::{self, GeneratorFacts, Report, round3};
use crate::run::executor::{self, RunOptions, RunOutcome, Tick};
use crate::run::once::{Once, OnceOutcome, run_once};
use crate::stats::sysstat;
use stampede_core::validate::{speaks_http2, wants_builtin};
use stampede_model::scenario::ScenarioFile;
use stampede_target::TargetServer;
use std::collections::BTreeMap;

/// A plan ready to run, with the built-in target when the scenario asked for it.
#[derive(Debug)]
pub struct Prepared {
    /// The compiled plan (its base URL the built-in target's address when that runs).
    pub plan: Arc<Plan>,
    /// The built-in target, started for `baseUrl: builtin` (`None` otherwise); running the
    /// plan stops it.
    pub target: Option<TargetServer>,
}

/// Why a scenario could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The scenario has problems, each with its place in the file.
    #[error(transparent)]
    Invalid(#[from] ScenarioError),
    /// The built-in target could not start, or gRPC reflection could not ask the server.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Validates without running anything, as the core does ([`stampede_core::validate()`]), and
/// builds the TLS configurations the run would use: a client key that does not fit its
/// certificate, or a `caFile` that cannot be a trust anchor, is a problem of `http.tls`.
pub fn validate(file: &ScenarioFile, path: &Path, opts: &CompileOptions) -> Result<Plan, ScenarioError> {
    #[cfg(test)]
    tests::COMPILES.with(|n| n.set(n.get() + 1));
    let plan = stampede_core::validate(file, path, opts)?;
    // Without `http.tls` nothing of the file's can fail here: no configuration is built (and
    // no system root loaded) just to check.
    if file.http.tls.is_none() {
        return Ok(plan);
    }
    match TlsPlan::new(&plan.transport.tls).check() {
        Ok(()) => Ok(plan),
        Err(e) => Err(stampede_core::validate::invalid(file, path, vec![Problem::new("http.tls.clientKey", e)])),
    }
}

/// Compiles the file, starting the built-in target first when `baseUrl: builtin`.
pub fn prepare(file: &ScenarioFile, path: &Path, mut opts: CompileOptions) -> Result<Prepared, PrepareError> {
    if opts.base_dir.is_none() {
        opts.base_dir = path.parent().map(Path::to_path_buf);
    }
    // The built-in target's address is part of the plan, so it starts first; the scenario is
    // compiled once, and the target stopped again when it is invalid.
    let mut target = None;
    if wants_builtin(file) && opts.base_url.is_none() {
        let spec = file.builtin_target.clone().unwrap_or_default();
        let options = stampede_target::TargetOptions {
            service_time: spec.service_time.map(stampede_model::Dur::get),
            concurrency: spec.concurrency.map(|n| n as usize),
            queue_limit: spec.queue_limit.map(|n| n as usize),
            // gRPC needs HTTP/2 (by prior knowledge over cleartext).
            http2: speaks_http2(file),
            ..Default::default()
        };
        let server = TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options)
            .map_err(RunError::Target)?;
        opts.base_url = Some(server.base_url());
        target = Some(server);
    }
    // With `grpc.reflect`, the server's services: asked of a valid file only (a scenario with
    // problems is reported as such, not as a server that could not be asked).
    let compiled = (|| -> Result<Plan, PrepareError> {
        if file.grpc.as_ref().is_some_and(|g| g.reflect) && opts.reflected.is_none() {
            // Asked at the file's `baseUrl`, resolved alone; the scenario then compiles once,
            // with the answer. When asking fails, a file with problems is reported as such.
            let asked = stampede_core::compile::plan::resolve_base_url(file, &opts)
                .ok()
                .flatten()
                .map(|base_url| reflection::ask(&reflection::Asking { file, path, base_url: &base_url }, &opts));
            match asked {
                Some(Ok(pool)) => opts.reflected = Some(pool),
                Some(Err(e)) => {
                    validate(file, path, &opts)?;
                    return Err(e.into());
                }
                // No usable `baseUrl`: the compile below says why.
                None => {}
            }
        }
        Ok(validate(file, path, &opts)?)
    })();
    match compiled {
        Ok(plan) => Ok(Prepared { plan: Arc::new(plan), target }),
        Err(e) => {
            if let Some(server) = target {
                server.stop();
            }
            Err(e)
        }
    }
}

/// Runs a prepared plan and builds its report. The built-in target's own CPU time is
/// left out of the generator's figures.
pub fn execute(prepared: Prepared, opts: &RunOptions, on_tick: &mut dyn FnMut(&Tick)) -> Result<Report, RunError> {
    execute_full(prepared, opts, on_tick).map(|(report, _)| report)
}

/// Runs a prepared capacity search (`executor: capacity`), plateau by plateau (`on_plateau`
/// after each), and builds its report with the curve and the answer (`report.capacity`).
pub fn execute_capacity(
    prepared: Prepared,
    opts: &RunOptions,
    on_tick: &mut dyn FnMut(&Tick),
    on_plateau: &mut dyn FnMut(&stampede_model::report::PlateauResult),
) -> Result<Report, RunError> {
    let Some(search) = prepared.plan.capacity.clone() else {
        return Err(RunError::Other("the scenario's executor is not `capacity`".into()));
    };
    let wanted = u64::from(prepared.plan.max_vus()) + 256;
    sysstat::raise_open_files(wanted);
    // `setup` and `teardown` run around the whole search (their figures are not a plateau's).
    let result = around_load(&prepared.plan, opts, |opts| capacity::search(&prepared.plan, opts, on_tick, on_plateau));
    let builtin = prepared.target.is_some();
    let target_cpu = prepared.target.map(TargetServer::stop).unwrap_or_default();
    let ((state, plateaus), _) = result?;
    Ok(capacity::whole_report(&prepared.plan, &search, &state, plateaus, (builtin, target_cpu), opts))
}

/// Runs the test's `setup` steps (what they extract goes to every VU), then `load`, then its
/// `teardown` steps — also when the load failed or was interrupted. A failed setup stops
/// there: no load, no teardown. Gives the load's result with what setup and teardown
/// recorded. With [`RunOptions::once_elsewhere`], only the load.
fn around_load<T>(
    plan: &Arc<Plan>,
    opts: &RunOptions,
    load: impl FnOnce(&RunOptions) -> Result<T, RunError>,
) -> Result<(T, Vec<OnceOutcome>), RunError> {
    if opts.once_elsewhere || (plan.setup.flow.is_empty() && plan.teardown.flow.is_empty()) {
        return load(opts).map(|t| (t, Vec::new()));
    }
    let setup = run_once(plan, Once::Setup, &BTreeMap::new())?;
    if let Some(why) = setup.failure {
        return Err(RunError::Setup(why));
    }
    tracing::info!(values = setup.values.len(), "setup done");
    let opts = RunOptions { setup_values: Arc::new(setup.values.clone()), ..opts.clone() };
    let result = load(&opts);
    let teardown = run_once(plan, Once::Teardown, &setup.values)?;
    if let Some(why) = &teardown.failure {
        tracing::warn!("teardown failed: {why}");
    }
    result.map(|t| (t, vec![setup, teardown]))
}

/// Like [`execute`], also returning the raw outcome (merged per-step histograms), which a
/// runner ships to the operator.
pub fn execute_full(
    prepared: Prepared,
    opts: &RunOptions,
    on_tick: &mut dyn FnMut(&Tick),
) -> Result<(Report, RunOutcome), RunError> {
    // One connection per VU, plus room for the runtime, the built-in target and files.
    let wanted = u64::from(prepared.plan.max_vus()) + 256;
    let limit = sysstat::raise_open_files(wanted);
    if limit < wanted {
        tracing::warn!(
            "the open-file limit ({limit}) is below what {} VUs need (about {wanted}): connections beyond it \
             will fail with `io` errors; raise it (ulimit -n, or the container runtime's nofile limit)",
            prepared.plan.max_vus()
        );
    }
    let before = sysstat::process();
    let wall = Instant::now();
    let outcome = around_load(&prepared.plan, opts, |opts| executor::run(prepared.plan.clone(), opts, on_tick));
    let wall = wall.elapsed();
    let after = sysstat::process();
    let builtin = prepared.target.is_some();
    let target_cpu = prepared.target.map(TargetServer::stop).unwrap_or_default();
    let (mut outcome, once) = outcome?;
    for o in once {
        outcome.metrics.merge(&o.metrics);
        outcome.error_samples.extend(o.error_samples);
    }
    let cpu = (after.cpu().saturating_sub(before.cpu())).saturating_sub(target_cpu);
    let generator = GeneratorFacts {
        cpu_percent: round3(cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9) * 100.0),
        cpu_seconds: round3(cpu.as_secs_f64()),
        cpu_micros_per_request: 0.0,
        peak_rss_bytes: after.max_rss_bytes,
        peak_vus: outcome.max_active_vus,
    };
    let report = report::build_report(&prepared.plan, &outcome, builtin, generator, opts.baseline());
    Ok((report, outcome))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Whole-scenario compiles ([`validate`]) on this thread.
        pub(super) static COMPILES: Cell<usize> = const { Cell::new(0) };
    }

    fn prepare_counted(yaml: &str) -> (Result<Prepared, PrepareError>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reflect.yaml");
        std::fs::write(&path, yaml).unwrap();
        let file = stampede_core::parse_str(yaml, &path).unwrap();
        COMPILES.with(|n| n.set(0));
        let prepared = prepare(&file, &path, CompileOptions::default());
        (prepared, COMPILES.with(Cell::get))
    }

    const REFLECT: &str = "name: reflect
baseUrl: builtin
load: {executor: constant-vus, vus: 1, iterations: 1}
grpc: {reflect: true}
scenarios:
  - name: s
    steps:
      - name: echo
        grpc: {method: stampede.target.v1.Target/Echo, message: {text: hi}}
";

    /// #34: a scenario with `grpc.reflect` compiles once: its `baseUrl` is resolved alone for
    /// the question, then the scenario compiles with the server's answer (it compiled twice).
    #[test]
    fn a_scenario_that_asks_its_server_for_the_services_compiles_once() {
        let (prepared, compiles) = prepare_counted(REFLECT);
        let prepared = prepared.unwrap();
        assert_eq!(compiles, 1);
        assert_eq!(prepared.plan.step_keys.len(), 1);
        prepared.target.map(TargetServer::stop);
    }

    /// When asking fails, a file with problems is reported by its problems, not as a server
    /// that could not be asked.
    #[test]
    fn a_file_with_problems_that_asks_a_server_that_is_not_there_is_reported_by_its_problems() {
        let yaml = REFLECT
            .replace("baseUrl: builtin", "baseUrl: http://127.0.0.1:1")
            .replace("vus: 1, iterations: 1", "vus: 0, iterations: 1");
        let (prepared, _) = prepare_counted(&yaml);
        match prepared {
            Err(PrepareError::Invalid(e)) => assert!(e.to_string().contains("load.vus"), "{e}"),
            other => panic!("{other:?}"),
        }
        let (prepared, _) = prepare_counted(&REFLECT.replace("baseUrl: builtin", "baseUrl: http://127.0.0.1:1"));
        assert!(matches!(prepared, Err(PrepareError::Run(_))), "{prepared:?}");
    }
}
