//! `stampede`: run a load test on this machine, serve the built-in target, validate files,
//! and (`stampede runner`) run as one of a LoadTest's runner pods.
//!
//! Exit codes: 0 the run completed, 1 thresholds failed or the run was aborted (`onError:
//! abort-run`, `abortOnFail`), 2 invalid input, 3 could not run.

use std::io::{IsTerminal as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use stampede_engine::IntervalStats;
use stampede_engine::{CompileOptions, RunOptions, Tick};
use stampede_engine::{Exporter, MetricsServer};
use stampede_model::scenario::ScenarioFile;
use stampede_model::{Dur, parse_duration};

mod files;
mod history;

mod launch;

mod import;
mod quick;

/// The workspace's seeded fuzz runner (its fuzz tests share one file).
#[cfg(test)]
#[path = "../../stampede-engine/tests/engine/fuzz/support.rs"]
mod fuzz_support;

#[derive(Parser)]
#[command(name = "stampede", version, about = "Load testing that fits Kubernetes: fast, correct numbers, one binary")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file and print a summary.
    Run(Box<RunArgs>),
    /// Check a scenario file without running it.
    Validate {
        /// Scenario file (YAML).
        file: PathBuf,
    },
    /// Serve the built-in target (a fast httpbin-like test server). With --service-time T and
    /// --concurrency N its capacity is known: N / T requests per second (8 × 10ms → 800/s).
    Target(TargetArgs),
    /// Print the CustomResourceDefinitions (YAML): LoadTest and LoadTestSchedule, or the one named.
    Crd {
        #[arg(value_enum)]
        which: Option<CrdKind>,
    },
    /// Run as runner JOB_COMPLETION_INDEX of STAMPEDE_RUNNERS for LoadTest STAMPEDE_LOADTEST in
    /// STAMPEDE_NAMESPACE (what the operator's runner pods run).
    Runner,
    /// Print the reference of the scenario language (functions, variables, scopes, blocks) in
    /// Markdown, as docs/scenario-language.md holds it.
    Docs,
    /// Print a JSON Schema: of scenario files or of the JSON report.
    Schema {
        #[arg(value_enum)]
        which: SchemaKind,
    },
    /// Compare two runs: a verdict first (what got better or worse beyond run-to-run noise,
    /// judged from each run's own spread), then, with --details, the change of every figure per
    /// step and in total. Each run is a JSON report (`stampede run --out`) or `loadtest/NAME`
    /// (its report, read with the kubeconfig). Exit codes: 0, 1 a --fail-on rule broke, 2
    /// invalid input.
    Compare {
        /// The baseline run: a JSON report or loadtest/NAME.
        base: String,
        /// The new run: a JSON report or loadtest/NAME.
        new: String,
        /// Namespace of the LoadTests (default: the kubeconfig's).
        #[arg(long, short = 'n')]
        namespace: Option<String>,
        /// Also print the full table: every figure of every step in both runs.
        #[arg(long)]
        details: bool,
        /// Exit 1 when the total's figure moves this way by more than this, beyond noise:
        /// `p99:+10%`, `rps:-5%`, `errors.rate:+0.5pp` (repeatable; figures p50, p90, p95, p99,
        /// p99.9, max, rps, errors.rate).
        #[arg(long = "fail-on", value_name = "RULE")]
        fail_on: Vec<String>,
    },
    /// Print the runs of a LoadTest (loadtest/NAME: its earlier runs and its current one) or of
    /// a LoadTestSchedule (loadtestschedule/NAME), oldest first, with the change from each run to
    /// the one before.
    History(history::HistoryArgs),
    /// Write the HTML report of a run: from its JSON report (`stampede run --out`), or of a
    /// LoadTest as `loadtest/NAME` (its merged report, read with the kubeconfig; with the trend
    /// of its runs when it has run more than once).
    Report {
        /// The run: a JSON report or loadtest/NAME.
        report: String,
        /// The HTML file to write.
        #[arg(long, short)]
        out: PathBuf,
        /// Show this earlier run beside it (changes, and its lines in the charts): a JSON
        /// report or loadtest/NAME.
        #[arg(long, value_name = "RUN")]
        baseline: Option<String>,
        /// Namespace of the LoadTests (default: the kubeconfig's).
        #[arg(long, short = 'n')]
        namespace: Option<String>,
    },
    /// Turn a test you already have into a Stampede scenario (YAML to review: comments say
    /// where each part came from, secrets become `{{env.NAME}}`, what could not be converted is
    /// listed). Exit codes: 0 imported (warnings on stderr), 2 nothing HTTP in the input (or it
    /// does not parse), 3 a bug of ours (the output did not validate; written anyway).
    #[command(after_long_help = IMPORT_SECRETS)]
    Import {
        /// What the input is.
        #[arg(value_enum)]
        format: ImportFormat,
        /// The file to import (`-` or nothing: standard input).
        input: Option<PathBuf>,
        /// Write the scenario here instead of standard output.
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// HAR: keep the requests for scripts, styles, images and fonts.
        #[arg(long)]
        keep_static: bool,
        /// Print (or write with -o) a LoadTest that runs the scenario in a cluster instead, its
        /// `{{env.NAME}}`s from a Secret (spec.env, valueFrom.secretKeyRef), never inline.
        #[arg(long)]
        print_loadtest: bool,
        /// The origin of requests whose source gives none (a relative server URL, a collection's
        /// undefined `{{baseUrl}}`, a JMeter sampler without a domain), written in instead of
        /// `{{env.BASE_URL}}`.
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Postman: an environment file (exported from Postman); its variables win over the
        /// collection's, its credentials become `{{env.NAME}}` as the collection's do.
        #[arg(long, value_name = "FILE")]
        env: Option<PathBuf>,
    },
    /// Create a LoadTest from a manifest and wait for its verdict: the exit code is the gate
    /// for CI jobs, Argo CD hooks and Argo Rollouts analyses (uses the kubeconfig, or the
    /// in-cluster configuration).
    #[command(after_help = launch::EXIT_CODES)]
    Launch(launch::LaunchArgs),
}

/// `stampede import --help`: the rules, and the one for credentials.
const IMPORT_SECRETS: &str = "\
Every input with at least one HTTP request imports to a scenario that validates (exit 0);
what is not converted is listed on stderr and at the top of the file. The output is validated
with the real environment; a variable it reads that is unset gets a stand-in, a data file or
upload not there yet a warning. A missing origin (a relative server, an undefined
{{baseUrl}}, a sampler without a server) is {{env.BASE_URL}} unless --base-url gives it.
baseUrl may use constant vars (http://{{host}}:{{port}}); {{env.NAME:-default}} has a default.
Multi-line bodies are YAML block scalars; braces in recorded text are sent as text; a BOM is
skipped. curl: the request is what Debian's curl sends (-d, --data-raw, --data-binary,
--data-urlencode, --json, -G, --url-query, -F, -u, -b, -H, -X, -A, -e, -I, -L, --compressed,
-k, -g; -x is a proxy, listed). JMeter: ${__P(name,default)} defaults, nested functions,
unique names, ramp-up as ramping-vus. HAR: params bodies, cache conditions dropped,
correlation from JSON, Location, ETag and HTML form fields. OpenAPI 3.x and Swagger 2.0.


Credentials are never written as recorded, in a step or a comment. Headers (Authorization,
Proxy-Authorization, Cookie, X-Api-Key and names with api-key, token, secret, session, auth),
query keys and JSON or form body fields (api_key, access_token, token, key, sig, signature,
password, secret, auth, session_id, client_secret…), a URL's user-info and curl's -u,
--oauth2-bearer and -b become {{env.NAME}}: one variable per host and credential
(API_EXAMPLE_COM_AUTHORIZATION, OTHER_HOST_AUTHORIZATION; _2 for another value). An
Authorization header keeps its scheme (Bearer {{env.NAME}}); a Basic one's variable holds
base64 of user:password. stderr names each variable to set (never its value); the output is
validated as if they were set. curl's --proxy-user, --proxy and --cert are listed as not
converted, without their values.";

#[derive(Clone, Copy, clap::ValueEnum)]
enum ImportFormat {
    /// curl command lines (as browsers' "copy as cURL" writes them), one or more.
    Curl,
    /// A Postman collection (v2.1 JSON): its requests, folders, variables and auth.
    Postman,
    /// An OpenAPI 3.0 or 3.1 description (JSON or YAML): a step per operation.
    Openapi,
    /// A browser's recording (HAR): a step per request, static assets left out, values earlier
    /// responses returned (tokens, ids) correlated.
    Har,
    /// A JMeter plan (.jmx): thread groups, HTTP samplers and defaults, header managers, CSV
    /// data, JSON and regex extractors, response assertions, timers, transaction controllers.
    Jmx,
}

impl From<ImportFormat> for import::command::Format {
    fn from(f: ImportFormat) -> Self {
        match f {
            ImportFormat::Curl => Self::Curl,
            ImportFormat::Postman => Self::Postman,
            ImportFormat::Openapi => Self::Openapi,
            ImportFormat::Har => Self::Har,
            ImportFormat::Jmx => Self::Jmx,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CrdKind {
    Loadtest,
    Loadtestschedule,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SchemaKind {
    Scenario,
    Report,
}

#[derive(Args)]
#[command(after_help = RUN_EXAMPLES)]
struct RunArgs {
    /// A scenario file (YAML), `-` to read one from standard input, or a URL to load without a
    /// file (http:// or https://).
    #[arg(value_name = "FILE|-|URL")]
    target: String,
    /// Run this many VUs (a URL's connections, as oha's `-c`), overriding or supplying the
    /// file's `load`; with --rate, the VUs that serve the rate. A URL: 50 by default.
    #[arg(long, short = 'c', visible_alias = "connections", value_name = "N")]
    vus: Option<u32>,
    /// Run for this long (e.g. 30s), overriding or supplying the file's `load`.
    #[arg(long, short = 'z', value_parser = parse_dur, value_name = "DURATION")]
    duration: Option<Dur>,
    /// Run this many iterations in total (a URL's requests, as oha's `-n`), overriding or
    /// supplying the file's `load`. A URL: 200 by default, unless --duration is given.
    #[arg(long, short = 'n', value_name = "N")]
    iterations: Option<u64>,
    /// An open model: start this many iterations per second whatever the answers take
    /// (`constant-arrival-rate`), for --duration, or until --iterations have started.
    #[arg(long, short = 'q', value_name = "PER_SECOND")]
    rate: Option<u32>,
    /// A URL's method (default GET, or POST with a body).
    #[arg(long, short = 'm', value_name = "METHOD")]
    method: Option<String>,
    /// A URL's request header, `Name: value` (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// A URL's request body.
    #[arg(long = "data", short = 'd', value_name = "BODY", conflicts_with = "data_file")]
    data: Option<String>,
    /// A URL's request body, read from this file.
    #[arg(long = "data-file", short = 'D', value_name = "FILE")]
    data_file: Option<PathBuf>,
    /// Speak HTTP/2 (TLS via ALPN; cleartext with prior knowledge), as `http.version: "2"`.
    #[arg(long)]
    http2: bool,
    /// Accept any server certificate (tests only), as `http.tls.insecure: true`.
    #[arg(long, short = 'k')]
    insecure: bool,
    /// A threshold, e.g. "latency.p99 < 200ms" (repeatable; added to the file's).
    #[arg(long = "threshold", value_name = "EXPR")]
    thresholds: Vec<String>,
    /// Print the scenario this would run (YAML, with every flag applied) and exit: a quick try
    /// becomes a file.
    #[arg(long, conflicts_with = "print_loadtest")]
    print_scenario: bool,
    /// Print a LoadTest (YAML) that runs this scenario in a cluster, and exit.
    #[arg(long)]
    print_loadtest: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the report as JSON to this file once the run ended (whole: a temporary file in
    /// the same folder, then renamed). Invalid input or a run that could not take place leaves
    /// an existing file as it was; it may be the --baseline.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the report as one self-contained HTML file (charts included) to this file, as
    /// --out writes its file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write JUnit XML to this file for CI test reports: each threshold and each check a test
    /// case (failed with the actual value and why), and the run itself (aborted, load not
    /// delivered). A run that could not take place (its setup failed, the built-in target or
    /// the workers could not start) writes one `run` case in error with the reason; invalid
    /// input writes nothing.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Append a Markdown summary to this file (e.g. "$GITHUB_STEP_SUMMARY"): the verdict, the
    /// steps' figures, the thresholds and the failed checks; for a run that could not take
    /// place, why. Invalid input appends nothing.
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
    /// An earlier run (a JSON report, or loadtest/NAME) that relative thresholds
    /// (`latency.p99 < baseline * 1.10`) are judged against; the HTML report shows it beside this run.
    #[arg(long, value_name = "RUN")]
    baseline: Option<String>,
    /// No progress lines on stderr.
    #[arg(long, short = 's')]
    quiet: bool,
    /// Also print the latency phases per step: DNS, connect, TLS, time to first byte, receive.
    #[arg(long)]
    phases: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 2, value_name = "SECONDS")]
    progress_every: u64,
    /// Replace the file's baseUrl.
    #[arg(long)]
    base_url: Option<String>,
    /// Seed of the run's random choices (data rows, scenario picks, think times, `uuid()`,
    /// `randomInt(…)`, WebSocket keys…), replacing the file's `seed`: the same seed, the same
    /// choices; without one, each run differs.
    #[arg(long)]
    seed: Option<u64>,
    /// Serve Prometheus metrics at http://ADDR/metrics while the run lasts (e.g. 127.0.0.1:9464;
    /// port 0 picks one and prints it).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

const RUN_EXAMPLES: &str = "Examples:
  stampede run examples/quickstart.yaml                a scenario file
  stampede run http://127.0.0.1:8080/ -c 50 -z 10s     one URL, 50 connections for 10 s
  stampede run http://127.0.0.1:8080/ -q 2000 -z 5s    one URL at 2000 requests/s (open model)
  cat scenario.yaml | stampede run - --vus 10          a scenario from standard input
  stampede run URL -m POST -H 'Content-Type: application/json' -d '{\"a\":1}' --print-scenario

Exit codes: 0 passed, 1 a threshold failed, the run was aborted, its setup failed or its load
was not delivered, 2 invalid input, 3 could not run.";

#[derive(Args)]
struct TargetArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Speak HTTP/2 as well as HTTP/1.1: by prior knowledge over cleartext (h2c), or when a
    /// client picks `h2` in the TLS handshake.
    #[arg(long)]
    http2: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Every request but /stats takes this long (e.g. 10ms) before its route answers. Alone
    /// it is a pure delay with no limit on concurrency.
    #[arg(long, value_name = "DURATION", value_parser = parse_dur)]
    service_time: Option<Dur>,
    /// At most N requests in their service time at once; the rest wait in a FIFO queue. The
    /// target's capacity is then N / service time requests per second (8 × 10ms → 800/s):
    /// beyond it latency grows. Needs --service-time.
    #[arg(long, value_name = "N", value_parser = parse_concurrency, requires = "service_time")]
    concurrency: Option<usize>,
    /// Answer 503 at once when N requests already wait for --concurrency (errors grow instead
    /// of latency). Default: the queue is unbounded.
    #[arg(long, value_name = "N", requires = "concurrency")]
    queue_limit: Option<usize>,
}

fn parse_concurrency(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1: it is how many requests are in service at once".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: write a whole number of requests, e.g. 8")),
    }
}

fn parse_dur(s: &str) -> Result<Dur, stampede_model::DurationError> {
    parse_duration(s).map(Dur)
}

/// A failure and the exit code it maps to.
enum Failure {
    Invalid(anyhow::Error),
    CouldNotRun(anyhow::Error),
    /// The test failed before its load: its `setup` did (exit 1, as a failed threshold).
    SetupFailed(anyhow::Error),
}

fn run_failed(e: stampede_engine::RunError) -> Failure {
    match e {
        stampede_engine::RunError::Setup(_) => Failure::SetupFailed(anyhow::Error::new(e)),
        e => Failure::CouldNotRun(anyhow::Error::new(e).context("the run failed")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A runner's log is its pod log: say what it does. The CLI stays quiet but for warnings.
    // `launch` says itself what went wrong with a request or a watch (kube would log it too).
    let default_filter = match cli.command {
        Command::Runner => "info",
        Command::Launch(_) => "warn,kube_client=off,kube_runtime=off",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Runner => return stampede_runner::main(),
        Command::Launch(args) => return launch::launch(args),
        Command::Run(args) => run(*args),
        Command::Validate { file } => validate(&file),
        Command::Target(args) => target(args),
        Command::Report { report, out, baseline, namespace } => {
            html_report(&report, &out, baseline.as_deref(), namespace.as_deref())
        }
        Command::Compare { base, new, namespace, details, fail_on } => {
            compare(&base, &new, namespace.as_deref(), details, &fail_on)
        }
        Command::History(args) => history::history(args),
        Command::Import { format, input, out, keep_static, print_loadtest, base_url, env } => {
            import::command::import(&import::command::Request {
                format: format.into(),
                input: input.as_deref(),
                out: out.as_deref(),
                keep_static,
                print_loadtest,
                base_url: base_url.as_deref(),
                env_file: env.as_deref(),
            })
        }
        Command::Crd { which } => {
            match which {
                Some(CrdKind::Loadtest) => print!("{}", stampede_api::crd_yaml()),
                Some(CrdKind::Loadtestschedule) => print!("{}", stampede_api::schedule_crd_yaml()),
                None => print!("{}---\n{}", stampede_api::crd_yaml(), stampede_api::schedule_crd_yaml()),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Docs => {
            print!("{}", stampede_engine::language_reference());
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { which } => {
            print!(
                "{}",
                match which {
                    SchemaKind::Scenario => stampede_model::schema::scenario_schema(),
                    SchemaKind::Report => stampede_model::schema::report_schema(),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(Failure::Invalid(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::CouldNotRun(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
        Err(Failure::SetupFailed(e)) => {
            eprintln!("FAILED: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// A run's report: from a JSON file, or `loadtest/NAME` (also `loadtests/`, `lt/`) from the
/// LoadTest's report ConfigMap, read with the kubeconfig.
fn read_report(source: &str, namespace: Option<&str>) -> Result<stampede_engine::Report, Failure> {
    if let Some(name) = history::loadtest_name(source) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .map_err(Failure::CouldNotRun)?;
        return runtime.block_on(read_loadtest_report(name, namespace));
    }
    let json = Path::new(source);
    let text = std::fs::read_to_string(json)
        .with_context(|| format!("cannot read {}", json.display()))
        .map_err(Failure::Invalid)?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a Stampede JSON report", json.display()))
        .map_err(Failure::Invalid)
}

/// A LoadTest's merged report (the operator writes it when the test ends; it stays as long as
/// the LoadTest).
async fn read_loadtest_report(name: &str, namespace: Option<&str>) -> Result<stampede_engine::Report, Failure> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use stampede_api::{LoadTest, REPORT_KEY, names};
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the cluster (kubeconfig or in-cluster configuration)")
        .map_err(Failure::CouldNotRun)?;
    let ns = namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
    let config_maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
    let cm_name = names::report_config_map(name);
    let cm = config_maps
        .get_opt(&cm_name)
        .await
        .with_context(|| format!("cannot read ConfigMap {ns}/{cm_name}"))
        .map_err(Failure::CouldNotRun)?;
    let Some(cm) = cm else {
        let loadtests: kube::Api<LoadTest> = kube::Api::namespaced(client, &ns);
        let lt = loadtests
            .get_opt(name)
            .await
            .with_context(|| format!("cannot read LoadTest {ns}/{name}"))
            .map_err(Failure::CouldNotRun)?;
        let why = match lt.and_then(|lt| lt.status) {
            None => format!("LoadTest {ns}/{name} not found, or it has not started"),
            Some(st) if !st.phase.is_finished() => {
                format!(
                    "LoadTest {ns}/{name} has not finished (phase {:?}); its report is written when it ends",
                    st.phase
                )
            }
            Some(_) => format!("LoadTest {ns}/{name} has no report (ConfigMap {cm_name} is missing)"),
        };
        return Err(Failure::Invalid(anyhow::anyhow!(why)));
    };
    let text = cm
        .data
        .and_then(|mut d| d.remove(REPORT_KEY))
        .ok_or_else(|| Failure::Invalid(anyhow::anyhow!("ConfigMap {ns}/{cm_name} has no key {REPORT_KEY}")))?;
    serde_json::from_str(&text)
        .with_context(|| format!("ConfigMap {ns}/{cm_name} does not hold a Stampede report"))
        .map_err(Failure::Invalid)
}

/// `stampede compare BASE NEW`.
fn compare(
    base: &str,
    new: &str,
    namespace: Option<&str>,
    details: bool,
    fail_on: &[String],
) -> Result<ExitCode, Failure> {
    // The rules first: a mistake in one must not wait for two reports to be read.
    let rules: Vec<stampede_engine::FailOn> = fail_on
        .iter()
        .map(|r| stampede_engine::FailOn::parse(r))
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::Invalid(anyhow::anyhow!(e)))?;
    let (base_report, new_report) = (read_report(base, namespace)?, read_report(new, namespace)?);
    let judged = stampede_engine::judge(&base_report, &new_report);
    println!("base: {base}\nnew:  {new}");
    print!("{}", stampede_engine::render_verdict(&judged));
    if details {
        let steps = stampede_engine::compare(&base_report, &new_report);
        print!("\n{}", stampede_engine::render_comparison(base, new, &steps));
    } else {
        println!("(--details for every figure of every step)");
    }
    let broken: Vec<String> = rules.iter().filter_map(|r| r.broken(&judged)).collect();
    if broken.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for why in &broken {
        eprintln!("FAILED: --fail-on {why}");
    }
    Ok(ExitCode::from(1))
}

/// `stampede report RUN -o report.html [--baseline BASE]`.
fn html_report(source: &str, out: &Path, baseline: Option<&str>, namespace: Option<&str>) -> Result<ExitCode, Failure> {
    let mut report = read_report(source, namespace)?;
    if let Some(name) = history::loadtest_name(source) {
        report.trend = history::loadtest_trend(name, namespace)?;
    }
    let baseline = baseline.map(|b| read_report(b, namespace)).transpose()?;
    files::write_atomically(out, stampede_engine::render_html(&report, baseline.as_ref()).as_bytes())
        .with_context(|| format!("cannot write the HTML report to {}", out.display()))
        .map_err(Failure::CouldNotRun)?;
    eprintln!("HTML report written to {}", out.display());
    Ok(ExitCode::SUCCESS)
}

fn load(file: &Path) -> Result<ScenarioFile, Failure> {
    stampede_engine::load_file(file).map_err(|e| Failure::Invalid(e.into()))
}

fn validate(file: &Path) -> Result<ExitCode, Failure> {
    let scenario = load(file)?;
    let plan = stampede_engine::validate(&scenario, file, &CompileOptions::default())
        .map_err(|e| Failure::Invalid(e.into()))?;
    let steps: usize = plan.scenarios.iter().map(|s| s.steps.len()).sum();
    println!(
        "{}: ok — `{}`, {} scenario(s), {} step(s), {} up to {} VUs",
        file.display(),
        plan.name,
        plan.scenarios.len(),
        steps,
        plan.executor_name(),
        plan.max_vus()
    );
    Ok(ExitCode::SUCCESS)
}

/// The scenario `stampede run` runs (`target`: a file, `-` or a URL) with every flag applied,
/// and the path its messages and relative file names start from.
fn scenario_of(args: &RunArgs) -> Result<(ScenarioFile, PathBuf), Failure> {
    let is_url = args.target.contains("://");
    let url_only = [
        ("-m", args.method.is_some()),
        ("-H", !args.headers.is_empty()),
        ("-d", args.data.is_some()),
        ("-D", args.data_file.is_some()),
    ];
    if let Some((flag, _)) = url_only.iter().find(|(_, given)| *given).filter(|_| !is_url) {
        return Err(Failure::Invalid(anyhow::anyhow!(
            "{flag} describes the request of a URL run (stampede run URL {flag} …); a scenario file says it in its steps"
        )));
    }
    let (mut scenario, path) = if is_url {
        let body = match &args.data_file {
            Some(f) => Some(
                std::fs::read_to_string(f)
                    .with_context(|| format!("-D {}: cannot read it", f.display()))
                    .map_err(Failure::Invalid)?,
            ),
            None => args.data.clone(),
        };
        let request = quick::RequestFlags { method: args.method.clone(), headers: args.headers.clone(), body };
        let scenario = quick::url_scenario(&args.target, &request).map_err(|e| Failure::Invalid(anyhow::anyhow!(e)))?;
        (scenario, PathBuf::from("command line"))
    } else if args.target == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read the scenario from standard input")
            .map_err(Failure::Invalid)?;
        let path = PathBuf::from("<stdin>");
        (stampede_engine::parse_str(&text, &path).map_err(|e| Failure::Invalid(e.into()))?, path)
    } else {
        let path = PathBuf::from(&args.target);
        (load(&path)?, path)
    };
    let flags =
        quick::LoadFlags { vus: args.vus, duration: args.duration, iterations: args.iterations, rate: args.rate };
    quick::apply_load_flags(&mut scenario, &flags);
    if args.http2 {
        scenario.http.version = stampede_model::scenario::HttpVersion::Http2;
    }
    if args.insecure {
        scenario.http.tls.get_or_insert_with(Default::default).insecure = true;
    }
    for t in &args.thresholds {
        let spec = serde_json::from_value(serde_json::Value::String(t.clone()))
            .map_err(|e| Failure::Invalid(anyhow::anyhow!("--threshold `{t}`: {e}")))?;
        scenario.thresholds.push(spec);
    }
    Ok((scenario, path))
}

fn run(args: RunArgs) -> Result<ExitCode, Failure> {
    let (scenario, path) = scenario_of(&args)?;
    if args.print_scenario || args.print_loadtest {
        // Checked first: what is printed runs. A LoadTest's `{{env.NAME}}`s come from a Secret in
        // the cluster: they need not be set here.
        let mut env: std::collections::HashMap<String, String> = std::env::vars().collect();
        if args.print_loadtest {
            let refs = quick::env_refs(&scenario).map_err(|e| Failure::CouldNotRun(anyhow::anyhow!(e)))?;
            for name in refs {
                env.entry(name).or_insert_with(|| "x".into());
            }
        }
        let opts = CompileOptions {
            base_url: args.base_url.clone(),
            seed: args.seed,
            env: Some(env),
            ..CompileOptions::default()
        };
        stampede_engine::validate(&scenario, &path, &opts).map_err(|e| Failure::Invalid(e.into()))?;
        let text = if args.print_loadtest { quick::loadtest_yaml(&scenario) } else { quick::scenario_yaml(&scenario) };
        print!("{}", text.map_err(|e| Failure::CouldNotRun(anyhow::anyhow!(e)))?);
        return Ok(ExitCode::SUCCESS);
    }
    // Read before the run: a baseline that cannot be read must not cost a whole run. Nothing is
    // written before the run ends, so `--baseline last.json --out last.json` reads the old
    // report and replaces it with the new one.
    let baseline = args.baseline.as_deref().map(|b| read_report(b, None)).transpose()?;
    match attempt(&args, &scenario, &path, baseline.as_ref()) {
        Ok((report, plan)) => finish(&args, report, &plan, baseline.as_ref()),
        Err(failure) => {
            if let Failure::CouldNotRun(e) | Failure::SetupFailed(e) = &failure {
                write_not_run(&args, &scenario.name, &format!("{e:#}"));
            }
            Err(failure)
        }
    }
}

/// What `--junit` and `--summary` say of a run that could not take place (its setup failed,
/// the built-in target or the workers could not start): that it did not run, and why. The
/// JSON and HTML reports are not written: there is no run to report, and an earlier file
/// stays as it was.
fn write_not_run(args: &RunArgs, name: &str, why: &str) {
    let outputs = [
        (&args.junit, stampede_engine::render_junit_not_run(name, why), false),
        (&args.summary, stampede_engine::render_summary_not_run(name, why), true),
    ];
    for (path, text, append) in outputs {
        let Some(path) = path else { continue };
        let written = if append {
            files::append_atomically(path, text.as_bytes())
        } else {
            files::write_atomically(path, text.as_bytes())
        };
        if let Err(e) = written {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
}

/// The run itself: compiled (the built-in target started), checked that its reports can be
/// written at its end, run, and its thresholds judged against the baseline. Writes nothing.
fn attempt(
    args: &RunArgs,
    scenario: &ScenarioFile,
    path: &Path,
    baseline: Option<&stampede_engine::Report>,
) -> Result<(stampede_engine::Report, Arc<stampede_engine::Plan>), Failure> {
    let opts = CompileOptions { base_url: args.base_url.clone(), seed: args.seed, ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(scenario, path, opts).map_err(|e| match e {
        stampede_engine::PrepareError::Invalid(e) => Failure::Invalid(e.into()),
        stampede_engine::PrepareError::Run(e) => Failure::CouldNotRun(e.into()),
    })?;
    // Checked first, without touching them: a long run must not end in a report that cannot
    // be saved.
    for (flag, out) in
        [("--out", &args.out), ("--html", &args.html), ("--junit", &args.junit), ("--summary", &args.summary)]
    {
        if let Some(p) = out {
            files::check_writable(p)
                .with_context(|| format!("{flag}: cannot write the report to {}", p.display()))
                .map_err(Failure::CouldNotRun)?;
        }
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_ctrl_c(interrupt.clone());
    // Relative thresholds are judged against the baseline where every threshold is: in the
    // report, and at each plateau of a capacity search.
    let mut run_opts = RunOptions { interrupt, baseline: baseline.cloned().map(Arc::new), ..RunOptions::default() };
    if let Some(t) = args.threads {
        run_opts.threads = t.max(1);
    }
    let plan = prepared.plan.clone();
    if !args.quiet {
        eprintln!(
            "stampede: running `{}` ({}, up to {} VUs, {} threads) against {}",
            plan.name,
            plan.executor_name(),
            plan.max_vus(),
            run_opts.threads.min(plan.max_vus().max(1) as usize),
            plan.base_url.as_deref().unwrap_or("the URLs in the file")
        );
    }
    // Series carry the same labels as a runner's: the CLI is runner 0 of a "local" test.
    let exporter = args.metrics_addr.map(|_| {
        Arc::new(Exporter::new(
            &plan,
            vec![
                ("namespace".into(), "local".into()),
                ("loadtest".into(), plan.name.clone()),
                ("runner".into(), "0".into()),
            ],
        ))
    });
    let _metrics_server = match (&exporter, args.metrics_addr) {
        (Some(exporter), Some(addr)) => {
            let server = MetricsServer::start(addr, exporter.clone())
                .with_context(|| format!("cannot serve metrics on {addr}"))
                .map_err(Failure::CouldNotRun)?;
            eprintln!("stampede: metrics at http://{}/metrics", server.addr());
            Some(server)
        }
        _ => None,
    };
    run_opts.totals = exporter.is_some();
    if let Some(e) = &exporter {
        e.started(std::time::SystemTime::now());
    }
    let mut progress = Progress::new(args.progress_every.max(1), args.quiet);
    let capacity = plan.capacity.is_some();
    let report = if capacity {
        // Plateau by plateau: one line each as it ends (the ticks restart with every plateau).
        let quiet = args.quiet;
        stampede_engine::execute_capacity(prepared, &run_opts, &mut |_| {}, &mut |p| {
            if !quiet {
                eprintln!("{}", stampede_engine::plateau_line(p));
            }
        })
        .map_err(run_failed)?
    } else {
        stampede_engine::execute(prepared, &run_opts, &mut |t| {
            if let Some(e) = &exporter {
                e.observe(t);
            }
            progress.tick(t)
        })
        .map_err(run_failed)?
    };
    Ok((report, plan))
}

/// Prints the run's table, writes its reports (each whole, once the run ended) and turns its
/// verdicts into the exit code.
fn finish(
    args: &RunArgs,
    report: stampede_engine::Report,
    plan: &stampede_engine::Plan,
    baseline: Option<&stampede_engine::Report>,
) -> Result<ExitCode, Failure> {
    print!("{}", stampede_engine::render_table(&report));
    if args.phases {
        print!("{}", stampede_engine::render_phases(&report));
    }
    let _ = std::io::stdout().flush();
    if let Some(path) = &args.out {
        let mut json =
            serde_json::to_vec_pretty(&report).context("cannot serialize the report").map_err(Failure::CouldNotRun)?;
        json.push(b'\n');
        files::write_atomically(path, &json)
            .with_context(|| format!("cannot write the report to {}", path.display()))
            .map_err(Failure::CouldNotRun)?;
        if !args.quiet {
            eprintln!("report written to {}", path.display());
        }
    }
    if let Some(path) = &args.html {
        files::write_atomically(path, stampede_engine::render_html(&report, baseline).as_bytes())
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))
            .map_err(Failure::CouldNotRun)?;
        if !args.quiet {
            eprintln!("HTML report written to {}", path.display());
        }
    }
    if let Some(path) = &args.junit {
        files::write_atomically(path, stampede_engine::render_junit(&report).as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
            .map_err(Failure::CouldNotRun)?;
    }
    // Appended to, as a CI step summary file is shared by the steps of a job.
    if let Some(path) = &args.summary {
        files::append_atomically(path, stampede_engine::render_summary_markdown(&report).as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
            .map_err(Failure::CouldNotRun)?;
    }
    if let Some(why) = &report.run.aborted {
        eprintln!("stampede: run aborted: {why}");
        return Ok(ExitCode::from(1));
    }
    if !report.thresholds_passed() {
        eprintln!("stampede: thresholds failed");
        return Ok(ExitCode::from(1));
    }
    if let Some(why) = report.undelivered() {
        if plan.undelivered_load == stampede_model::scenario::UndeliveredLoad::Fail {
            eprintln!(
                "stampede: the load asked for was not delivered ({why}): the thresholds judged a lighter load, so \
                 the run does not pass (`undeliveredLoad: warn` judges by the thresholds alone)"
            );
            return Ok(ExitCode::from(1));
        }
        eprintln!("stampede: warning: the load asked for was not delivered ({why})");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a progress line every few ticks: elapsed, active VUs, req/s, errors, p99.
struct Progress {
    every: u64,
    quiet: bool,
    window: IntervalStats,
    window_len: Duration,
}

impl Progress {
    fn new(every: u64, quiet: bool) -> Self {
        Progress { every, quiet, window: IntervalStats::default(), window_len: Duration::ZERO }
    }

    fn tick(&mut self, t: &Tick) {
        self.window.merge(&t.stats);
        self.window_len += t.length;
        if !t.index.is_multiple_of(self.every) {
            return;
        }
        if !self.quiet {
            let secs = self.window_len.as_secs_f64().max(1e-9);
            let p99 = if self.window.latency.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3} ms", self.window.latency.value_at_quantile(0.99) as f64 / 1000.0)
            };
            eprintln!(
                "[{:>6.1}s] vus {:>5} | {:>10.1} req/s | errors {:>6} | p99 {}",
                t.elapsed.as_secs_f64(),
                t.active_vus,
                self.window.requests as f64 / secs,
                self.window.errors,
                p99
            );
        }
        self.window.reset();
        self.window_len = Duration::ZERO;
    }
}

/// First Ctrl-C stops the run and keeps the partial results; a second one exits at once.
fn watch_ctrl_c(flag: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new().name("stampede-signal".into()).spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nstopping: partial results follow (Ctrl-C again to quit now)");
                flag.store(true, Ordering::Relaxed);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        });
    });
}

/// What `stampede target` says of its capacity at start, when it has a service time:
/// `capacity: 800 requests/s (8 concurrent × 10ms)`.
fn capacity_line(options: &stampede_target::TargetOptions) -> Option<String> {
    let service_time = Dur(options.service_time.filter(|t| !t.is_zero())?);
    let (Some(rate), Some(n)) = (options.capacity(), options.concurrency) else {
        return Some(format!("service time: {service_time} per request, no concurrency limit"));
    };
    let rate = (rate * 10.0).round() / 10.0;
    let rate = if rate.fract() == 0.0 { format!("{rate:.0}") } else { format!("{rate:.1}") };
    let queue = match options.queue_limit {
        Some(limit) => format!(", 503 when {limit} wait"),
        None => String::new(),
    };
    Some(format!("capacity: {rate} requests/s ({n} concurrent × {service_time}){queue}"))
}

fn target(args: TargetArgs) -> Result<ExitCode, Failure> {
    let addr = SocketAddr::new(args.host, args.port);
    let mut options = stampede_target::TargetOptions {
        tls: None,
        http2: args.http2,
        service_time: args.service_time.map(|d| d.0),
        concurrency: args.concurrency,
        queue_limit: args.queue_limit,
    };
    options.check().map_err(|e| Failure::Invalid(anyhow::anyhow!("{e}")))?;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |p: &PathBuf| {
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display())).map_err(Failure::Invalid)
        };
        let config = stampede_target::server_config(&read(cert)?, &read(key)?, args.http2).map_err(|e| {
            Failure::Invalid(anyhow::anyhow!("--tls-cert {} / --tls-key {}: {e}", cert.display(), key.display()))
        })?;
        options.tls = Some(Arc::new(config));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")
        .map_err(Failure::CouldNotRun)?;
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    let protocols = if args.http2 { "HTTP/1.1 and HTTP/2" } else { "HTTP/1.1" };
    let capacity = capacity_line(&options);
    // Bound first: "listening" is said only of an address that is listened on (the one bound,
    // with the port picked for --port 0).
    let bound = stampede_target::TargetServer::bind(addr, options)
        .with_context(|| format!("cannot listen on {addr}"))
        .map_err(Failure::CouldNotRun)?;
    eprintln!("stampede target listening on {scheme}://{}, {protocols} (Ctrl-C to stop)", bound.addr());
    if let Some(line) = capacity {
        eprintln!("{line}");
    }
    rt.block_on(bound.serve_until(async {
        let _ = tokio::signal::ctrl_c().await;
    }));
    Ok(ExitCode::SUCCESS)
}
