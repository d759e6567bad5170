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
}

impl View {
    pub(crate) fn of(lt: &LoadTest) -> View {
        let status = lt.status.as_ref();
        View {
            start_at: status.and_then(|s| s.start_at.clone()),
            abort: lt.spec.abort,
            finished: status.is_some_and(|s| s.phase.is_finished()),
            gone: false,
            lost: None,
        }
    }

    /// The run must not start, or must stop.
    pub(crate) fn stop(&self) -> bool {
        self.abort || self.finished || self.gone
    }

    pub(crate) fn stop_reason(&self) -> &'static str {
        if self.abort {
            "spec.abort is set"
        } else if self.gone {
            "the LoadTest was deleted"
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
        let v = View::of(&lt);
        assert!(v.abort && !v.finished);
        assert_eq!(v.start_at.as_deref(), Some("2030-01-02T03:04:05Z"));
    }
}
