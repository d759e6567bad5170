//! `stampede run`: a scenario file (or a URL) run on this machine against its target, with
//! its progress, Prometheus metrics and reports; `--baseline` judges relative thresholds.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use stampede_engine::IntervalStats;
use stampede_engine::{CompileOptions, RunOptions, Tick};
use stampede_engine::{Exporter, MetricsServer};
use stampede_model::scenario::ScenarioFile;
use stampede_model::{Dur, parse_duration};

use super::report::read_report;
use crate::Failure;
use crate::{files, quick};

#[derive(Args)]
#[command(after_help = RUN_EXAMPLES)]
pub(crate) struct RunArgs {
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
    /// Serve a live dashboard of the run at http://ADDR/ (e.g. 127.0.0.1:0: port 0 picks one):
    /// its figures every second, and controls that change its VUs or pause it. The link it
    /// prints carries a token that every request but the page needs.
    #[arg(long, value_name = "ADDR")]
    dashboard: Option<std::net::SocketAddr>,
    /// How long the dashboard stays up after the run ended (Ctrl-C ends the wait).
    #[arg(long, value_parser = parse_dur, value_name = "DURATION", default_value = "0s", requires = "dashboard")]
    dashboard_keep: Dur,
}

/// A run's live dashboard, served while the run lasts (and `--dashboard-keep` after).
pub(crate) struct Live {
    board: Arc<stampede_engine::Dashboard>,
    _server: stampede_engine::DashboardServer,
    interrupt: Arc<AtomicBool>,
}

impl Live {
    /// Starts the dashboard of `plan` on `addr` (when asked for), taking changes through
    /// `control`; prints its link.
    fn start(
        addr: Option<std::net::SocketAddr>,
        plan: &Arc<stampede_engine::Plan>,
        control: &Arc<stampede_engine::LiveControl>,
        interrupt: &Arc<AtomicBool>,
    ) -> Result<Option<Live>, Failure> {
        let Some(addr) = addr else { return Ok(None) };
        let board = stampede_engine::Dashboard::new(plan.clone(), control.clone());
        let server = stampede_engine::DashboardServer::start(addr, board.clone())
            .with_context(|| format!("cannot serve the dashboard on {addr}"))
            .map_err(Failure::CouldNotRun)?;
        eprintln!("stampede: dashboard at {}", server.url());
        Ok(Some(Live { board, _server: server, interrupt: interrupt.clone() }))
    }

    /// Keeps the dashboard up for `keep` after the run, or until Ctrl-C (a run stopped by Ctrl-C
    /// keeps it up too: the next Ctrl-C quits at once).
    fn linger(self, keep: Duration) {
        let until = std::time::Instant::now() + keep;
        if keep > Duration::ZERO {
            eprintln!("stampede: the run ended; the dashboard stays up for {} (Ctrl-C to quit)", Dur(keep));
        }
        let stopped_by_ctrl_c = self.interrupt.load(Ordering::Relaxed);
        while std::time::Instant::now() < until && (stopped_by_ctrl_c || !self.interrupt.load(Ordering::Relaxed)) {
            std::thread::sleep(Duration::from_millis(50).min(until - std::time::Instant::now()));
        }
    }
}

/// `stampede run --help`'s examples.
pub(crate) const RUN_EXAMPLES: &str = "Examples:
  stampede run examples/quickstart.yaml                a scenario file
  stampede run http://127.0.0.1:8080/ -c 50 -z 10s     one URL, 50 connections for 10 s
  stampede run http://127.0.0.1:8080/ -q 2000 -z 5s    one URL at 2000 requests/s (open model)
  cat scenario.yaml | stampede run - --vus 10          a scenario from standard input
  stampede run URL -m POST -H 'Content-Type: application/json' -d '{\"a\":1}' --print-scenario

Exit codes: 0 passed, 1 a threshold failed, the run was aborted, its setup failed or its load
was not delivered, 2 invalid input, 3 could not run.";

/// A duration flag (`30s`, `1m30s`), as the scenario file writes durations.
pub(crate) fn parse_dur(s: &str) -> Result<Dur, stampede_model::DurationError> {
    parse_duration(s).map(Dur)
}

/// A run that could not take place: a failed setup is a failed test (exit 1), anything else
/// could not run (exit 3).
pub(crate) fn run_failed(e: stampede_engine::RunError) -> Failure {
    match e {
        stampede_engine::RunError::Setup(_) => Failure::SetupFailed(anyhow::Error::new(e)),
        e => Failure::CouldNotRun(anyhow::Error::new(e).context("the run failed")),
    }
}

/// The scenario `stampede run` runs (`target`: a file, `-` or a URL) with every flag applied,
/// and the path its messages and relative file names start from.
pub(crate) fn scenario_of(args: &RunArgs) -> Result<(ScenarioFile, PathBuf), Failure> {
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
        (super::validate::load(&path)?, path)
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

/// `stampede run`: the run, then its reports; the exit code says how it went.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode, Failure> {
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
        Ok((report, plan, live)) => {
            let code = finish(&args, report, &plan, baseline.as_ref(), live.as_ref().map(|l| &*l.board));
            if let Some(live) = live {
                live.linger(args.dashboard_keep.get());
            }
            code
        }
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
pub(crate) fn write_not_run(args: &RunArgs, name: &str, why: &str) {
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
pub(crate) fn attempt(
    args: &RunArgs,
    scenario: &ScenarioFile,
    path: &Path,
    baseline: Option<&stampede_engine::Report>,
) -> Result<(stampede_engine::Report, Arc<stampede_engine::Plan>, Option<Live>), Failure> {
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
    let mut run_opts =
        RunOptions { interrupt: interrupt.clone(), baseline: baseline.cloned().map(Arc::new), ..RunOptions::default() };
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
    let live = Live::start(args.dashboard, &plan, &run_opts.control, &interrupt)?;
    run_opts.totals = exporter.is_some() || live.is_some();
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
            if let Some(live) = &live {
                live.board.tick(t);
            }
            progress.tick(t)
        })
        .map_err(run_failed)?
    };
    Ok((report, plan, live))
}

/// Prints the run's table, writes its reports (each whole, once the run ended) and turns its
/// verdicts into the exit code.
pub(crate) fn finish(
    args: &RunArgs,
    report: stampede_engine::Report,
    plan: &stampede_engine::Plan,
    baseline: Option<&stampede_engine::Report>,
    dashboard: Option<&stampede_engine::Dashboard>,
) -> Result<ExitCode, Failure> {
    print!("{}", stampede_engine::render_table(&report));
    // The HTML report once, for `--html` and the dashboard alike.
    let html = (args.html.is_some() || dashboard.is_some()).then(|| stampede_engine::render_html(&report, baseline));
    if let (Some(dashboard), Some(html)) = (dashboard, &html) {
        dashboard.ended(&report, html.clone());
    }
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
    if let (Some(path), Some(html)) = (&args.html, &html) {
        files::write_atomically(path, html.as_bytes())
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
pub(crate) struct Progress {
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
pub(crate) fn watch_ctrl_c(flag: Arc<AtomicBool>) {
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
