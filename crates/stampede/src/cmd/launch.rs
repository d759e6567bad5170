//! `stampede launch FILE`: creates a LoadTest from a manifest, waits until the operator says it
//! finished and exits with its verdict. The exit code is the gate: a CI job, an Argo CD PostSync
//! hook Job or an Argo Rollouts analysis Job passes or fails with it.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
// serde as k8s-openapi re-exports it: the crate needs its trait only to read YAML documents.
use k8s_openapi::serde::Deserialize as _;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource as _};
use stampede_api::{LoadTest, LoadTestStatus, Phase};

/// What `stampede launch --help` says about its exit codes.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  the LoadTest finished and passed (condition Passed=True)
  1  it finished and did not pass: thresholds failed, a runner failed, its spec is invalid
     (phase Failed), or it was aborted (phase Aborted)
  2  bad input or an API error: the file is missing, is not one LoadTest, a field has the
     wrong type, the API server refused it, the cluster cannot be reached, ...
  3  it did not finish within --timeout (it goes on running)
With --no-wait: 0 once it is created, 2 as above.";

/// The field manager of the LoadTests `stampede launch` creates.
const FIELD_MANAGER: &str = "stampede-launch";

#[derive(Args)]
pub(crate) struct LaunchArgs {
    /// The LoadTest manifest (YAML, one document); `-` reads it from stdin. Give it
    /// `metadata.generateName` to create a new LoadTest on each launch.
    file: String,
    /// Namespace to create it in (default: the manifest's, else the kubeconfig's or the pod's).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Replace `spec.scenario.baseUrl` (the service under test), e.g. http://checkout.shop:8080.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Longest wait for the verdict, from the creation (e.g. 90s, 20m, 1h30m).
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = parse_timeout)]
    timeout: Duration,
    /// Only create the LoadTest and print its name.
    #[arg(long)]
    no_wait: bool,
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    match stampede_model::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be more than 0".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `stampede launch`; every error is exit code 2 (the others are verdicts).
pub(crate) fn launch(args: LaunchArgs) -> ExitCode {
    let result = read_manifest(&args).and_then(|manifest| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(create_and_wait(manifest, &args))
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A checked manifest: the object to send (unknown fields and all, for the API server's strict
/// field validation) and its typed reading.
struct Manifest {
    /// How messages name the input: the file, or `stdin`.
    source: String,
    object: serde_json::Value,
    typed: LoadTest,
}

/// Reads FILE, checks that it is one LoadTest with a name or generateName and that its fields
/// have the right types (naming field, line and column otherwise), and applies `--base-url`.
fn read_manifest(args: &LaunchArgs) -> anyhow::Result<Manifest> {
    let (source, text) = if args.file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the manifest from stdin")?;
        ("stdin".to_string(), text)
    } else {
        let text = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {}", args.file))?;
        (args.file.clone(), text)
    };
    // The documents that are not empty (a leading or trailing `---` makes an empty one).
    let mut docs = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = serde_json::Value::deserialize(doc).with_context(|| format!("{source} is not valid YAML"))?;
        if !value.is_null() {
            docs.push((index, value));
        }
    }
    let (index, mut object) = match docs.len() {
        0 => {
            bail!("{source} is empty: expected a LoadTest manifest (apiVersion: stampede.dev/v1alpha1, kind: LoadTest)")
        }
        1 => docs.remove(0),
        n => bail!("{source} holds {n} YAML documents: give it exactly one LoadTest"),
    };
    let field = |name: &str| object.get(name).and_then(serde_json::Value::as_str).unwrap_or("(none)").to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if !object.is_object() || api_version != "stampede.dev/v1alpha1" || kind != "LoadTest" {
        bail!(
            "{source} is not a LoadTest: found apiVersion {api_version}, kind {kind}; expected apiVersion \
             stampede.dev/v1alpha1, kind LoadTest"
        );
    }
    if object.get("metadata").is_none_or(|m| m.get("name").is_none() && m.get("generateName").is_none()) {
        bail!("{source}: set metadata.name, or metadata.generateName for a new LoadTest on each launch");
    }
    // Typed, from the YAML itself: a wrong type is named by field path, line and column.
    let doc = serde_yaml::Deserializer::from_str(&text).nth(index).context("the document went missing")?;
    let typed = LoadTest::deserialize(doc).with_context(|| format!("{source} is not a valid LoadTest"))?;
    if let Some(url) = &args.base_url {
        stampede_engine::HttpUrl::parse(url).map_err(|e| anyhow!("--base-url: {e}"))?;
        let scenario = object.pointer_mut("/spec/scenario").and_then(serde_json::Value::as_object_mut);
        let Some(scenario) = scenario else {
            bail!(
                "--base-url replaces spec.scenario.baseUrl, but {source} has no inline spec.scenario{}",
                if typed.spec.scenario_from.is_some() { " (it takes it from spec.scenarioFrom)" } else { "" }
            );
        };
        scenario.insert("baseUrl".into(), url.clone().into());
    }
    Ok(Manifest { source, object, typed })
}

/// A kube error as one line: the API server's message and reason, or the error and its causes
/// (e.g. `client error (Connect): tcp connect error: Connection refused`).
fn describe(e: &kube::Error) -> String {
    if let kube::Error::Api(status) = e {
        return format!("{} ({}, HTTP {})", status.message, status.reason, status.code);
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let line = c.to_string();
        if !text.contains(&line) {
            text = format!("{text}: {line}");
        }
        cause = c.source();
    }
    text
}

async fn create_and_wait(mut manifest: Manifest, args: &LaunchArgs) -> anyhow::Result<ExitCode> {
    // The error's own text only: its sources repeat it.
    let client = Client::try_default()
        .await
        .map_err(|e| anyhow!("no usable kubeconfig ($KUBECONFIG, ~/.kube/config) or in-cluster configuration: {e}"))?;
    let ns = args
        .namespace
        .clone()
        .or_else(|| manifest.typed.metadata.namespace.clone())
        .unwrap_or_else(|| client.default_namespace().to_string());
    manifest.object["metadata"]["namespace"] = ns.clone().into();
    let what = match (&manifest.typed.metadata.name, &manifest.typed.metadata.generate_name) {
        (Some(name), _) => format!("LoadTest {ns}/{name}"),
        (None, prefix) => format!("LoadTest {ns}/{}*", prefix.as_deref().unwrap_or_default()),
    };
    let created = create(&client, &ns, &manifest.object).await.map_err(|e| {
        let hint = match &e {
            kube::Error::Api(s) if s.reason == "AlreadyExists" => {
                "; use metadata.generateName to create a new LoadTest on each launch"
            }
            _ => "",
        };
        anyhow!("cannot create {what} from {}: {}{hint}", manifest.source, describe(&e))
    })?;
    let name = created.metadata.name.clone().context("the API server returned the LoadTest without a name")?;
    println!("loadtest.stampede.dev/{name} created");
    let _ = std::io::stdout().flush();
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    wait(Api::namespaced(client, &ns), &ns, &name, args.timeout).await
}

/// POST with strict field validation (as `kubectl create` does): an unknown or misspelt field
/// is an error, not silently dropped.
async fn create(client: &Client, ns: &str, object: &serde_json::Value) -> Result<LoadTest, kube::Error> {
    let request = kube::core::Request::new(LoadTest::url_path(&(), Some(ns)));
    let params = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
    let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
    let mut http = request.create(&params, body).map_err(kube::Error::BuildRequest)?;
    let uri = format!("{}&fieldValidation=Strict", http.uri());
    *http.uri_mut() = uri.parse().map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request(http).await
}

fn condition<'a>(status: &'a LoadTestStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a watch error means it can never work (not allowed, no such resource): retrying
/// would only run into the timeout.
fn is_permanent(e: &watcher::Error) -> Option<String> {
    let status = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s,
        watcher::Error::WatchError(s) => s,
        _ => return None,
    };
    matches!(status.code, 401 | 403 | 404)
        .then(|| format!("{} ({}, HTTP {})", status.message, status.reason, status.code))
}

/// Watches the LoadTest until its condition `Finished` is True, printing each phase it enters,
/// then its verdict; or until `timeout`.
async fn wait(api: Api<LoadTest>, ns: &str, name: &str, timeout: Duration) -> anyhow::Result<ExitCode> {
    let deadline = tokio::time::Instant::now() + timeout;
    let events = watcher::watch_object(api, name).default_backoff();
    tokio::pin!(events);
    let mut phase: Option<Phase> = None;
    loop {
        let Ok(event) = tokio::time::timeout_at(deadline, events.next()).await else {
            let last = phase.map_or_else(|| "no status yet".to_string(), |p| format!("phase {p:?}"));
            let _ = std::io::stdout().flush();
            eprintln!(
                "timeout: loadtest.stampede.dev/{name} did not finish within {} ({last}); it goes on running \
                 (kubectl -n {ns} delete loadtest {name} stops it)",
                stampede_model::Dur(timeout)
            );
            return Ok(ExitCode::from(3));
        };
        let lt = match event {
            None => bail!("the watch of LoadTest {ns}/{name} ended"),
            Some(Err(e)) => {
                if let Some(why) = is_permanent(&e) {
                    bail!("cannot watch LoadTest {ns}/{name} (it needs get, list and watch on loadtests): {why}");
                }
                eprintln!("warning: watching LoadTest {ns}/{name}: {e}; retrying");
                continue;
            }
            Some(Ok(None)) => bail!("LoadTest {ns}/{name} was deleted before it finished"),
            Some(Ok(Some(lt))) => lt,
        };
        let Some(status) = lt.status else { continue };
        if phase != Some(status.phase) {
            phase = Some(status.phase);
            match status.message.as_deref().filter(|m| !m.is_empty()) {
                Some(message) => println!("{name}: {:?}: {message}", status.phase),
                None => println!("{name}: {:?}", status.phase),
            }
        }
        if condition(&status, "Finished").is_some_and(|c| c.status == "True") {
            let passed = print_outcome(&status);
            let _ = std::io::stdout().flush();
            return Ok(if passed { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
    }
}

/// Prints the verdict, the summary and each failed threshold; whether it passed.
fn print_outcome(status: &LoadTestStatus) -> bool {
    print!("{}", outcome_text(status));
    condition(status, "Passed").is_some_and(|c| c.status == "True")
}

/// The lines printed when a LoadTest has finished.
fn outcome_text(status: &LoadTestStatus) -> String {
    let mut out = String::new();
    match condition(status, "Passed") {
        Some(c) if c.status == "True" => out.push_str("verdict: Passed\n"),
        passed => {
            let verdict = match stampede_api::verdict(status.phase) {
                "" | "Passed" => "Failed",
                v => v,
            };
            let reason = passed.map(|c| c.reason.as_str()).filter(|r| !r.is_empty()).unwrap_or(verdict);
            let message = passed.map(|c| c.message.as_str()).filter(|m| !m.is_empty());
            match message {
                Some(m) => out.push_str(&format!("verdict: {verdict} ({reason}: {m})\n")),
                None => out.push_str(&format!("verdict: {verdict} ({reason})\n")),
            }
        }
    }
    match &status.summary {
        Some(s) => out.push_str(&format!(
            "summary: {} requests, {:.1} req/s, error rate {:.2}%, p99 {}\n",
            s.requests,
            s.rps,
            s.error_rate * 100.0,
            if s.requests > 0 { s.p99.as_str() } else { "-" }
        )),
        None => out.push_str("summary: none (no runner reported)\n"),
    }
    for t in status.thresholds.iter().filter(|t| !t.passed) {
        out.push_str(&format!("threshold failed: {} (actual {})", t.threshold, t.actual_text));
        if let Some(m) = &t.message {
            out.push_str(&format!(": {m}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: serde_json::Value) -> LoadTestStatus {
        serde_json::from_value(json).unwrap()
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
        serde_json::json!({"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z"})
    }

    fn summary() -> serde_json::Value {
        let summary = stampede_api::Summary {
            is_final: true,
            requests: 300,
            rps: 149.84,
            error_rate: 0.0123,
            errors: "1.23%".into(),
            p99: "3.2ms".into(),
            ..stampede_api::Summary::default()
        };
        serde_json::to_value(summary).unwrap()
    }

    #[test]
    fn a_passed_loadtest_prints_its_verdict_and_summary() {
        let st = status(serde_json::json!({
            "phase": "Succeeded",
            "conditions": [cond("Finished", "True", "Succeeded", ""), cond("Passed", "True", "Passed", "every threshold passed")],
            "summary": summary(),
            "thresholds": [{"threshold": "errors.rate < 5%", "passed": true, "actual": 1.23, "actualText": "1.23%"}],
        }));
        assert_eq!(
            outcome_text(&st),
            "verdict: Passed\nsummary: 300 requests, 149.8 req/s, error rate 1.23%, p99 3.2ms\n"
        );
        assert!(print_outcome(&st));
    }

    #[test]
    fn a_failed_loadtest_prints_the_reason_and_each_failed_threshold() {
        let st = status(serde_json::json!({
            "phase": "Failed",
            "conditions": [cond("Finished", "True", "Failed", "x"),
                cond("Passed", "False", "ThresholdsFailed", "thresholds failed: latency.p99 < 1ms")],
            "summary": summary(),
            "thresholds": [
                {"threshold": "errors.rate < 5%", "passed": true, "actual": 1.23, "actualText": "1.23%"},
                {"threshold": "latency.p99 < 1ms", "passed": false, "actual": 3.2, "actualText": "3.2ms"},
                {"threshold": "latency.p99 < baseline * 1.1", "passed": false, "actual": 3.2, "actualText": "3.2ms",
                    "message": "no baseline"},
            ],
        }));
        assert_eq!(
            outcome_text(&st),
            "verdict: Failed (ThresholdsFailed: thresholds failed: latency.p99 < 1ms)\n\
             summary: 300 requests, 149.8 req/s, error rate 1.23%, p99 3.2ms\n\
             threshold failed: latency.p99 < 1ms (actual 3.2ms)\n\
             threshold failed: latency.p99 < baseline * 1.1 (actual 3.2ms): no baseline\n"
        );
        assert!(!print_outcome(&st));
    }

    #[test]
    fn an_aborted_or_invalid_loadtest_without_figures_does_not_pass() {
        let st = status(serde_json::json!({
            "phase": "Aborted",
            "conditions": [cond("Finished", "True", "Aborted", ""), cond("Passed", "False", "Aborted", "")],
        }));
        assert_eq!(outcome_text(&st), "verdict: Aborted (Aborted)\nsummary: none (no runner reported)\n");
        assert!(!print_outcome(&st));
        let st = status(serde_json::json!({
            "phase": "Failed",
            "conditions": [cond("Finished", "True", "Failed", ""),
                cond("Passed", "False", "InvalidSpec", "unknown variable `nope`")],
        }));
        assert_eq!(
            outcome_text(&st),
            "verdict: Failed (InvalidSpec: unknown variable `nope`)\nsummary: none (no runner reported)\n"
        );
    }

    #[test]
    fn the_timeout_takes_a_duration_with_a_unit() {
        assert_eq!(parse_timeout("20m"), Ok(Duration::from_secs(1200)));
        assert_eq!(parse_timeout("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_timeout("0"), Err("must be more than 0".to_string()));
        assert!(parse_timeout("20").is_err());
    }
}
