//! `stampede history loadtest/NAME | loadtestschedule/NAME`: the finished runs of a LoadTest
//! (its `.status.history`, then its current run once it has finished) or of a LoadTestSchedule
//! (its `.status.history`), oldest first, each with its change from the run before; the runs
//! still going on last. `--json` prints the same for scripts; `--html` writes a LoadTest's last
//! report with the trend of its runs.
//!
//! The pure part ([`History`], [`changes`], [`render_table`], [`to_json`], [`trend`]) is tested
//! here without a cluster; the rest reads the objects with the kubeconfig.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use stampede_api::{LoadTest, LoadTestSchedule, LoadTestScheduleStatus, LoadTestStatus, Phase, RunRecord};
use stampede_model::report::{TrendPoint, round3};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::Failure;

#[derive(Args)]
pub(crate) struct HistoryArgs {
    /// loadtest/NAME (lt/NAME) or loadtestschedule/NAME (lts/NAME).
    object: String,
    /// Namespace of the object (default: the kubeconfig's).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Print the runs, with their changes, as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the HTML report of a LoadTest's last finished run, with the trend of its runs.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// What the history is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    LoadTest,
    Schedule,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::LoadTest => "LoadTest",
            Kind::Schedule => "LoadTestSchedule",
        }
    }
}

/// `loadtest/NAME` (also `loadtests/`, `lt/`) or `loadtestschedule/NAME` (also
/// `loadtestschedules/`, `lts/`): the kind and the name.
pub(crate) fn parse_object(s: &str) -> Option<(Kind, &str)> {
    let kinds = [
        (Kind::LoadTest, ["loadtest/", "loadtests/", "lt/"]),
        (Kind::Schedule, ["loadtestschedule/", "loadtestschedules/", "lts/"]),
    ];
    kinds
        .iter()
        .find_map(|(kind, prefixes)| prefixes.iter().find_map(|p| s.strip_prefix(p)).map(|name| (*kind, name)))
        .filter(|(_, name)| !name.is_empty() && !name.contains('/'))
}

/// The name in `loadtest/NAME` (also `loadtests/`, `lt/`).
pub(crate) fn loadtest_name(s: &str) -> Option<&str> {
    parse_object(s).filter(|(kind, _)| *kind == Kind::LoadTest).map(|(_, name)| name)
}

/// A run in progress.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Running {
    /// A LoadTest's run number.
    pub(crate) run: Option<u32>,
    /// A schedule's LoadTest.
    pub(crate) name: Option<String>,
    pub(crate) phase: Phase,
    pub(crate) start_time: Option<String>,
}

/// The runs of one LoadTest or LoadTestSchedule.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct History {
    pub(crate) kind: Kind,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Finished runs, oldest first.
    pub(crate) runs: Vec<RunRecord>,
    /// Runs in progress.
    pub(crate) running: Vec<Running>,
}

impl History {
    /// A LoadTest's runs: its earlier runs, then the current one, finished or running.
    pub(crate) fn of_loadtest(namespace: &str, name: &str, status: Option<&LoadTestStatus>) -> History {
        let runs = status.map(LoadTestStatus::finished_runs).unwrap_or_default();
        let running = status.filter(|st| !st.phase.is_finished()).map(|st| Running {
            run: st.run,
            name: None,
            phase: st.phase,
            start_time: st.start_time.clone(),
        });
        History {
            kind: Kind::LoadTest,
            namespace: namespace.into(),
            name: name.into(),
            runs,
            running: running.into_iter().collect(),
        }
    }

    /// A schedule's finished runs, and `active`: its runs in progress.
    pub(crate) fn of_schedule(
        namespace: &str,
        name: &str,
        status: Option<&LoadTestScheduleStatus>,
        active: Vec<Running>,
    ) -> History {
        History {
            kind: Kind::Schedule,
            namespace: namespace.into(),
            name: name.into(),
            runs: status.map(|s| s.history.iter().rev().cloned().collect()).unwrap_or_default(),
            running: active,
        }
    }
}

/// The change from one run to the next; `None` where it has no meaning.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunChange {
    /// Requests per second, relative, in percent (none after a run of 0 rps).
    pub(crate) rps_percent: Option<f64>,
    /// Error rate, in percentage points (none when either run sent no request).
    pub(crate) error_points: Option<f64>,
    /// p99, relative, in percent (none when either run has no p99, or the earlier one's is 0).
    pub(crate) p99_percent: Option<f64>,
}

fn relative(base: f64, new: f64) -> Option<f64> {
    (base > 0.0 && base.is_finite() && new.is_finite()).then(|| (new - base) / base * 100.0)
}

/// Each run's change from the run before it (`None` for the first).
pub(crate) fn changes(runs: &[RunRecord]) -> Vec<Option<RunChange>> {
    std::iter::once(None)
        .chain(runs.windows(2).map(|w| {
            let (before, now) = (&w[0], &w[1]);
            Some(RunChange {
                rps_percent: relative(before.rps, now.rps),
                error_points: (before.requests > 0 && now.requests > 0)
                    .then_some((now.error_rate - before.error_rate) * 100.0),
                p99_percent: before.p99_ms.zip(now.p99_ms).and_then(|(b, n)| relative(b, n)),
            })
        }))
        .take(runs.len())
        .collect()
}

/// An RFC 3339 time in UTC, to the second (`2026-03-01T03:00:05Z`); as given if it does not parse.
fn utc_second(t: &str) -> String {
    match OffsetDateTime::parse(t, &Rfc3339) {
        Ok(t) => {
            let t = t.to_offset(time::UtcOffset::UTC);
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            )
        }
        Err(_) => t.to_string(),
    }
}

/// A signed change with `decimals` and `unit`; a change that rounds to zero has no sign.
fn signed(v: f64, decimals: usize, unit: &str) -> String {
    let text = format!("{v:+.decimals$}");
    if text[1..].chars().all(|c| c == '0' || c == '.') {
        format!("{}{unit}", &text[1..])
    } else {
        format!("{text}{unit}")
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

/// How the text names a run in progress: `run 3`, or a schedule's LoadTest.
fn running_label(r: &Running) -> String {
    match (&r.name, r.run) {
        (Some(name), _) => name.clone(),
        (None, Some(n)) => format!("run {n}"),
        (None, None) => "the current run".into(),
    }
}

/// The history as a table, oldest run first, then a line per run in progress.
pub(crate) fn render_table(h: &History) -> String {
    let mut out = String::new();
    if h.runs.is_empty() {
        let _ = writeln!(out, "No finished runs of {} {}/{} yet.", h.kind.name(), h.namespace, h.name);
    } else {
        // (header, right-aligned)
        let mut columns: Vec<(&str, bool)> = match h.kind {
            Kind::LoadTest => vec![("RUN", false)],
            Kind::Schedule => vec![("LOADTEST", false), ("SCHEDULED", false)],
        };
        columns.extend([
            ("STARTED", false),
            ("VERDICT", false),
            ("REQUESTS", true),
            ("RPS", true),
            ("ERRORS", true),
            ("P50", true),
            ("P95", true),
            ("P99", true),
            ("ΔRPS", true),
            ("ΔERRORS", true),
            ("ΔP99", true),
        ]);
        let time = |t: &Option<String>| t.as_deref().map_or_else(|| "-".to_string(), utc_second);
        let rows: Vec<Vec<String>> = h
            .runs
            .iter()
            .zip(changes(&h.runs))
            .map(|(r, change)| {
                let mut cells = match h.kind {
                    Kind::LoadTest => vec![r.run.map_or_else(|| "-".to_string(), |n| n.to_string())],
                    Kind::Schedule => vec![r.name.clone().unwrap_or_else(|| "-".into()), time(&r.scheduled_time)],
                };
                cells.extend([
                    time(&r.start_time),
                    r.verdict.clone(),
                    r.requests.to_string(),
                    format!("{:.1}", r.rps),
                    format!("{:.2}%", r.error_rate * 100.0),
                    ms(r.p50_ms),
                    ms(r.p95_ms),
                    ms(r.p99_ms),
                ]);
                let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                match change {
                    None => cells.extend([String::new(), String::new(), String::new()]),
                    Some(c) => cells.extend([
                        or_dash(c.rps_percent.map(|v| signed(v, 1, "%"))),
                        or_dash(c.error_points.map(|v| signed(v, 2, "pp"))),
                        or_dash(c.p99_percent.map(|v| signed(v, 1, "%"))),
                    ]),
                }
                cells
            })
            .collect();
        let mut widths: Vec<usize> = columns.iter().map(|(name, _)| name.chars().count()).collect();
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let headers: Vec<String> = columns.iter().map(|(name, _)| name.to_string()).collect();
        for cells in std::iter::once(&headers).chain(&rows) {
            let mut line = String::new();
            for (i, ((cell, w), (_, right))) in cells.iter().zip(&widths).zip(&columns).enumerate() {
                let sep = if i == 0 { "" } else { "  " };
                if *right {
                    let _ = write!(line, "{sep}{cell:>w$}");
                } else {
                    let _ = write!(line, "{sep}{cell:<w$}");
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let _ =
            writeln!(out, "latency in ms; ΔRPS and ΔP99: change from the run before; ΔERRORS: in percentage points");
    }
    for r in &h.running {
        let started = r.start_time.as_deref().map(|t| format!(" (started {})", utc_second(t))).unwrap_or_default();
        let _ = writeln!(out, "{}: {:?}{started}", running_label(r), r.phase);
    }
    out
}

/// The history as JSON: each finished run as in `.status.history` with its `change` from the
/// run before (null for the first), and the runs in progress.
pub(crate) fn to_json(h: &History) -> Value {
    let round = |v: Option<f64>| v.map(round3);
    let runs: Vec<Value> = h
        .runs
        .iter()
        .zip(changes(&h.runs))
        .map(|(r, change)| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            v["change"] = match change {
                None => Value::Null,
                Some(c) => json!({
                    "rpsPercent": round(c.rps_percent),
                    "errorRatePoints": round(c.error_points),
                    "p99Percent": round(c.p99_percent),
                }),
            };
            v
        })
        .collect();
    let running: Vec<Value> = h
        .running
        .iter()
        .map(|r| {
            let mut v = json!({"phase": r.phase, "startTime": r.start_time});
            match (&r.name, r.run) {
                (Some(name), _) => v["name"] = json!(name),
                (None, run) => v["run"] = json!(run),
            }
            v
        })
        .collect();
    json!({
        "kind": h.kind.name(),
        "namespace": h.namespace,
        "name": h.name,
        "runs": runs,
        "running": running,
    })
}

/// The finished runs as a report's trend: labelled `#N` (a LoadTest's run) or by LoadTest name.
pub(crate) fn trend(h: &History) -> Vec<TrendPoint> {
    h.runs
        .iter()
        .map(|r| {
            r.trend_point(match (h.kind, r.run, &r.name) {
                (Kind::LoadTest, Some(n), _) | (Kind::Schedule, Some(n), None) => format!("#{n}"),
                (_, _, Some(name)) => name.clone(),
                _ => "?".into(),
            })
        })
        .collect()
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .map_err(Failure::CouldNotRun)
}

/// A client from the kubeconfig (or in-cluster configuration) and the namespace to read.
async fn client(namespace: Option<&str>) -> Result<(kube::Client, String), Failure> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the cluster (kubeconfig or in-cluster configuration)")
        .map_err(Failure::CouldNotRun)?;
    let ns = namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
    Ok((client, ns))
}

/// What `get_opt` of an object answered: the object, or a clear error naming it.
fn found<K>(answer: Result<Option<K>, kube::Error>, ns: &str, kind: Kind, name: &str) -> Result<K, Failure> {
    answer
        .with_context(|| format!("cannot read {} {ns}/{name}", kind.name()))
        .map_err(Failure::CouldNotRun)?
        .ok_or_else(|| Failure::Invalid(anyhow::anyhow!("{} {ns}/{name} not found", kind.name())))
}

async fn read_history(kind: Kind, name: &str, namespace: Option<&str>) -> Result<History, Failure> {
    let (client, ns) = client(namespace).await?;
    let loadtests: kube::Api<LoadTest> = kube::Api::namespaced(client.clone(), &ns);
    match kind {
        Kind::LoadTest => {
            let lt = found(loadtests.get_opt(name).await, &ns, kind, name)?;
            Ok(History::of_loadtest(&ns, name, lt.status.as_ref()))
        }
        Kind::Schedule => {
            let schedules: kube::Api<LoadTestSchedule> = kube::Api::namespaced(client, &ns);
            let schedule = found(schedules.get_opt(name).await, &ns, kind, name)?;
            let mut active = Vec::new();
            for lt_name in schedule.status.iter().flat_map(|s| &s.active) {
                // An active run's LoadTest may be gone already (deleted since the status was written).
                let Ok(lt) = found(loadtests.get_opt(lt_name).await, &ns, Kind::LoadTest, lt_name) else { continue };
                let status = lt.status.unwrap_or_default();
                active.push(Running {
                    run: None,
                    name: Some(lt_name.clone()),
                    phase: status.phase,
                    start_time: status.start_time,
                });
            }
            Ok(History::of_schedule(&ns, name, schedule.status.as_ref(), active))
        }
    }
}

/// The trend of a LoadTest's runs for its report (`stampede report loadtest/NAME`): its earlier
/// runs and its current one once finished, oldest first (the report shows it from two runs on).
pub(crate) fn loadtest_trend(name: &str, namespace: Option<&str>) -> Result<Vec<TrendPoint>, Failure> {
    Ok(trend(&runtime()?.block_on(read_history(Kind::LoadTest, name, namespace))?))
}

/// `stampede history OBJECT [-n NS] [--json] [--html FILE]`.
pub(crate) fn history(args: HistoryArgs) -> Result<ExitCode, Failure> {
    let Some((kind, name)) = parse_object(&args.object) else {
        return Err(Failure::Invalid(anyhow::anyhow!(
            "`{}`: expected loadtest/NAME (lt/NAME) or loadtestschedule/NAME (lts/NAME)",
            args.object
        )));
    };
    if args.html.is_some() && kind == Kind::Schedule {
        return Err(Failure::Invalid(anyhow::anyhow!(
            "--html writes a LoadTest's report: use `stampede history loadtest/NAME --html FILE` \
             (or `stampede report loadtest/NAME -o FILE` for one of the schedule's LoadTests)"
        )));
    }
    let runtime = runtime()?;
    let history = runtime.block_on(read_history(kind, name, args.namespace.as_deref()))?;
    if args.json {
        let text = serde_json::to_string_pretty(&to_json(&history))
            .context("cannot write the history as JSON")
            .map_err(Failure::CouldNotRun)?;
        println!("{text}");
    } else {
        print!("{}", render_table(&history));
    }
    if let Some(out) = &args.html {
        if history.runs.is_empty() {
            return Err(Failure::Invalid(anyhow::anyhow!(
                "LoadTest {}/{name} has no finished run: no report to write",
                history.namespace
            )));
        }
        let mut report = runtime.block_on(read_loadtest_report(name, Some(&history.namespace)))?;
        report.trend = trend(&history);
        crate::files::write_atomically(out, stampede_engine::render_html(&report, None).as_bytes())
            .with_context(|| format!("cannot write the HTML report to {}", out.display()))
            .map_err(Failure::CouldNotRun)?;
        eprintln!("HTML report written to {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A LoadTest's merged report (the operator writes it when the test ends; it stays as long as
/// the LoadTest).
pub(crate) async fn read_loadtest_report(
    name: &str,
    namespace: Option<&str>,
) -> Result<stampede_engine::Report, Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_api::Summary;
    use stampede_model::report::LatencySummary;

    /// A finished run: (run, start, verdict, requests, rps, error rate, p50/p95/p99 when measured).
    fn record(
        run: u32,
        start: &str,
        verdict: &str,
        (requests, rps, error_rate): (u64, f64, f64),
        latency: Option<(f64, f64, f64)>,
    ) -> RunRecord {
        RunRecord {
            run: Some(run),
            start_time: Some(start.into()),
            phase: if verdict == "Passed" { Phase::Succeeded } else { Phase::Failed },
            verdict: verdict.into(),
            requests,
            rps,
            error_rate,
            p50_ms: latency.map(|l| l.0),
            p95_ms: latency.map(|l| l.1),
            p99_ms: latency.map(|l| l.2),
            ..RunRecord::default()
        }
    }

    /// A LoadTest on its 4th run (`phase`), after three: a pass, a run that sent nothing (its
    /// runners failed), another pass. Newest first, as the operator keeps them.
    fn loadtest_status(phase: Phase) -> LoadTestStatus {
        LoadTestStatus {
            phase,
            run: Some(4),
            start_time: Some("2026-03-04T03:00:02.250000+01:00".into()),
            summary: Some(Summary {
                is_final: phase.is_finished(),
                requests: 27000,
                rps: 450.0,
                error_rate: 0.012,
                p99: "95.5ms".into(),
                latency_ms: LatencySummary { p50: 12.0, p95: 30.0, p99: 95.5, ..LatencySummary::default() },
                ..Summary::default()
            }),
            history: vec![
                record(3, "2026-03-03T03:00:01.5Z", "Passed", (30000, 500.0, 0.0015), Some((10.0, 19.75, 38.0))),
                record(2, "2026-03-02T03:00:00Z", "Failed", (0, 0.0, 0.0), None),
                record(1, "2026-03-01T03:00:00.123456Z", "Passed", (29400, 490.0, 0.001), Some((10.2, 20.5, 40.25))),
            ],
            ..LoadTestStatus::default()
        }
    }

    const LOADTEST_TABLE: &str = "\
RUN  STARTED               VERDICT  REQUESTS    RPS  ERRORS     P50     P95     P99     ΔRPS  ΔERRORS     ΔP99
1    2026-03-01T03:00:00Z  Passed      29400  490.0   0.10%  10.200  20.500  40.250
2    2026-03-02T03:00:00Z  Failed          0    0.0   0.00%       -       -       -  -100.0%        -        -
3    2026-03-03T03:00:01Z  Passed      30000  500.0   0.15%  10.000  19.750  38.000        -        -        -
4    2026-03-04T02:00:02Z  Failed      27000  450.0   1.20%  12.000  30.000  95.500   -10.0%  +1.05pp  +151.3%
latency in ms; ΔRPS and ΔP99: change from the run before; ΔERRORS: in percentage points
";

    #[test]
    fn a_finished_loadtests_runs_are_a_table_oldest_first_with_its_current_run_last() {
        let status = loadtest_status(Phase::Failed);
        let history = History::of_loadtest("shop", "checkout", Some(&status));
        assert_eq!(render_table(&history), LOADTEST_TABLE);
        assert!(
            include_str!("../../../../docs/command-line.md").contains(LOADTEST_TABLE),
            "the command-line guide shows this table as it is"
        );
    }

    #[test]
    fn a_running_loadtest_ends_its_table_with_the_run_in_progress() {
        let status = loadtest_status(Phase::Running);
        let history = History::of_loadtest("shop", "checkout", Some(&status));
        assert_eq!(
            render_table(&history),
            "\
RUN  STARTED               VERDICT  REQUESTS    RPS  ERRORS     P50     P95     P99     ΔRPS  ΔERRORS  ΔP99
1    2026-03-01T03:00:00Z  Passed      29400  490.0   0.10%  10.200  20.500  40.250
2    2026-03-02T03:00:00Z  Failed          0    0.0   0.00%       -       -       -  -100.0%        -     -
3    2026-03-03T03:00:01Z  Passed      30000  500.0   0.15%  10.000  19.750  38.000        -        -     -
latency in ms; ΔRPS and ΔP99: change from the run before; ΔERRORS: in percentage points
run 4: Running (started 2026-03-04T02:00:02Z)
"
        );
    }

    #[test]
    fn changes_are_relative_for_rps_and_p99_and_in_points_for_errors_never_inf_or_nan() {
        let status = loadtest_status(Phase::Failed);
        let history = History::of_loadtest("shop", "checkout", Some(&status));
        let c = changes(&history.runs);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], None);
        assert_eq!(c[1], Some(RunChange { rps_percent: Some(-100.0), error_points: None, p99_percent: None }));
        // After a run of 0 rps and no latency: no change to show.
        assert_eq!(c[2], Some(RunChange { rps_percent: None, error_points: None, p99_percent: None }));
        let last = c[3].clone().unwrap();
        assert_eq!(last.rps_percent, Some(-10.0));
        assert!(
            (last.error_points.unwrap() - 1.05).abs() < 1e-9 && (last.p99_percent.unwrap() - 151.315_789).abs() < 1e-6
        );
        assert!(changes(&[]).is_empty());
    }

    #[test]
    fn the_json_holds_each_run_with_its_change_and_the_runs_in_progress() {
        let status = loadtest_status(Phase::Running);
        let v = to_json(&History::of_loadtest("shop", "checkout", Some(&status)));
        assert_eq!(
            (v["kind"].as_str(), v["namespace"].as_str(), v["name"].as_str()),
            (Some("LoadTest"), Some("shop"), Some("checkout"))
        );
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.iter().map(|r| r["run"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(runs[0]["change"], Value::Null);
        assert_eq!(runs[1]["change"], json!({"rpsPercent": -100.0, "errorRatePoints": null, "p99Percent": null}));
        assert_eq!(
            runs[2],
            json!({
                "run": 3, "startTime": "2026-03-03T03:00:01.5Z", "phase": "Succeeded", "verdict": "Passed",
                "requests": 30000, "rps": 500.0, "errorRate": 0.0015, "p50Ms": 10.0, "p95Ms": 19.75, "p99Ms": 38.0,
                "change": {"rpsPercent": null, "errorRatePoints": null, "p99Percent": null}
            })
        );
        assert_eq!(
            v["running"],
            json!([{"run": 4, "phase": "Running", "startTime": "2026-03-04T03:00:02.250000+01:00"}])
        );
        let finished = to_json(&History::of_loadtest("shop", "checkout", Some(&loadtest_status(Phase::Failed))));
        assert_eq!(
            finished["runs"][3]["change"],
            json!({"rpsPercent": -10.0, "errorRatePoints": 1.05, "p99Percent": 151.316})
        );
        assert_eq!(finished["running"], json!([]));
    }

    #[test]
    fn a_schedules_runs_are_named_by_loadtest_with_their_schedule_time() {
        let scheduled = |name: &str, at: &str, mut r: RunRecord| {
            r.name = Some(name.into());
            r.run = None;
            r.scheduled_time = Some(at.into());
            r
        };
        let status = LoadTestScheduleStatus {
            active: vec!["nightly-20260303".into()],
            history: vec![
                scheduled(
                    "nightly-20260302",
                    "2026-03-02T03:00:00Z",
                    record(1, "2026-03-02T03:00:04Z", "Passed", (1200, 20.0, 0.0), Some((5.0, 7.5, 9.0))),
                ),
                scheduled(
                    "nightly-20260301",
                    "2026-03-01T03:00:00Z",
                    record(1, "2026-03-01T03:00:05Z", "Passed", (1200, 20.0, 0.0), Some((5.0, 8.0, 10.0))),
                ),
            ],
            ..LoadTestScheduleStatus::default()
        };
        let active = vec![Running {
            run: None,
            name: Some("nightly-20260303".into()),
            phase: Phase::Initializing,
            start_time: None,
        }];
        let history = History::of_schedule("shop", "nightly", Some(&status), active);
        assert_eq!(
            render_table(&history),
            "\
LOADTEST          SCHEDULED             STARTED               VERDICT  REQUESTS   RPS  ERRORS    P50    P95     P99  ΔRPS  ΔERRORS    ΔP99
nightly-20260301  2026-03-01T03:00:00Z  2026-03-01T03:00:05Z  Passed       1200  20.0   0.00%  5.000  8.000  10.000
nightly-20260302  2026-03-02T03:00:00Z  2026-03-02T03:00:04Z  Passed       1200  20.0   0.00%  5.000  7.500   9.000  0.0%   0.00pp  -10.0%
latency in ms; ΔRPS and ΔP99: change from the run before; ΔERRORS: in percentage points
nightly-20260303: Initializing
"
        );
        assert_eq!(
            trend(&history).iter().map(|p| p.label.as_str()).collect::<Vec<_>>(),
            ["nightly-20260301", "nightly-20260302"]
        );
    }

    #[test]
    fn no_finished_run_says_so() {
        let empty = History::of_schedule("shop", "nightly", None, Vec::new());
        assert_eq!(render_table(&empty), "No finished runs of LoadTestSchedule shop/nightly yet.\n");
        assert_eq!(to_json(&empty)["runs"], json!([]));
        let first = LoadTestStatus { phase: Phase::Pending, run: Some(1), ..LoadTestStatus::default() };
        assert_eq!(
            render_table(&History::of_loadtest("shop", "checkout", Some(&first))),
            "No finished runs of LoadTest shop/checkout yet.\nrun 1: Pending\n"
        );
        assert!(History::of_loadtest("shop", "checkout", None).runs.is_empty());
    }

    #[test]
    fn the_trend_is_each_finished_run_oldest_first_labelled_by_run_number() {
        let status = loadtest_status(Phase::Failed);
        let t = trend(&History::of_loadtest("shop", "checkout", Some(&status)));
        assert_eq!(t.iter().map(|p| p.label.as_str()).collect::<Vec<_>>(), ["#1", "#2", "#3", "#4"]);
        assert_eq!(
            t[3],
            TrendPoint {
                label: "#4".into(),
                started_at: Some("2026-03-04T03:00:02.250000+01:00".into()),
                verdict: "Failed".into(),
                requests: 27000,
                rps: 450.0,
                error_rate: 0.012,
                p50_ms: Some(12.0),
                p95_ms: Some(30.0),
                p99_ms: Some(95.5),
            }
        );
        assert_eq!((t[1].requests, t[1].p99_ms), (0, None));
    }

    #[test]
    fn objects_are_named_as_kubectl_names_them() {
        assert_eq!(parse_object("loadtest/checkout"), Some((Kind::LoadTest, "checkout")));
        assert_eq!(parse_object("lt/checkout"), Some((Kind::LoadTest, "checkout")));
        assert_eq!(parse_object("loadtests/checkout"), Some((Kind::LoadTest, "checkout")));
        assert_eq!(parse_object("loadtestschedule/nightly"), Some((Kind::Schedule, "nightly")));
        assert_eq!(parse_object("lts/nightly"), Some((Kind::Schedule, "nightly")));
        for bad in ["checkout", "lt/", "job/checkout", "lt/a/b", "report.json"] {
            assert_eq!(parse_object(bad), None, "{bad}");
        }
        assert_eq!(loadtest_name("lt/checkout"), Some("checkout"));
        assert_eq!(loadtest_name("lts/nightly"), None);
    }
}
