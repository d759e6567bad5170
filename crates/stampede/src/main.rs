//! `stampede`: run a load test on this machine, serve the built-in target, validate files,
//! and (`stampede runner`) run as one of a LoadTest's runner pods.
//!
//! Exit codes: 0 the run completed, 1 thresholds failed or the run was aborted (`onError:
//! abort-run`, `abortOnFail`), 2 invalid input, 3 could not run.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod files;

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
    Run(Box<cmd::run::RunArgs>),
    /// Check a scenario file without running it.
    Validate {
        /// Scenario file (YAML).
        file: PathBuf,
    },
    /// Serve the built-in target (a fast httpbin-like test server). With --service-time T and
    /// --concurrency N its capacity is known: N / T requests per second (8 × 10ms → 800/s).
    Target(cmd::target::TargetArgs),
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
    History(cmd::history::HistoryArgs),
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
    #[command(after_help = cmd::launch::EXIT_CODES)]
    Launch(cmd::launch::LaunchArgs),
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

/// A failure and the exit code it maps to.
enum Failure {
    Invalid(anyhow::Error),
    CouldNotRun(anyhow::Error),
    /// The test failed before its load: its `setup` did (exit 1, as a failed threshold).
    SetupFailed(anyhow::Error),
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
        Command::Launch(args) => return cmd::launch::launch(args),
        Command::Run(args) => cmd::run::run(*args),
        Command::Validate { file } => cmd::validate::validate(&file),
        Command::Target(args) => cmd::target::target(args),
        Command::Report { report, out, baseline, namespace } => {
            cmd::report::html_report(&report, &out, baseline.as_deref(), namespace.as_deref())
        }
        Command::Compare { base, new, namespace, details, fail_on } => {
            cmd::report::compare(&base, &new, namespace.as_deref(), details, &fail_on)
        }
        Command::History(args) => cmd::history::history(args),
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
