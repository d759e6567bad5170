//! The controller's own view of its children: the Jobs and ConfigMaps it manages, kept by
//! kube-runtime's reflectors from the same watches that trigger its reconciles. A reconcile
//! reads a run's results and Jobs here, not with a LIST and a GET each time.
//!
//! The view may lag the API server by a watch event. That is safe for what is read here: a
//! result or Job that is newer than the view triggers another reconcile once the view has it
//! (a reflector stores an event before passing it on), and one of another run or object is
//! told apart by [`crate::desired::is_of_run`]. What must not lag — whether an earlier run's
//! objects are gone before a run starts — is still read from the API server.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use stampede_api::{MANAGER, RUN_LABEL};

use crate::{Error, Result};

/// The longest a reconcile waits for the watches to have listed the children once (at the
/// operator's start); after it, the reconcile fails and is retried with back-off.
pub const SYNC_WAIT: Duration = Duration::from_secs(10);

/// What the watches hold, per watched scope (a namespace, or `None` for all).
#[derive(Clone, Default)]
pub struct Children {
    scopes: Vec<(Option<String>, Stores)>,
}

/// The stores of one watched scope.
#[derive(Clone)]
struct Stores {
    config_maps: Store<ConfigMap>,
    jobs: Store<Job>,
}

/// A watch of one kind of child, as the controller takes it: every object it touches (its
/// owner is then reconciled), after the reflector has stored it.
pub type ChildStream<K> = std::pin::Pin<Box<dyn Stream<Item = Result<K, watcher::Error>> + Send>>;

impl Children {
    /// A view that holds these objects, listed once and never changing (tests, tools).
    pub fn fixed(config_maps: Vec<ConfigMap>, jobs: Vec<Job>) -> Self {
        Children { scopes: vec![(None, Stores { config_maps: fixed(config_maps), jobs: fixed(jobs) })] }
    }

    /// Watches the managed Jobs and ConfigMaps of `namespace` (`None`: all namespaces) into this
    /// view; the streams must be polled (the controller does) for the view to fill.
    pub fn watch(&mut self, client: &Client, namespace: Option<&str>) -> (ChildStream<Job>, ChildStream<ConfigMap>) {
        let (jobs, cms) = match namespace {
            Some(ns) => (Api::<Job>::namespaced(client.clone(), ns), Api::<ConfigMap>::namespaced(client.clone(), ns)),
            None => (Api::<Job>::all(client.clone()), Api::<ConfigMap>::all(client.clone())),
        };
        let managed = watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGER}"));
        let (job_store, job_writer) = reflector::store();
        let (cm_store, cm_writer) = reflector::store();
        let job_stream = watcher(jobs, managed.clone())
            .default_backoff()
            .modify(|job: &mut Job| job.metadata.managed_fields = None)
            .reflect(job_writer)
            .touched_objects()
            .boxed();
        let cm_stream =
            watcher(cms, managed).default_backoff().modify(lean).reflect(cm_writer).touched_objects().boxed();
        self.scopes.push((namespace.map(str::to_string), Stores { config_maps: cm_store, jobs: job_store }));
        (job_stream, cm_stream)
    }

    /// The ConfigMap `name` of `ns` as last watched: `None` when the view has none.
    pub async fn config_map(&self, ns: &str, name: &str) -> Result<Option<Arc<ConfigMap>>> {
        let Some(stores) = self.scope(ns) else { return Ok(None) };
        synced(&stores.config_maps, "ConfigMaps").await?;
        Ok(stores.config_maps.get(&ObjectRef::new(name).within(ns)))
    }

    /// The Job `name` of `ns` as last watched: `None` when the view has none.
    pub async fn job(&self, ns: &str, name: &str) -> Result<Option<Arc<Job>>> {
        let Some(stores) = self.scope(ns) else { return Ok(None) };
        synced(&stores.jobs, "Jobs").await?;
        Ok(stores.jobs.get(&ObjectRef::new(name).within(ns)))
    }

    /// How many objects the view holds: (ConfigMaps, Jobs).
    pub fn len(&self) -> (usize, usize) {
        self.scopes.iter().fold((0, 0), |(c, j), (_, s)| (c + s.config_maps.len(), j + s.jobs.len()))
    }

    /// Whether the view holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    /// The stores that watch `ns`: its own scope, else the all-namespaces one.
    fn scope(&self, ns: &str) -> Option<&Stores> {
        let own = self.scopes.iter().find(|(scope, _)| scope.as_deref() == Some(ns));
        own.or_else(|| self.scopes.iter().find(|(scope, _)| scope.is_none())).map(|(_, s)| s)
    }
}

/// Waits (at most [`SYNC_WAIT`]) until `store` has been listed once.
async fn synced<K>(store: &Store<K>, what: &'static str) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match tokio::time::timeout(SYNC_WAIT, store.wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) | Err(_) => Err(Error::NotSynced(what)),
    }
}

/// A ConfigMap as the view keeps it: no managed fields, and the data only of a run's own
/// ConfigMaps (labelled with [`RUN_LABEL`]: its scenario, results and setup/teardown reports).
/// A merged report is kept as long as its LoadTest and may be large; it is never read here.
fn lean(cm: &mut ConfigMap) {
    cm.metadata.managed_fields = None;
    if !cm.metadata.labels.as_ref().is_some_and(|l| l.contains_key(RUN_LABEL)) {
        cm.data = None;
        cm.binary_data = None;
    }
}

/// A store listed once with `objects`, whose writer is gone.
fn fixed<K>(objects: Vec<K>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("perf".into());
        cm.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        cm.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
        cm
    }

    #[tokio::test]
    async fn a_fixed_view_finds_its_objects_by_namespace_and_name() {
        let view = Children::fixed(vec![cm("shop-result-0", &[(RUN_LABEL, "1")])], vec![]);
        assert!(view.config_map("perf", "shop-result-0").await.unwrap().is_some());
        assert!(view.config_map("other", "shop-result-0").await.unwrap().is_none());
        assert!(view.job("perf", "shop-runners").await.unwrap().is_none());
        assert_eq!(view.len(), (1, 0));
    }

    #[test]
    fn the_view_keeps_a_runs_data_and_drops_a_reports() {
        let mut result = cm("shop-result-0", &[(RUN_LABEL, "1")]);
        let mut report = cm("shop-report", &[("stampede.dev/loadtest", "shop")]);
        lean(&mut result);
        lean(&mut report);
        assert!(result.data.is_some());
        assert!(report.data.is_none());
    }

    #[tokio::test]
    async fn a_view_no_watch_filled_is_an_error_not_a_wait_forever() {
        let (store, writer) = reflector::store::<ConfigMap>();
        drop(writer);
        let view = Children { scopes: vec![(None, Stores { config_maps: store, jobs: fixed(vec![]) })] };
        let err = view.config_map("perf", "shop-result-0").await.unwrap_err();
        assert!(matches!(err, Error::NotSynced("ConfigMaps")), "{err}");
    }
}
