//! `spec.live`: load changed while a run goes on. A new value is decided once: taken (a change
//! in `status.live`, which every runner watches and takes at one instant, [`LIVE_DELAY`] ahead,
//! each its share), or refused with the reason (`LiveChange=False` and a Warning Event) while the
//! run goes on unchanged.

use std::time::Duration;

use stampede_api::{ControlChange, LiveSpec, LiveStatus, LoadTest, LoadTestStatus};
use stampede_core::Plan;
use stampede_core::output::live::{ChangeRequest, check_change};

use super::decision::Action;
use super::stamp::{Stamp, fmt_micros};
use crate::conditions::Cond;

/// How far ahead of the decision the runners take a change: time for the status to reach every
/// runner's watch, so that they all take it at the same instant.
pub const LIVE_DELAY: Duration = Duration::from_secs(2);

/// What `lt`'s `spec.live` asks of its run, if it asks anything new: the status records it, and
/// the actions say it. `plan` is the run's, `None` once the run has ended (every change is then
/// refused).
pub(super) fn decide_live(lt: &LoadTest, plan: Option<&Plan>, st: &mut LoadTestStatus, stamp: Stamp) -> Vec<Action> {
    let Some(asked) = lt.spec.live.as_ref() else { return Vec::new() };
    let live = st.live.get_or_insert_with(LiveStatus::default);
    if live.decided == *asked {
        return Vec::new();
    }
    live.decided = asked.clone();
    // A generation that changed only `spec.live` is still the run's spec.
    if st.run_spec.as_deref() == Some(stampede_api::spec_digest(&lt.spec).as_str()) {
        st.run_generation = lt.metadata.generation;
    }
    let request = ChangeRequest { vus: asked.vus, rate: asked.rate, paused: asked.paused };
    let checked = match plan {
        Some(plan) => check_change(plan, &request, false),
        None => Err("the run has ended: a change applies to a run that goes on".to_string()),
    };
    match checked {
        Ok(change) => {
            let taken = ControlChange {
                seq: live.changes.len() as u32 + 1,
                at: fmt_micros(stamp.now + LIVE_DELAY),
                vus: change.vus,
                rate: change.rate,
                paused: change.paused,
            };
            live.changes.push(taken.clone());
            let note = format!("{} at {}", describe(asked), taken.at);
            stamp.set(&mut st.conditions, Cond::LiveChange, true, "Taken", &note);
            vec![Action::Event { warning: false, reason: "LoadChanged".into(), note }]
        }
        Err(why) => {
            let note = format!("{} refused: {why}", describe(asked));
            stamp.set(&mut st.conditions, Cond::LiveChange, false, "Refused", &note);
            vec![Action::Event { warning: true, reason: "LiveChangeRefused".into(), note }]
        }
    }
}

/// `spec.live` in words: `spec.live: vus 12, paused`.
fn describe(asked: &LiveSpec) -> String {
    match stampede_model::report::describe_load_change(asked.vus, asked.rate, asked.paused) {
        what if what.is_empty() => "spec.live (empty)".into(),
        what => format!("spec.live: {what}"),
    }
}

/// Whether `lt`'s spec is no longer the one its current run (as `st` says) started from: a new
/// generation, unless it changed only `spec.live`, which changes a run while it goes on. (Once
/// a `spec.live` is decided, the run's generation moves to it: see [`decide_live`].)
pub(super) fn spec_changed(lt: &LoadTest, st: &LoadTestStatus) -> bool {
    match (lt.metadata.generation, st.run_generation) {
        (Some(now), Some(ran)) if now != ran => !live_pending(lt, st),
        _ => false,
    }
}

/// Whether `lt` differs from its run's spec only by a `spec.live` not decided yet.
fn live_pending(lt: &LoadTest, st: &LoadTestStatus) -> bool {
    let decided = st.live.as_ref().map(|l| &l.decided);
    lt.spec.live.is_some()
        && lt.spec.live.as_ref() != decided
        && st.run_spec.as_deref() == Some(stampede_api::spec_digest(&lt.spec).as_str())
}
