//! What the runner sees of its LoadTest, and when that means stop.

use stampede_api::LoadTest;

/// What the runner sees of its LoadTest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) start_at: Option<String>,
    pub(crate) abort: bool,
    /// The phase is Succeeded, Failed or Aborted.
    pub(crate) finished: bool,
    /// The LoadTest was deleted.
    pub(crate) gone: bool,
    /// Why the LoadTest could not be read for too long.
    pub(crate) lost: Option<String>,
    /// The LoadTest is another object of the same name, or has started a later run: this
    /// runner's run is over.
    pub(crate) superseded: bool,
    /// A capacity search: the operator says the search is over.
    pub(crate) capacity_done: bool,
    /// The changes of load the operator took for this run (`status.live`), in order.
    pub(crate) changes: Vec<stampede_api::ControlChange>,
}

impl View {
    /// What runner of run `run` ([`stampede_api::run_id`], when known) sees of `lt`.
    pub(crate) fn of(lt: &LoadTest, run: Option<&str>) -> View {
        let status = lt.status.as_ref();
        let superseded = run.and_then(|r| r.rsplit_once('/')).is_some_and(|(uid, n)| {
            let later = status.and_then(|s| s.run).zip(n.parse::<u32>().ok()).is_some_and(|(now, mine)| now > mine);
            lt.metadata.uid.as_deref().is_some_and(|u| u != uid) || later
        });
        View {
            start_at: status.and_then(|s| s.start_at.clone()),
            abort: lt.spec.abort,
            finished: status.is_some_and(|s| s.phase.is_finished()),
            gone: false,
            lost: None,
            superseded,
            capacity_done: status.and_then(|s| s.capacity.as_ref()).is_some_and(|c| c.done),
            // Another run's (or object's) changes are not this run's.
            changes: if superseded {
                Vec::new()
            } else {
                status.and_then(|s| s.live.as_ref()).map(|l| l.changes.clone()).unwrap_or_default()
            },
        }
    }

    /// The run must not start, or must stop.
    pub(crate) fn stop(&self) -> bool {
        self.abort || self.finished || self.gone || self.superseded || self.capacity_done
    }

    pub(crate) fn stop_reason(&self) -> &'static str {
        if self.abort {
            "spec.abort is set"
        } else if self.gone {
            "the LoadTest was deleted"
        } else if self.superseded {
            "the LoadTest was re-created or started a later run"
        } else if self.capacity_done {
            "the capacity search is over"
        } else {
            "the LoadTest has finished"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_stop_on_abort_finish_or_deletion() {
        assert!(!View::default().stop());
        assert!(View { abort: true, ..View::default() }.stop());
        assert!(View { finished: true, ..View::default() }.stop());
        assert!(View { gone: true, ..View::default() }.stop());
        let lt: LoadTest = serde_json::from_value(serde_json::json!({
            "apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest",
            "metadata": {"name": "x"},
            "spec": {"runners": 2, "abort": true},
            "status": {"phase": "Running", "startAt": "2030-01-02T03:04:05Z"}
        }))
        .unwrap();
        let v = View::of(&lt, None);
        assert!(v.abort && !v.finished);
        assert_eq!(v.start_at.as_deref(), Some("2030-01-02T03:04:05Z"));
    }

    #[test]
    fn a_runner_of_another_object_or_an_earlier_run_stops() {
        let lt = |uid: &str, run: Option<u32>| -> LoadTest {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest",
                "metadata": {"name": "x", "uid": uid},
                "spec": {"runners": 1},
                "status": {"phase": "Initializing", "run": run}
            }))
            .unwrap()
        };
        assert!(!View::of(&lt("u1", Some(2)), Some("u1/2")).stop(), "its own run");
        assert!(!View::of(&lt("u1", None), Some("u1/1")).stop(), "the status does not say the run yet");
        assert!(!View::of(&lt("u1", Some(1)), Some("u1/2")).stop(), "the status lags behind the Job");
        assert!(View::of(&lt("u1", Some(3)), Some("u1/2")).stop(), "a later run started");
        assert!(View::of(&lt("u2", Some(1)), Some("u1/1")).stop(), "a re-created LoadTest");
        assert!(!View::of(&lt("u2", Some(5)), None).stop(), "no run known: nothing to compare");
    }

    #[test]
    fn a_view_takes_the_live_changes_of_its_own_run_only() {
        let lt: LoadTest = serde_json::from_value(serde_json::json!({
            "apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest",
            "metadata": {"name": "x", "uid": "u"},
            "spec": {"runners": 2},
            "status": {"phase": "Running", "run": 2, "live": {"decided": {"vus": 8},
                "changes": [{"seq": 1, "at": "2030-01-02T03:04:05Z", "vus": 8}]}}
        }))
        .unwrap();
        let mine = View::of(&lt, Some("u/2"));
        assert_eq!(mine.changes.iter().map(|c| (c.seq, c.vus)).collect::<Vec<_>>(), [(1, Some(8))]);
        assert!(View::of(&lt, Some("u/1")).changes.is_empty(), "a runner of run 1 takes none of run 2's");
        assert!(View::of(&lt, Some("other/2")).changes.is_empty(), "nor one of another object");
    }
}
