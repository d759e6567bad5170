//! The operator's Prometheus metrics.
//!
//! Reconcile counters live in a registry. Everything about LoadTests (how many per phase, and
//! each finished test's final summary) is computed at scrape time from the controller's cache,
//! so a deleted LoadTest's series disappear with it and a restarted operator shows past runs
//! again at once.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};
use stampede_api::{LoadTest, Phase};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Every phase, in lifecycle order (for `stampede_operator_loadtests{phase}`).
pub const PHASES: [Phase; 6] =
    [Phase::Pending, Phase::Initializing, Phase::Running, Phase::Succeeded, Phase::Failed, Phase::Aborted];

/// The parts of a reconcile timed in [`Metrics::parts`].
pub const RECONCILE_PARTS: [&str; 6] = ["observe", "merge", "decide", "status", "events", "children"];

/// Counters the reconciler updates, plus the caches the LoadTest series are read from.
pub struct Metrics {
    registry: Registry,
    /// `stampede_operator_reconciles_total`: reconciles run.
    pub reconciles: IntCounter,
    /// `stampede_operator_reconcile_errors_total{kind}`: reconciles that failed, by
    /// [`crate::Error::metric_label`].
    pub errors: IntCounterVec,
    /// `stampede_operator_reconcile_duration_seconds`: how long each reconcile took.
    pub duration: Histogram,
    /// `stampede_operator_reconcile_part_seconds{part}`: how long each part of a LoadTest's
    /// reconcile took — `observe` (reading and decoding what the watches hold), `merge` (the
    /// runners' live figures), `decide`, `status` (the status write), `events`, `children`
    /// (creating objects, then deleting them: two observations a reconcile).
    pub parts: HistogramVec,
    /// `stampede_operator_status_conflicts_total`: status writes refused because the LoadTest
    /// changed since it was read (decided again on the newer copy).
    pub status_conflicts: IntCounter,
    /// `stampede_operator_leader`: 1 while this replica leads (or runs without election), else 0.
    pub leader: IntGauge,
    /// `stampede_operator_api_requests_total{verb,resource}`: requests made to the API server
    /// (counted by [`crate::api_count::CountLayer`] in the operator's clients).
    pub api_requests: IntCounterVec,
    stores: Mutex<Vec<Store<LoadTest>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("reconciles", &self.reconciles.get()).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounter::new("stampede_operator_reconciles_total", "Reconciles run.").expect("valid");
        let errors = IntCounterVec::new(
            Opts::new("stampede_operator_reconcile_errors_total", "Reconciles that failed, by kind."),
            &["kind"],
        )
        .expect("valid");
        let duration = Histogram::with_opts(
            HistogramOpts::new("stampede_operator_reconcile_duration_seconds", "Time one reconcile took.")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )
        .expect("valid");
        let parts = HistogramVec::new(
            HistogramOpts::new("stampede_operator_reconcile_part_seconds", "Time each part of a reconcile took.")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &["part"],
        )
        .expect("valid");
        let status_conflicts = IntCounter::new(
            "stampede_operator_status_conflicts_total",
            "Status writes refused because the LoadTest changed since it was read.",
        )
        .expect("valid");
        let leader =
            IntGauge::new("stampede_operator_leader", "1 while this replica leads (or runs without election).")
                .expect("valid");
        let api_requests = IntCounterVec::new(
            Opts::new("stampede_operator_api_requests_total", "Requests made to the API server, by verb and resource."),
            &["verb", "resource"],
        )
        .expect("valid");
        let counters: [Box<dyn prometheus::core::Collector>; 4] = [
            Box::new(reconciles.clone()),
            Box::new(errors.clone()),
            Box::new(status_conflicts.clone()),
            Box::new(api_requests.clone()),
        ];
        for c in counters {
            registry.register(c).expect("unique names");
        }
        registry.register(Box::new(duration.clone())).expect("unique names");
        registry.register(Box::new(parts.clone())).expect("unique names");
        registry.register(Box::new(leader.clone())).expect("unique names");
        // Present from the start, so dashboards and alerts see zero rather than nothing.
        for kind in crate::Error::METRIC_LABELS {
            errors.with_label_values(&[kind]);
        }
        for part in RECONCILE_PARTS {
            parts.with_label_values(&[part]);
        }
        Metrics {
            registry,
            reconciles,
            errors,
            duration,
            parts,
            status_conflicts,
            leader,
            api_requests,
            stores: Mutex::new(Vec::new()),
        }
    }
}

impl Metrics {
    /// A timer of one part of a reconcile (one of [`RECONCILE_PARTS`]): observed when dropped
    /// (so a part that fails counts too) or by `observe_duration`.
    pub fn part(&self, part: &str) -> prometheus::HistogramTimer {
        self.parts.with_label_values(&[part]).start_timer()
    }

    /// Reads LoadTests from `store` at each scrape (one store per watched namespace).
    pub fn watch_store(&self, store: Store<LoadTest>) {
        self.stores.lock().unwrap_or_else(|e| e.into_inner()).push(store);
    }

    /// The namespaces the controller's caches hold LoadTests in now.
    pub fn namespaces(&self) -> std::collections::BTreeSet<String> {
        let stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores.iter().flat_map(|s| s.state()).filter_map(|lt| lt.namespace()).collect()
    }

    /// The text exposition, with the LoadTests the controller's caches hold now.
    pub fn render(&self) -> String {
        let loadtests: Vec<Arc<LoadTest>> =
            self.stores.lock().unwrap_or_else(|e| e.into_inner()).iter().flat_map(|s| s.state()).collect();
        self.render_with(&loadtests)
    }

    /// The text exposition for the given LoadTests.
    pub fn render_with(&self, loadtests: &[Arc<LoadTest>]) -> String {
        let mut families = self.registry.gather();
        families.extend(loadtest_families(loadtests));
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!("cannot encode metrics: {e}");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Series about LoadTests: counts per phase, one info series each, and each finished test's
/// final summary (which outlives its runner pods).
pub fn loadtest_families(loadtests: &[Arc<LoadTest>]) -> Vec<MetricFamily> {
    let mut by_phase = gauge("stampede_operator_loadtests", "LoadTests by phase.");
    for phase in PHASES {
        let n = loadtests.iter().filter(|lt| phase_of(lt) == phase).count();
        by_phase.push(&[("phase", format!("{phase:?}"))], n as f64);
    }
    let mut info = gauge("stampede_operator_loadtest_info", "One series per LoadTest, with its phase.");
    let mut rps =
        gauge("stampede_operator_loadtest_requests_per_second", "A finished LoadTest's request rate over its run.");
    let mut error_ratio =
        gauge("stampede_operator_loadtest_error_ratio", "A finished LoadTest's failed requests / requests (0-1).");
    let mut latency = gauge(
        "stampede_operator_loadtest_latency_seconds",
        "A finished LoadTest's latency quantiles, from the runners' merged histograms.",
    );
    let mut requests = gauge("stampede_operator_loadtest_requests", "A finished LoadTest's requests in total.");
    let mut dropped = gauge(
        "stampede_operator_loadtest_dropped_iterations",
        "A finished open-model LoadTest's iterations due when no VU was free (never started).",
    );
    let mut duration = gauge("stampede_operator_loadtest_duration_seconds", "A finished LoadTest's run time.");
    let mut started =
        gauge("stampede_operator_loadtest_start_timestamp_seconds", "When a LoadTest's runners started (Unix time).");
    let mut completed =
        gauge("stampede_operator_loadtest_completion_timestamp_seconds", "When a LoadTest finished (Unix time).");
    let mut load_changes = gauge(
        "stampede_operator_loadtest_load_change_timestamp_seconds",
        "When a running LoadTest's load changed (spec.live), by change (Unix time).",
    );
    let mut thresholds_failed =
        gauge("stampede_operator_loadtest_thresholds_failed", "How many of a finished LoadTest's thresholds failed.");
    for lt in loadtests {
        let id = [("namespace", lt.namespace().unwrap_or_default()), ("loadtest", lt.name_any())];
        let phase = phase_of(lt);
        let mut labels = id.to_vec();
        labels.push(("phase", format!("{phase:?}")));
        info.push(&labels, 1.0);
        let Some(status) = lt.status.as_ref() else { continue };
        if let Some(t) = status.start_time.as_deref().and_then(unix_seconds) {
            started.push(&id, t);
        }
        push_load_changes(&mut load_changes, &id, status);
        if !phase.is_finished() {
            continue;
        }
        if let Some(t) = status.completion_time.as_deref().and_then(unix_seconds) {
            completed.push(&id, t);
        }
        thresholds_failed.push(&id, status.thresholds.iter().filter(|v| !v.passed).count() as f64);
        let Some(summary) = status.summary.as_ref().filter(|s| s.is_final) else { continue };
        rps.push(&id, summary.rps);
        error_ratio.push(&id, summary.error_rate);
        requests.push(&id, summary.requests as f64);
        dropped.push(&id, summary.dropped_iterations as f64);
        duration.push(&id, summary.duration_seconds);
        let l = &summary.latency_ms;
        for (q, ms) in [("0.5", l.p50), ("0.9", l.p90), ("0.95", l.p95), ("0.99", l.p99)] {
            let mut labels = id.to_vec();
            labels.push(("quantile", q.to_string()));
            latency.push(&labels, ms / 1000.0);
        }
    }
    [
        by_phase,
        info,
        rps,
        error_ratio,
        latency,
        requests,
        dropped,
        duration,
        started,
        completed,
        load_changes,
        thresholds_failed,
    ]
    .into_iter()
    .map(|f| f.0)
    .filter(|f| !f.get_metric().is_empty())
    .collect()
}

/// One series per change of load a run took (`status.live`): its instant, labelled with its
/// number and what it changed (`vus 12`, `paused`, `resumed`).
fn push_load_changes(family: &mut Family, id: &[(&str, String)], status: &stampede_api::LoadTestStatus) {
    for change in status.live.iter().flat_map(|l| &l.changes) {
        let Some(t) = unix_seconds(&change.at) else { continue };
        let what = stampede_model::report::describe_load_change(
            change.vus.map(i64::from),
            change.rate.map(i64::from),
            change.paused,
        );
        let mut labels = id.to_vec();
        labels.extend([("seq", change.seq.to_string()), ("change", what)]);
        family.push(&labels, t);
    }
}

/// An empty gauge family.
fn gauge(name: &str, help: &str) -> Family {
    Family::new(name, help, MetricType::GAUGE)
}

fn phase_of(lt: &LoadTest) -> Phase {
    lt.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

fn unix_seconds(rfc3339: &str) -> Option<f64> {
    OffsetDateTime::parse(rfc3339, &Rfc3339).ok().map(|t| t.unix_timestamp_nanos() as f64 / 1e9)
}

struct Family(MetricFamily);

impl Family {
    fn new(name: &str, help: &str, kind: MetricType) -> Self {
        let mut f = MetricFamily::default();
        f.set_name(name.into());
        f.set_help(help.into());
        f.set_field_type(kind);
        Family(f)
    }

    fn push(&mut self, labels: &[(&str, String)], value: f64) {
        let mut m = proto::Metric::default();
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut p = proto::LabelPair::default();
                    p.set_name((*k).into());
                    p.set_value(v.clone());
                    p
                })
                .collect(),
        );
        let mut g = proto::Gauge::default();
        g.set_value(value);
        m.set_gauge(g);
        self.0.mut_metric().push(m);
    }
}

/// The operator's own HTTP answers: `/healthz` and `/readyz` (ok), `/metrics` (the Prometheus
/// text format, with its content type: Prometheus 3 refuses a scrape without one).
pub fn http_response(path: &str, m: &Metrics) -> Response<Full<Bytes>> {
    match path {
        "/healthz" | "/readyz" => Response::new(Full::new(Bytes::from_static(b"ok\n"))),
        "/metrics" => {
            let mut r = Response::new(Full::new(Bytes::from(m.render())));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            r
        }
    }
}
