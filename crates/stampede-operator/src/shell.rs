//! The operator's shell: what every controller (LoadTests, LoadTestSchedules) shares to talk to
//! the API server — the [`Context`] of a reconcile, the back-off of failed ones, Events, the
//! conditional status write, server-side apply and deletes. The controllers decide (pure); this
//! and their own `observe` and `act` do the I/O.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use stampede_api::{DEFAULT_IMAGE, LoadTest, MANAGER, RESULT_KEY};
use stampede_core::Plan;

use crate::children::Children;
use crate::leader::Fence;
use crate::lifecycle;
use crate::metrics::Metrics;
use crate::{Error, Result};

/// What every reconcile shares.
pub struct Context {
    /// The client reconciles read and write through (with leader election, one that refuses
    /// to write once this replica no longer leads).
    pub client: Client,
    /// Publishes Events as `stampede-operator` (instance: the pod's name, from `POD_NAME`).
    pub recorder: Recorder,
    /// The reconcile counters, shared with the `/metrics` server.
    pub metrics: Arc<Metrics>,
    /// Runner image for LoadTests that name none.
    pub runner_image: String,
    /// The compiled scenario of each run in progress, by [`stampede_api::run_id`]: compiled
    /// once per run, not on every reconcile.
    pub(crate) plans: std::sync::Mutex<BTreeMap<String, Arc<Plan>>>,
    /// The runners' interim figures of each run in progress, by [`stampede_api::run_id`]: each
    /// report decoded once, when it changed; and when they were last merged.
    live: std::sync::Mutex<BTreeMap<String, (crate::results::LiveMerge, Option<std::time::Instant>)>>,
    /// Each runner's result as last read, by `{run id}/{runner index}`: its ConfigMap's
    /// resourceVersion and what it read as. A reconcile follows every runner's write, and
    /// parses only the results that changed.
    read: ReadCache,
    /// Why runner pods of each run waiting for its runners are not starting, by
    /// [`stampede_api::run_id`], and when their pods were listed: at most every
    /// [`POD_LOOK_EVERY`], not at every reconcile (each runner's `Ready` write makes one, and a
    /// list of a thousand pods is megabytes for the API server to send).
    pod_looks: std::sync::Mutex<BTreeMap<String, (std::time::Instant, Vec<lifecycle::PodProblem>)>>,
    /// When each run's status was last written, by [`stampede_api::run_id`]: a change of the
    /// runners' counts alone waits until [`Context::live_every`] has passed since
    /// ([`crate::lifecycle::only_counts_changed`]).
    written: std::sync::Mutex<BTreeMap<String, std::time::Instant>>,
    /// How often at most a running test's status takes its runners' interim figures
    /// ([`LIVE_EVERY`]). Each runner writes every 2 s, so a test of many runners has a write
    /// every few milliseconds; each status write goes to etcd and to every page and watch
    /// following the test.
    pub live_every: Duration,
    /// How often at most the runner pods of a run waiting for its runners are listed
    /// ([`POD_LOOK_EVERY`]).
    pub pod_look_every: Duration,
    /// Reconciles that failed in a row, by object ([`object_key`]): the back-off's exponent.
    failures: std::sync::Mutex<BTreeMap<String, u32>>,
    /// Whether this replica still leads: checked before every write.
    pub fence: Fence,
    /// The runs' results and Jobs as the controller's watches last saw them ([`Context::new`]:
    /// none; the controller adds its watches).
    pub children: Children,
}

impl Context {
    /// A context on `client`: runners use [`DEFAULT_IMAGE`], no reconcile has failed yet, and
    /// the fence always holds (no leader election).
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter { controller: MANAGER.into(), instance: std::env::var("POD_NAME").ok() };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            runner_image: DEFAULT_IMAGE.to_string(),
            plans: Default::default(),
            live: Default::default(),
            read: Default::default(),
            pod_looks: Default::default(),
            written: Default::default(),
            live_every: LIVE_EVERY,
            pod_look_every: POD_LOOK_EVERY,
            failures: Default::default(),
            fence: Fence::always(),
            children: Children::default(),
        }
    }

    /// `Ok` while this replica leads (always without leader election); every write asks first.
    pub(crate) fn leading(&self) -> Result<()> {
        if self.fence.holds() { Ok(()) } else { Err(Error::NotLeading) }
    }

    /// Drops the compiled plans and live figures of `lt`'s runs (it finished).
    pub(crate) fn forget_plans(&self, lt: &LoadTest) {
        let prefix = format!("{}/", lt.metadata.uid.as_deref().unwrap_or_default());
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !k.starts_with(&prefix));
        self.live.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !k.starts_with(&prefix));
        self.read.forget(&prefix);
        self.pod_looks.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !k.starts_with(&prefix));
        self.written.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !k.starts_with(&prefix));
    }

    /// How long a status write of `lt` that changes only the runners' counts must wait: `None`
    /// when [`Context::live_every`] has passed since its last write (or there was none).
    pub(crate) fn counts_wait(&self, lt: &LoadTest) -> Option<Duration> {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let since = written.get(&current_run(lt))?.elapsed();
        self.live_every.checked_sub(since).filter(|wait| !wait.is_zero())
    }

    /// Notes that `lt`'s status was written now.
    pub(crate) fn status_written(&self, lt: &LoadTest) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.insert(current_run(lt), std::time::Instant::now());
    }

    /// What the last look at run `run_id`'s runner pods found, if it was less than
    /// [`Context::pod_look_every`] ago.
    pub(crate) fn recent_pod_look(&self, run_id: &str) -> Option<Vec<lifecycle::PodProblem>> {
        let looks = self.pod_looks.lock().unwrap_or_else(|e| e.into_inner());
        looks.get(run_id).filter(|(at, _)| at.elapsed() < self.pod_look_every).map(|(_, found)| found.clone())
    }

    /// Keeps what a look at run `run_id`'s runner pods found, now.
    pub(crate) fn pods_looked(&self, run_id: &str, found: Vec<lifecycle::PodProblem>) {
        let mut looks = self.pod_looks.lock().unwrap_or_else(|e| e.into_inner());
        looks.insert(run_id.to_string(), (std::time::Instant::now(), found));
    }

    /// Runner `index`'s report of run `run_id` in `cm` (see [`ReadCache::read`]).
    pub(crate) fn read_report(&self, run_id: &str, index: u32, cm: &ConfigMap) -> ReadReport {
        self.read.read(run_id, index, cm)
    }

    /// The live figures of `lt`'s current run from its runners' `reports`, decoding only the
    /// reports that changed since its last reconcile: `Ok(None)` when they cannot be merged,
    /// `Err(wait)` when the last was merged less than [`Context::live_every`] ago (the status
    /// keeps it; come back after `wait`).
    pub(crate) fn live_summary(
        &self,
        lt: &LoadTest,
        plan: &Plan,
        reports: &[Option<stampede_api::RunnerReport>],
    ) -> Result<Option<crate::results::LiveFigures>, Duration> {
        let key = current_run(lt);
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        // One run at a time per LoadTest: an earlier run's figures go.
        let prefix = format!("{}/", lt.metadata.uid.as_deref().unwrap_or_default());
        live.retain(|k, _| !k.starts_with(&prefix) || *k == key);
        let (merge, last) = live.entry(key).or_default();
        let now = std::time::Instant::now();
        if let Some(wait) = last.map(|t| self.live_every.saturating_sub(now - t)).filter(|w| !w.is_zero()) {
            return Err(wait);
        }
        *last = Some(now);
        Ok(merge.figures(plan, reports).ok())
    }

    /// The status of `lt` could not be written with the figures last merged (it changed
    /// meanwhile): the next reconcile merges them again at once, rather than a pace later.
    pub(crate) fn live_not_written(&self, lt: &LoadTest) {
        let key = current_run(lt);
        if let Some((_, last)) = self.live.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&key) {
            *last = None;
        }
    }

    /// The wait before retrying `key` after its reconcile failed: 1 s, doubling with each
    /// failure in a row, at most [`MAX_BACKOFF`].
    pub fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        backoff_after(*n)
    }

    /// Forgets `key`'s failures: its reconcile succeeded.
    pub fn succeeded(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

/// Runners' results as last read, by `{run id}/{runner index}`: each ConfigMap's resourceVersion
/// and what it read as. A reconcile follows every runner's write, and parses only the results
/// that changed.
#[derive(Default)]
pub(crate) struct ReadCache(std::sync::Mutex<BTreeMap<String, (String, ReadReport)>>);

impl ReadCache {
    /// Runner `index`'s report of run `run_id` in `cm` (its result ConfigMap), as
    /// [`lifecycle::read_report`] reads it: parsed again only when the ConfigMap changed since
    /// the last reconcile (by its resourceVersion).
    fn read(&self, run_id: &str, index: u32, cm: &ConfigMap) -> ReadReport {
        let Some(text) = cm.data.as_ref().and_then(|d| d.get(RESULT_KEY)) else { return Ok(None) };
        let Some(version) = cm.metadata.resource_version.as_deref() else {
            return lifecycle::read_report(index, text, run_id);
        };
        let key = format!("{run_id}/{index}");
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((v, report)) = read.get(&key)
            && v == version
        {
            return report.clone();
        }
        // One run at a time per LoadTest: an earlier run's go (looked for once per runner and
        // run, not at every write: a test of many runners has a write every few milliseconds).
        if !read.contains_key(&key) {
            let (uid, this_run) = (format!("{}/", run_id.split('/').next().unwrap_or_default()), format!("{run_id}/"));
            read.retain(|k, _| !k.starts_with(&uid) || k.starts_with(&this_run));
        }
        let report = lifecycle::read_report(index, text, run_id);
        read.insert(key, (version.to_string(), report.clone()));
        report
    }

    /// Forgets the results of the runs whose id starts with `prefix`.
    fn forget(&self, prefix: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !k.starts_with(prefix));
    }
}

/// The id of `lt`'s current run ([`stampede_api::run_id`]).
pub(crate) fn current_run(lt: &LoadTest) -> String {
    let run = lt.status.as_ref().and_then(|s| s.run).unwrap_or(1);
    stampede_api::run_id(lt.metadata.uid.as_deref().unwrap_or_default(), run)
}

/// A runner's report as read from its result: none yet (or another run's), or unreadable.
pub(crate) type ReadReport = Result<Option<stampede_api::RunnerReport>, crate::Invalid>;

/// How often at most a running test's status takes its runners' interim figures (see
/// [`Context::live_every`]).
pub const LIVE_EVERY: Duration = Duration::from_secs(1);

/// How often at most the runner pods of a run waiting for its runners are listed (to say why
/// some cannot start); a waiting run is looked at again every 5 s anyway.
pub const POD_LOOK_EVERY: Duration = Duration::from_secs(5);

/// The longest wait before a failed reconcile is retried.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The wait after `failures` failed reconciles in a row (at least 1): 1 s, 2 s, 4 s… at most
/// [`MAX_BACKOFF`].
fn backoff_after(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(MAX_BACKOFF)
}

/// `Kind/namespace/name` of an object, the key of its back-off.
pub(crate) fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{}/{}/{}",
        K::kind(&()),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Records an Event on `obj` (a failure to record one is logged: the status says it too).
pub(crate) async fn publish<K>(ctx: &Context, obj: &K, action: &str, warning: bool, reason: &str, note: &str)
where
    K: Resource<DynamicType = ()>,
{
    if ctx.leading().is_err() {
        tracing::debug!("not leading: event {reason} not recorded");
        return;
    }
    let ev = Event {
        type_: if warning { EventType::Warning } else { EventType::Normal },
        reason: reason.to_string(),
        note: Some(truncate(note, 1000)),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &obj.object_ref(&())).await {
        tracing::warn!("cannot record event {reason}: {e}");
    }
}

/// Writes `status` of `obj` on the condition that the object is still the version read
/// (server-side apply with its resourceVersion): a decision taken on a stale copy (the watch
/// cache can lag behind our own last write) must not overwrite a newer status. `false` when the
/// status changed meanwhile: decide again on the newer copy.
pub(crate) async fn write_status<K>(ctx: &Context, obj: &K, status: &impl Serialize) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
{
    ctx.leading()?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"resourceVersion": obj.resource_version()},
        "status": status,
    });
    match api.patch_status(&obj.name_any(), &PatchParams::apply(MANAGER).force(), &Patch::Apply(patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            tracing::debug!(kind = %K::kind(&()), "status changed meanwhile; deciding again on the newer copy");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Server-side applies `obj` in `ns` (as [`MANAGER`], forcing its fields).
pub(crate) async fn apply<K>(ctx: &Context, ns: &str, obj: &K) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    ctx.leading()?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(obj)).await?;
    Ok(())
}

/// How many objects [`apply_all`] writes at once.
pub const APPLY_AT_ONCE: usize = 16;

/// Server-side applies each of `objects` in `ns`, [`APPLY_AT_ONCE`] at a time: a thousand
/// runners' result ConfigMaps, one round trip after the other, would hold their Job back for
/// many seconds. The first error is returned once the writes under way have ended.
pub(crate) async fn apply_all<K>(ctx: &Context, ns: &str, objects: &[K]) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    use futures::StreamExt as _;
    // The futures made first: a stream that maps references to futures is not `Send` enough
    // for the controller's task (a known limit of higher-ranked closures).
    let writes: Vec<_> = objects.iter().map(|o| apply(ctx, ns, o)).collect();
    let results: Vec<Result<()>> = futures::stream::iter(writes).buffer_unordered(APPLY_AT_ONCE).collect().await;
    results.into_iter().collect()
}

/// Deletes `name` in `ns` in the background; one already gone is no error.
pub(crate) async fn delete<K>(ctx: &Context, ns: &str, name: &str) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    delete_with::<K>(ctx, ns, name, &DeleteParams::background()).await
}

/// Deletes `name` in `ns` with `params`; one already gone is no error.
pub(crate) async fn delete_with<K>(ctx: &Context, ns: &str, name: &str, params: &DeleteParams) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    ctx.leading()?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    match api.delete(name, params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_parsed_again_only_when_its_config_map_changed() {
        let cm = |version: &str, text: &str| ConfigMap {
            metadata: kube::api::ObjectMeta { resource_version: Some(version.into()), ..Default::default() },
            data: Some([(RESULT_KEY.to_string(), text.to_string())].into()),
            ..Default::default()
        };
        let report = |requests: u64| {
            let mut r = stampede_api::RunnerReport::new(0, stampede_api::RunnerState::Running);
            r.run = Some("uid/1".into());
            r.live = Some(stampede_model::portable::PortableStep { requests, ..Default::default() });
            serde_json::to_string(&r).unwrap()
        };
        let requests = |read: ReadReport| read.unwrap().and_then(|r| r.live).map(|l| l.requests);
        let cache = ReadCache::default();
        assert_eq!(requests(cache.read("uid/1", 0, &cm("5", &report(1)))), Some(1));
        // The same version is not read again (a ConfigMap's data changes with its version).
        assert_eq!(requests(cache.read("uid/1", 0, &cm("5", &report(2)))), Some(1));
        assert_eq!(requests(cache.read("uid/1", 0, &cm("6", &report(2)))), Some(2));
        // Another run's report is none of this run's; an unreadable one says which runner.
        assert_eq!(requests(cache.read("uid/2", 0, &cm("6", &report(2)))), None);
        let bad = cache.read("uid/2", 3, &cm("7", "{")).unwrap_err();
        assert!(bad.0.starts_with("runner 3: its result is not a runner report"), "{bad}");
        // An earlier run's entries go when a later run's are read, and all with `forget`.
        assert_eq!(cache.0.lock().unwrap().keys().collect::<Vec<_>>(), ["uid/2/0", "uid/2/3"]);
        cache.forget("uid/");
        assert!(cache.0.lock().unwrap().is_empty());
    }

    #[test]
    fn failed_reconciles_back_off_doubling_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff_after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff_after(u32::MAX), MAX_BACKOFF);
    }
}
