//! Prometheus exposition of a run in progress.
//!
//! Nothing here runs per request: the executor hands each tick's cumulative totals
//! ([`crate::run::executor::Tick::totals`]) to [`Exporter::observe`], and a scrape renders the
//! latest of them. Latency is a Prometheus histogram with fixed buckets for HTTP latency, so
//! `histogram_quantile(q, sum by (le) (rate(..._bucket[..])))` merges runners correctly; the
//! buckets are filled from the HDR histograms at scrape time.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

use crate::compile::plan::Plan;
use crate::run::executor::{Tick, Totals};
use crate::stats::metrics::{DropReason, StepStats};
use crate::stats::phases::LatencyPhase;
use crate::stats::sysstat;
use stampede_model::{ErrorKind, StepKey};

/// Upper bounds of the latency buckets, in seconds: 100 µs to 60 s, roughly 1-2.5-5 per decade.
pub(crate) const LATENCY_BUCKETS: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The `Content-Type` of the text exposition format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metric families a run exports, fed by ticks.
pub struct Exporter {
    labels: Vec<(String, String)>,
    keys: Vec<StepKey>,
    scenarios: Vec<String>,
    /// Load group names (for dropped iterations).
    groups: Vec<String>,
    /// The `group` blocks' (scenario, name), by transaction index.
    transactions: Vec<StepKey>,
    max_vus: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    totals: Option<Arc<Totals>>,
    active_vus: u32,
    start_unix: Option<f64>,
    /// When `/metrics` was served (the latest few), to tell whether a Prometheus scrapes and
    /// how often.
    scrapes: std::collections::VecDeque<std::time::Instant>,
    /// When the run's last figures were in.
    finished: Option<std::time::Instant>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("labels", &self.labels).finish_non_exhaustive()
    }
}

/// The per-step families of one scrape ([`Exporter::step_families`]).
struct StepFamilies {
    requests: MetricFamily,
    responses: MetricFamily,
    errors: MetricFamily,
    latency: MetricFamily,
    phases: MetricFamily,
    sent: MetricFamily,
    received: MetricFamily,
    /// Messages sent and received, gRPC calls by status, WebSocket closes by code.
    messages: [MetricFamily; 4],
}

impl Exporter {
    /// An exporter for `plan`; `labels` go on every series (e.g. namespace, loadtest, runner).
    pub fn new(plan: &Plan, labels: Vec<(String, String)>) -> Self {
        Exporter {
            labels,
            keys: plan.step_keys.clone(),
            scenarios: plan.scenarios.iter().map(|s| s.name.clone()).collect(),
            groups: plan.groups.iter().map(|g| g.name.clone()).collect(),
            transactions: plan.group_keys.clone(),
            max_vus: plan.max_vus(),
            state: Mutex::new(State::default()),
        }
    }

    /// Takes in one tick (it needs [`crate::run::executor::RunOptions::totals`] for the counters).
    pub fn observe(&self, tick: &Tick) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(totals) = &tick.totals {
            state.totals = Some(totals.clone());
        }
        state.active_vus = tick.active_vus;
        if state.start_unix.is_none() {
            let start = SystemTime::now().checked_sub(tick.elapsed).unwrap_or_else(SystemTime::now);
            state.start_unix = Some(unix_seconds(start));
        }
    }

    /// Marks the figures as final: the run is over and no tick will change them.
    pub fn finish(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).finished = Some(std::time::Instant::now());
    }

    /// Counts a scrape of `/metrics`, served at `at`.
    fn scraped(&self, at: std::time::Instant) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.scrapes.len() == 8 {
            s.scrapes.pop_front();
        }
        s.scrapes.push_back(at);
    }

    /// How long to stay up after [`Exporter::finish`] for one scrape of the final figures, so
    /// that the last counts are not lost when the process exits before the next scrape:
    /// `None` when nobody scraped (nothing to wait for) or the final figures were scraped
    /// already; else until twice the longest gap seen between scrapes (plus 2 s), counted from
    /// the last scrape, at most `cap` (and `cap` when only one scrape was seen).
    pub fn final_scrape_deadline(&self, cap: std::time::Duration) -> Option<std::time::Instant> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let finished = s.finished?;
        let last = *s.scrapes.back()?;
        if last >= finished {
            return None;
        }
        let gaps = s.scrapes.iter().zip(s.scrapes.iter().skip(1)).map(|(a, b)| *b - *a);
        let wait = gaps.max().map_or(cap, |g| (g * 2 + std::time::Duration::from_secs(2)).min(cap));
        Some((last + wait).max(finished).min(finished + cap))
    }

    /// Records when the run started (before its first tick).
    pub fn started(&self, at: SystemTime) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).start_unix = Some(unix_seconds(at));
    }

    /// The metric families as they stand now.
    pub fn families(&self) -> Vec<MetricFamily> {
        let (totals, active, start) = {
            let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            (s.totals.clone(), s.active_vus, s.start_unix)
        };
        let totals = totals.as_deref();
        let steps = self.step_families(totals);
        let [iterations, dropped, by_reason, waited, wait, lag] = self.iteration_families(totals);
        let [transactions, failed, durations] = self.group_families(totals);
        let mut families = vec![
            steps.requests,
            steps.responses,
            steps.errors,
            steps.latency,
            steps.sent,
            steps.received,
            iterations,
            dropped,
            by_reason,
            waited,
            wait,
            lag,
            transactions,
            failed,
            durations,
        ];
        if !steps.phases.get_metric().is_empty() {
            families.push(steps.phases);
        }
        for m in steps.messages {
            if !m.get_metric().is_empty() {
                families.push(m);
            }
        }
        self.process_families(active, start, &mut families);
        families.retain(|f| !f.get_metric().is_empty());
        families
    }

    /// The per-step families: requests, responses, errors, latency and its phases, bytes, and
    /// gRPC and WebSocket messages, statuses and closes.
    fn step_families(&self, totals: Option<&Totals>) -> StepFamilies {
        let empty = StepStats::default();
        let step = |i: usize| totals.and_then(|t| t.steps.get(i)).unwrap_or(&empty);
        let step_labels = |k: &StepKey| vec![("scenario", k.scenario.clone()), ("step", k.step.clone())];

        let mut requests = self.family("stampede_requests_total", "Requests sent.", MetricType::COUNTER);
        let mut responses =
            self.family("stampede_responses_total", "Responses received, by HTTP status.", MetricType::COUNTER);
        let mut errors = self.family("stampede_errors_total", "Failed requests, by kind.", MetricType::COUNTER);
        let mut latency = self.family(
            "stampede_request_duration_seconds",
            "Time to a request's whole response: from sending it, or in open models from the iteration's scheduled \
             start.",
            MetricType::HISTOGRAM,
        );
        let mut phases = self.family(
            "stampede_request_phase_duration_seconds",
            "Latency phases: dns, connect and tls once per new connection; ttfb (send to first byte) and receive \
             (the rest) per response.",
            MetricType::HISTOGRAM,
        );
        let mut sent = self.family("stampede_sent_bytes_total", "Request bytes written.", MetricType::COUNTER);
        let mut received = self.family("stampede_received_bytes_total", "Response bytes read.", MetricType::COUNTER);
        let mut messages_sent = self.family(
            "stampede_messages_sent_total",
            "gRPC and WebSocket messages sent, by step.",
            MetricType::COUNTER,
        );
        let mut messages_received = self.family(
            "stampede_messages_received_total",
            "gRPC and WebSocket messages received, by step.",
            MetricType::COUNTER,
        );
        let mut grpc_calls = self.family(
            "stampede_grpc_calls_total",
            "gRPC calls, by the status they ended with (grpc_status: OK, NOT_FOUND…; the server's, or \
             DEADLINE_EXCEEDED when the deadline passed first).",
            MetricType::COUNTER,
        );
        let mut ws_closes = self.family(
            "stampede_websocket_closes_total",
            "WebSocket sessions, by the close code they ended with (close_code: 1000, 1006…).",
            MetricType::COUNTER,
        );
        for (i, key) in self.keys.iter().enumerate() {
            let s = step(i);
            let labels = step_labels(key);
            self.push_value(&mut requests, &labels, s.requests as f64);
            for (status, n) in s.status_counts() {
                let mut l = labels.clone();
                l.push(("status", status.to_string()));
                self.push_value(&mut responses, &l, n as f64);
            }
            for (code, n) in s.grpc_status_counts() {
                let mut l = labels.clone();
                l.push(("grpc_status", crate::stats::metrics::grpc_status_name(code).to_string()));
                self.push_value(&mut grpc_calls, &l, n as f64);
            }
            for (code, n) in s.ws_close_counts() {
                let mut l = labels.clone();
                l.push(("close_code", code.to_string()));
                self.push_value(&mut ws_closes, &l, n as f64);
            }
            // gRPC statuses, `upgrade` and `close` once they happened; HTTP's kinds always.
            for kind in ErrorKind::ALL.into_iter().filter(|k| !k.is_protocol_specific() || s.errors[k.index()] > 0) {
                let mut l = labels.clone();
                l.push(("kind", kind.name().to_string()));
                self.push_value(&mut errors, &l, s.errors[kind.index()] as f64);
            }
            self.push_histogram(&mut latency, &labels, &s.latency);
            for phase in LatencyPhase::ALL {
                if let Some(p) = s.phases.get(phase).filter(|p| p.count() > 0) {
                    let mut l = labels.clone();
                    l.push(("phase", phase.name().to_string()));
                    self.push_histogram(&mut phases, &l, &p.histogram);
                }
            }
            self.push_value(&mut sent, &labels, s.bytes_sent as f64);
            self.push_value(&mut received, &labels, s.bytes_received as f64);
            if s.messages_sent + s.messages_received > 0 {
                self.push_value(&mut messages_sent, &labels, s.messages_sent as f64);
                self.push_value(&mut messages_received, &labels, s.messages_received as f64);
            }
        }
        StepFamilies {
            requests,
            responses,
            errors,
            latency,
            phases,
            sent,
            received,
            messages: [messages_sent, messages_received, grpc_calls, ws_closes],
        }
    }

    /// The `group` blocks' families: transactions, their failures and durations.
    fn group_families(&self, totals: Option<&Totals>) -> [MetricFamily; 3] {
        let empty = StepStats::default();
        let mut transactions = self.family(
            "stampede_group_transactions_total",
            "Runs of a `group` block (transactions), by scenario and group.",
            MetricType::COUNTER,
        );
        let mut failed = self.family(
            "stampede_group_failures_total",
            "Transactions with a failed step, by the kind of their first failure.",
            MetricType::COUNTER,
        );
        let mut durations = self.family(
            "stampede_group_duration_seconds",
            "A transaction's duration: from its first send (open models: the iteration's scheduled start) to the end \
             of its last step, think times included.",
            MetricType::HISTOGRAM,
        );
        for (i, key) in self.transactions.iter().enumerate() {
            let g = totals.and_then(|t| t.groups.get(i)).unwrap_or(&empty);
            let labels = vec![("scenario", key.scenario.clone()), ("group", key.step.clone())];
            self.push_value(&mut transactions, &labels, g.requests as f64);
            for kind in ErrorKind::ALL.into_iter().filter(|k| g.errors[k.index()] > 0) {
                let mut l = labels.clone();
                l.push(("kind", kind.name().to_string()));
                self.push_value(&mut failed, &l, g.errors[kind.index()] as f64);
            }
            self.push_histogram(&mut durations, &labels, &g.latency);
        }
        [transactions, failed, durations]
    }

    /// Iterations by scenario, dropped ones (by load group and by reason), the open models'
    /// waits and schedule lag.
    fn iteration_families(&self, totals: Option<&Totals>) -> [MetricFamily; 6] {
        let empty = StepStats::default();
        let mut iterations =
            self.family("stampede_iterations_total", "Iterations completed, by scenario.", MetricType::COUNTER);
        let mut dropped = self.family(
            "stampede_dropped_iterations_total",
            "Iterations the schedule wanted but no VU was free to start.",
            MetricType::COUNTER,
        );
        for (i, name) in self.scenarios.iter().enumerate() {
            let n = totals.and_then(|t| t.iterations.get(i)).copied().unwrap_or(0);
            self.push_value(&mut iterations, &[("scenario", name.clone())], n as f64);
        }
        // Dropped iterations belong to a load group: the scenario with its own load, or the
        // shared load (`default`).
        for (g, name) in self.groups.iter().enumerate() {
            let n = totals.and_then(|t| t.dropped.get(g)).copied().unwrap_or(0);
            self.push_value(&mut dropped, &[("scenario", name.clone())], n as f64);
        }
        let mut by_reason = self.family(
            "stampede_dropped_iterations_by_reason_total",
            "Dropped iterations by why: queueFull (maxWaiting were waiting), waitedTooLong (maxWait \
             passed), runEnded (still waiting at the end).",
            MetricType::COUNTER,
        );
        for reason in DropReason::ALL {
            let n = totals.map_or(0, |t| t.dropped_by_reason[reason as usize]);
            self.push_value(&mut by_reason, &[("reason", reason.name().to_string())], n as f64);
        }
        let queue_wait = totals.and_then(|t| t.queue_wait.as_ref()).unwrap_or(&empty.latency);
        let mut waited = self.family(
            "stampede_waited_iterations_total",
            "Iterations that came due with every VU busy and waited for a free one (open models).",
            MetricType::COUNTER,
        );
        self.push_value(&mut waited, &[], queue_wait.len() as f64);
        let mut wait = self.family(
            "stampede_queue_wait_seconds",
            "How long iterations that found every VU busy waited for one (open models).",
            MetricType::HISTOGRAM,
        );
        self.push_histogram(&mut wait, &[], queue_wait);
        let mut lag = self.family(
            "stampede_schedule_lag_seconds",
            "How late iterations started against their schedule (open workload models).",
            MetricType::HISTOGRAM,
        );
        let lag_hist = totals.and_then(|t| t.schedule_lag.as_ref()).unwrap_or(&empty.latency);
        self.push_histogram(&mut lag, &[], lag_hist);
        [iterations, dropped, by_reason, waited, wait, lag]
    }

    /// The generator itself: active and most VUs, its CPU and memory, the run's start.
    fn process_families(&self, active: u32, start: Option<f64>, families: &mut Vec<MetricFamily>) {
        let usage = sysstat::process();
        families.push(self.gauge(
            "stampede_active_vus",
            "Virtual users running now (an open model's: those running an iteration, not its idle pool).",
            f64::from(active),
        ));
        families.push(self.gauge(
            "stampede_max_vus",
            "Most virtual users the load plan runs.",
            f64::from(self.max_vus),
        ));
        let mut cpu = self.family(
            "stampede_generator_cpu_seconds_total",
            "CPU time this generator process used (user + system).",
            MetricType::COUNTER,
        );
        self.push_value(&mut cpu, &[], usage.cpu().as_secs_f64());
        families.push(cpu);
        families.push(self.gauge(
            "stampede_generator_resident_memory_bytes",
            "Resident memory of this generator process.",
            sysstat::current_rss_bytes().unwrap_or(usage.max_rss_bytes) as f64,
        ));
        if let Some(start) = start {
            families.push(self.gauge(
                "stampede_run_start_timestamp_seconds",
                "When the run started (Unix time).",
                start,
            ));
        }
    }

    /// The text exposition of [`Exporter::families`].
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Names and labels are ours and valid; encoding into a Vec cannot fail otherwise.
        if let Err(e) = TextEncoder::new().encode(&self.families(), &mut out) {
            tracing::warn!("cannot encode metrics: {e}");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    fn family(&self, name: &str, help: &str, kind: MetricType) -> MetricFamily {
        let mut f = MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(help.to_string());
        f.set_field_type(kind);
        f
    }

    fn gauge(&self, name: &str, help: &str, value: f64) -> MetricFamily {
        let mut f = self.family(name, help, MetricType::GAUGE);
        self.push_value(&mut f, &[], value);
        f
    }

    fn metric(&self, labels: &[(&str, String)]) -> proto::Metric {
        let mut m = proto::Metric::default();
        let pairs = self
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(labels.iter().map(|(k, v)| (*k, v.as_str())))
            .map(|(k, v)| {
                let mut p = proto::LabelPair::default();
                p.set_name(k.to_string());
                p.set_value(v.to_string());
                p
            })
            .collect();
        m.set_label(pairs);
        m
    }

    fn push_value(&self, family: &mut MetricFamily, labels: &[(&str, String)], value: f64) {
        let mut m = self.metric(labels);
        if family.get_field_type() == MetricType::COUNTER {
            let mut c = proto::Counter::default();
            c.set_value(value);
            m.set_counter(c);
        } else {
            let mut g = proto::Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        }
        family.mut_metric().push(m);
    }

    fn push_histogram(&self, family: &mut MetricFamily, labels: &[(&str, String)], hist: &Histogram<u64>) {
        let mut m = self.metric(labels);
        let (counts, sum) = bucket_counts(hist);
        let mut h = proto::Histogram::default();
        h.set_sample_count(hist.len());
        h.set_sample_sum(sum);
        h.set_bucket(
            LATENCY_BUCKETS
                .iter()
                .zip(counts)
                .map(|(&le, n)| {
                    let mut b = proto::Bucket::default();
                    b.set_upper_bound(le);
                    b.set_cumulative_count(n);
                    b
                })
                .collect(),
        );
        m.set_histogram(h);
        family.mut_metric().push(m);
    }
}

/// Cumulative counts per [`LATENCY_BUCKETS`] bound and the sum in seconds, from a histogram in
/// microseconds. A recorded value counts in the first bucket whose bound it does not exceed.
pub(crate) fn bucket_counts(hist: &Histogram<u64>) -> ([u64; LATENCY_BUCKETS.len()], f64) {
    let mut counts = [0u64; LATENCY_BUCKETS.len()];
    let mut sum = 0.0;
    for v in hist.iter_recorded() {
        let n = v.count_at_value();
        let value = v.value_iterated_to();
        sum += hist.median_equivalent(value) as f64 / 1e6 * n as f64;
        // The bin's lowest value decides: a recorded value equal to a bound stays in its bucket.
        let us = hist.lowest_equivalent(value) as f64;
        let first = LATENCY_BUCKETS.partition_point(|&le| le * 1e6 < us);
        for c in counts.iter_mut().skip(first) {
            *c += n;
        }
    }
    (counts, sum)
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A `/metrics` endpoint serving an [`Exporter`] on its own thread.
#[derive(Debug)]
pub struct MetricsServer(stampede_serve::Background);

impl MetricsServer {
    /// Binds `addr` (port 0 picks one) and serves `GET /metrics`.
    pub fn start(addr: SocketAddr, exporter: Arc<Exporter>) -> std::io::Result<MetricsServer> {
        let handle = move |req: hyper::Request<hyper::body::Incoming>| {
            let response = respond(req.uri().path(), &exporter).map(http_body_util::BodyExt::boxed);
            async move { response }
        };
        stampede_serve::Background::start("stampede-metrics", addr, handle).map(MetricsServer)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }
}

fn respond(path: &str, exporter: &Exporter) -> Response<Full<Bytes>> {
    match path {
        "/metrics" => {
            let at = std::time::Instant::now();
            let mut r = Response::new(Full::new(Bytes::from(exporter.render())));
            exporter.scraped(at);
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(CONTENT_TYPE));
            r
        }
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"stampede: metrics are at /metrics\n")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::histogram::new_histogram;

    /// An exporter with no plan behind it: only its scrape bookkeeping is used.
    fn bare() -> Exporter {
        Exporter {
            labels: Vec::new(),
            keys: Vec::new(),
            scenarios: Vec::new(),
            groups: Vec::new(),
            transactions: Vec::new(),
            max_vus: 0,
            state: Mutex::new(State::default()),
        }
    }

    #[test]
    fn a_runner_waits_for_one_scrape_of_its_final_figures_only_when_someone_scrapes() {
        use std::time::{Duration, Instant};
        let cap = Duration::from_secs(60);
        // Nobody scraped: nothing to wait for.
        let e = bare();
        e.finish();
        assert_eq!(e.final_scrape_deadline(cap), None);

        // Scraped every 10 s, the last one 1 s before the end: wait until twice the interval
        // (plus 2 s) after that scrape; a scrape after the end releases it.
        let e = bare();
        let t0 = Instant::now() - Duration::from_secs(21);
        for at in [t0, t0 + Duration::from_secs(10), t0 + Duration::from_secs(20)] {
            e.scraped(at);
        }
        e.finish();
        let deadline = e.final_scrape_deadline(cap).expect("a scrape of the final figures is due");
        assert_eq!(deadline, t0 + Duration::from_secs(20 + 22));
        e.scraped(Instant::now());
        assert_eq!(e.final_scrape_deadline(cap), None, "the final figures were scraped");

        // One scrape seen: the interval is unknown, so the cap, from that scrape.
        let e = bare();
        let one = Instant::now() - Duration::from_secs(1);
        e.scraped(one);
        e.finish();
        assert_eq!(e.final_scrape_deadline(cap), Some(one + cap));
    }

    /// gRPC statuses are error kinds like any other; protocol kinds appear once they happened,
    /// and a step's messages have their own counters.
    #[test]
    fn grpc_statuses_and_messages_are_series_of_their_steps() {
        let keys = vec![
            StepKey { scenario: "s".into(), step: "call".into() },
            StepKey { scenario: "s".into(), step: "get".into() },
        ];
        let mut call = StepStats::default();
        (call.requests, call.messages_sent, call.messages_received) = (10, 10, 30);
        for _ in 0..3 {
            call.record_error(ErrorKind::Unimplemented);
        }
        call.add_grpc_status(0, 7);
        call.add_grpc_status(12, 3);
        let mut get = StepStats::default();
        get.requests = 5;
        get.record_status(200);
        get.add_ws_close(1006, 2);
        let totals = Totals {
            steps: vec![call, get],
            groups: Vec::new(),
            iterations: vec![10],
            schedule_lag: None,
            dropped: vec![0],
            dropped_by_reason: Default::default(),
            queue_wait: None,
        };
        let e = Exporter { keys, scenarios: vec!["s".into()], groups: vec!["g".into()], ..bare() };
        e.state.lock().unwrap().totals = Some(Arc::new(totals));
        let text = e.render();
        let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).map(str::to_string);
        assert_eq!(
            line(r#"stampede_errors_total{scenario="s",step="call",kind="UNIMPLEMENTED"}"#).as_deref(),
            Some(r#"stampede_errors_total{scenario="s",step="call",kind="UNIMPLEMENTED"} 3"#),
            "{text}"
        );
        assert!(line(r#"stampede_errors_total{scenario="s",step="get",kind="timeout"} 0"#).is_some(), "{text}");
        assert!(!text.contains("kind=\"CANCELLED\""), "a gRPC status that never happened has no series");
        assert!(line(r#"stampede_messages_sent_total{scenario="s",step="call"} 10"#).is_some(), "{text}");
        assert!(line(r#"stampede_messages_received_total{scenario="s",step="call"} 30"#).is_some(), "{text}");
        assert!(!text.contains(r#"stampede_messages_sent_total{scenario="s",step="get"}"#), "HTTP steps have none");
        // gRPC calls by their status, apart from HTTP's statuses; WebSocket closes by code.
        for wanted in [
            r#"stampede_grpc_calls_total{scenario="s",step="call",grpc_status="OK"} 7"#,
            r#"stampede_grpc_calls_total{scenario="s",step="call",grpc_status="UNIMPLEMENTED"} 3"#,
            r#"stampede_responses_total{scenario="s",step="get",status="200"} 1"#,
            r#"stampede_websocket_closes_total{scenario="s",step="get",close_code="1006"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == wanted), "{wanted} in {text}");
        }
        assert!(!text.contains(r#"stampede_responses_total{scenario="s",step="call""#), "{text}");
    }

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let mut h = new_histogram();
        h.record_n(100, 3).unwrap(); // exactly 0.0001 s: in the first bucket
        h.record_n(800, 2).unwrap(); // ≤ 1 ms
        h.record(70_000_000).unwrap(); // 70 s: above every bound, only in +Inf (the count)
        let (counts, sum) = bucket_counts(&h);
        assert_eq!(counts[0], 3);
        assert_eq!(counts[2], 3); // ≤ 0.5 ms
        assert_eq!(counts[3], 5); // ≤ 1 ms
        assert_eq!(counts[LATENCY_BUCKETS.len() - 1], 5);
        assert!((sum - (3.0 * 0.0001 + 2.0 * 0.0008 + 70.0)).abs() < 0.1, "{sum}");
    }
}
