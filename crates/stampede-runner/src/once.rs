//! The pod that runs a LoadTest's `setup` or `teardown` once for the whole test (the operator
//! creates it as a Job of one pod that is never retried, before the runners and after them).
//!
//! 1. reads the scenario stored for the run and compiles it whole (as one VU of no share);
//! 2. runs the steps once ([`stampede_engine::run_once`]); `teardown` with the values `setup`
//!    gave ([`RunnerEnv::setup_values`], from the run's Secret);
//! 3. `setup` that succeeded: writes its values to its run's Secret ([`names::setup_secret`], the
//!    runners' `STAMPEDE_SETUP_VALUES`), never to a log or a ConfigMap;
//! 4. writes what happened ([`OnceStatus`]: state, counts, the values' names) to its key of the
//!    ConfigMap [`names::once_config_map`], which the operator reads.
//!
//! Exit codes: 0 every step passed, 1 a step failed (reported), 2 invalid input, 3 could not
//! run or report.

use std::collections::BTreeMap;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use stampede_api::{OnceState, OnceStatus, SETUP_KEY, SETUP_VALUES_KEY, TEARDOWN_KEY, names};
use stampede_engine::{Once, OnceOutcome};
use tracing::{error, info, warn};

use crate::api::{FINAL_ATTEMPTS, retry};
use crate::env::RunnerEnv;
use crate::{RunnerError, compile_options, error_chain, read_scenario};

/// Runs `which` once and reports it; the exit code as the module says.
pub(crate) async fn main(env: &RunnerEnv, client: &Client, which: Once) -> ExitCode {
    let key = if which == Once::Setup { SETUP_KEY } else { TEARDOWN_KEY };
    let started = now();
    let (code, mut status) = match run(env, client, which).await {
        Ok((outcome, values)) => {
            let requests = outcome.metrics.steps.iter().map(|s| s.requests).sum();
            let failures = outcome.metrics.steps.iter().map(|s| s.errors.iter().sum::<u64>()).sum();
            let failed = outcome.failure.is_some();
            let status = OnceStatus {
                state: if failed { OnceState::Failed } else { OnceState::Succeeded },
                message: outcome.failure.clone(),
                requests,
                failures,
                values: values.keys().cloned().collect(),
                ..OnceStatus::default()
            };
            info!(which = ?which, requests, failures, values = ?status.values, "done");
            if !failed && which == Once::Setup {
                // The values first (`{}` when none: the runners cannot start without them, and
                // would not run setup themselves): the operator starts the runners once the
                // report says Succeeded.
                if let Err(e) = write_values(env, client, &values).await {
                    let message = format!("cannot write the setup's values to its Secret: {e}");
                    error!("{message}");
                    let status = OnceStatus { state: OnceState::Failed, message: Some(message), ..status };
                    return report(env, client, key, status, started, 3).await;
                }
            }
            (if failed { 1 } else { 0 }, status)
        }
        Err(e) => {
            let message = error_chain(&e);
            error!("{which:?} could not run: {message}");
            (e.exit_code(), OnceStatus { state: OnceState::Failed, message: Some(message), ..OnceStatus::default() })
        }
    };
    status.run = env.run.clone();
    report(env, client, key, status, started, code).await
}

/// Reads and compiles the scenario, and runs `which` on a blocking thread.
async fn run(
    env: &RunnerEnv,
    client: &Client,
    which: Once,
) -> Result<(OnceOutcome, BTreeMap<String, String>), RunnerError> {
    let (whole, path) = read_scenario(env, client).await?;
    let prepared = stampede_engine::prepare(&whole, &path, compile_options(None)).map_err(|e| match e {
        stampede_engine::PrepareError::Invalid(e) => RunnerError::Scenario(e),
        stampede_engine::PrepareError::Run(e) => RunnerError::Prepare(e),
    })?;
    let plan = prepared.plan.clone();
    let given = env.setup_values.clone().unwrap_or_default();
    info!(which = ?which, "running once for the LoadTest");
    let outcome = tokio::task::spawn_blocking(move || stampede_engine::run_once(&plan, which, &given))
        .await
        .map_err(|e| RunnerError::LoadTest(format!("{which:?} panicked: {e}")))?
        .map_err(RunnerError::Run);
    if let Some(t) = prepared.target {
        t.stop();
    }
    let outcome = outcome?;
    let values = outcome.values.clone();
    Ok((outcome, values))
}

async fn write_values(env: &RunnerEnv, client: &Client, values: &BTreeMap<String, String>) -> Result<(), kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &env.namespace);
    let name = names::setup_secret(&env.loadtest, env.run.as_deref().unwrap_or_default());
    let text = serde_json::to_string(values).unwrap_or_default();
    let patch = serde_json::json!({ "stringData": { SETUP_VALUES_KEY: text } });
    retry(&format!("patch secret {name}"), FINAL_ATTEMPTS, || async {
        secrets.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
    })
    .await
}

/// Writes `status` (started at `started`, ended now) to the run's once ConfigMap; `code`, or 3
/// when it cannot be written.
async fn report(
    env: &RunnerEnv,
    client: &Client,
    key: &str,
    mut status: OnceStatus,
    started: String,
    code: u8,
) -> ExitCode {
    status.start_time = Some(started);
    status.completion_time = Some(now());
    status.run = env.run.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &env.namespace);
    let name = names::once_config_map(&env.loadtest);
    let patch = serde_json::json!({ "data": { key: serde_json::to_string(&status).unwrap_or_default() } });
    let sent = retry(&format!("patch configmap {name}"), FINAL_ATTEMPTS, || async {
        config_maps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
    })
    .await;
    match sent {
        Ok(()) => ExitCode::from(code),
        Err(e) => {
            warn!("cannot report: {e}");
            ExitCode::from(3)
        }
    }
}

fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
