//! The runner's I/O with the API server: its result ConfigMap, its LoadTest, and retries.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt as _};
use stampede_api::{LoadTest, RESULT_KEY, RunnerReport};
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::report::{Live, report_patch, running_report};
use crate::view::View;

/// How often a running runner reports its cumulative total.
pub(crate) const LIVE_EVERY: Duration = Duration::from_secs(2);
/// Attempts for an API call that fails transiently (backoff 100 ms doubling to 2 s).
pub(crate) const API_ATTEMPTS: u32 = 6;
/// Attempts for the final report (about 30 s in all): losing it loses the run.
pub(crate) const FINAL_ATTEMPTS: u32 = 18;
/// How long the LoadTest may stay unreadable before the runner gives up.
const WATCH_GIVE_UP: Duration = Duration::from_secs(60);
/// Server-side timeout of one watch request; the runner re-GETs and re-watches after it.
const WATCH_TIMEOUT_SECS: u32 = 60;
/// GET interval when the LoadTest cannot be watched.
const POLL_FALLBACK: Duration = Duration::from_millis(200);

/// Writes the runner's report to its result ConfigMap.
#[derive(Clone)]
pub(crate) struct Reporter {
    pub(crate) api: Api<ConfigMap>,
    pub(crate) name: String,
    pub(crate) index: u32,
    /// The run every report is stamped with ([`stampede_api::run_id`]), when the operator says.
    pub(crate) run: Option<String>,
}

impl Reporter {
    /// The report already in the ConfigMap, if any and readable.
    pub(crate) async fn current(&self) -> Option<RunnerReport> {
        let cm = match retry(&format!("get configmap {}", self.name), API_ATTEMPTS, || self.api.get(&self.name)).await {
            Ok(cm) => cm,
            Err(e) => {
                warn!("cannot read the previous report: {e}");
                return None;
            }
        };
        let text = cm.data.as_ref()?.get(RESULT_KEY)?;
        let previous: RunnerReport =
            serde_json::from_str(text).map_err(|e| warn!("ignoring an unreadable previous report: {e}")).ok()?;
        // Another run's report (an earlier run, a deleted LoadTest of the same name) is not ours.
        (previous.run == self.run).then_some(previous)
    }

    pub(crate) async fn send(&self, report: &RunnerReport, attempts: u32) -> Result<(), kube::Error> {
        let patch = report_patch(&RunnerReport { run: self.run.clone(), ..report.clone() });
        retry(&format!("patch configmap {}", self.name), attempts, || async {
            self.api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
        })
        .await?;
        debug!(index = self.index, state = ?report.state, "report sent");
        Ok(())
    }
}

/// Patches a `Running` report each time the run sends a new cumulative total; ends when the
/// run drops its sender.
pub(crate) async fn live_reports(
    reporter: Reporter,
    mut rx: watch::Receiver<Option<Live>>,
    started_at: Arc<std::sync::OnceLock<SystemTime>>,
) {
    while rx.changed().await.is_ok() {
        let Some(live) = rx.borrow_and_update().clone() else { continue };
        let Some(&started) = started_at.get() else { continue };
        let report = running_report(reporter.index, started, &live);
        // One try each time, bounded: the next total comes in two seconds, and the final
        // report waits for this one.
        match tokio::time::timeout(LIVE_EVERY * 2, reporter.send(&report, 1)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!("cannot report progress: {e}"),
            Err(_) => warn!("progress report timed out"),
        }
    }
}

/// Follows the LoadTest: a watch (field selector `metadata.name`, from the last resource
/// version), re-GET and re-watch whenever the watch ends. When watching fails (e.g. the Role
/// lacks `watch`) it falls back to a GET every [`POLL_FALLBACK`]. Publishes every change to
/// `tx`; after [`WATCH_GIVE_UP`] without a successful read it publishes `lost`.
pub(crate) async fn watch_loadtest(
    api: Api<LoadTest>,
    name: String,
    run: Option<String>,
    mut version: String,
    tx: watch::Sender<View>,
) {
    let mut last_ok = Instant::now();
    let mut watch_failures = 0u32;
    loop {
        let wp = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(WATCH_TIMEOUT_SECS);
        let opened = Instant::now();
        let mut events = 0u32;
        match api.watch(&wp, &version).await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(WatchEvent::Added(lt) | WatchEvent::Modified(lt)) => {
                            events += 1;
                            last_ok = Instant::now();
                            version = lt.resource_version().unwrap_or_default();
                            tx.send_replace(View::of(&lt, run.as_deref()));
                        }
                        Ok(WatchEvent::Deleted(_)) => {
                            tx.send_modify(|v| v.gone = true);
                            return;
                        }
                        Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                        Ok(WatchEvent::Error(status)) => {
                            debug!(code = status.code, "watch error: {}", status.message);
                            break;
                        }
                        Err(e) => {
                            debug!("watch stream error: {e}");
                            break;
                        }
                    }
                }
            }
            Err(e) if watch_failures == 0 => warn!("cannot watch LoadTest {name} (polling instead): {e}"),
            Err(e) => debug!("cannot watch LoadTest {name}: {e}"),
        }
        // A watch that ended at once without news is a failure: poll, do not spin.
        let healthy = events > 0 || opened.elapsed() >= Duration::from_secs(1);
        watch_failures = if healthy { 0 } else { watch_failures + 1 };
        if !healthy {
            tokio::time::sleep(POLL_FALLBACK).await;
        }
        // Resynchronise with a GET (after a timeout, a 410 Gone or an error).
        match api.get(&name).await {
            Ok(lt) => {
                last_ok = Instant::now();
                version = lt.resource_version().unwrap_or_default();
                tx.send_replace(View::of(&lt, run.as_deref()));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tx.send_modify(|v| v.gone = true);
                return;
            }
            Err(e) => warn!("cannot read LoadTest {name}: {e}"),
        }
        if last_ok.elapsed() > WATCH_GIVE_UP {
            tx.send_modify(|v| v.lost = Some(format!("LoadTest {name} unreadable for {} s", WATCH_GIVE_UP.as_secs())));
            return;
        }
    }
}

/// Whether an API error is worth retrying.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 408 | 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Runs `f` up to `attempts` times while it fails transiently (backoff 100 ms doubling to 2 s).
pub(crate) async fn retry<T, F, Fut>(what: &str, attempts: u32, mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 1;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < attempts && transient(&e) => {
                warn!(attempt, "{what}: {e}; retrying in {} ms", delay.as_millis());
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
