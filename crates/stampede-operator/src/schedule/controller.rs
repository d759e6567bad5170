//! The shell of LoadTestSchedules: watches them and the LoadTests they own, gathers what
//! [`decide`] needs, and carries out its decision.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
// What the controller does next: reconcile again after a while, or when something changes.
use kube::runtime::controller::{Action as Next, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use stampede_api::{LoadTest, LoadTestSchedule, MANAGER, SCHEDULE_LABEL, names};
use time::OffsetDateTime;

use super::decide::{Event, Observed, decide};
use crate::shell::{Context, delete, object_key, publish, write_status};
use crate::{Error, Result};

/// Runs the schedule controller over `namespace` (all when `None`) until a shutdown signal.
pub async fn run(client: Client, namespace: Option<String>, ctx: Arc<Context>) {
    let (schedules, loadtests) = match namespace.as_deref() {
        Some(ns) => (Api::<LoadTestSchedule>::namespaced(client.clone(), ns), Api::<LoadTest>::namespaced(client, ns)),
        None => (Api::<LoadTestSchedule>::all(client.clone()), Api::<LoadTest>::all(client)),
    };
    Controller::new(schedules, watcher::Config::default())
        .owns(loadtests, watcher::Config::default().labels(SCHEDULE_LABEL))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!("schedule reconcile: {e}");
            }
        })
        .await;
}

fn error_policy(lts: Arc<LoadTestSchedule>, error: &Error, ctx: Arc<Context>) -> Next {
    ctx.metrics.errors.with_label_values(&[error.metric_label()]).inc();
    let wait = ctx.backoff(&object_key(&*lts));
    tracing::warn!(schedule = %lts.name_any(), kind = error.metric_label(), ?wait, "schedule reconcile failed: {error}");
    Next::requeue(wait)
}

async fn reconcile(lts: Arc<LoadTestSchedule>, ctx: Arc<Context>) -> Result<Next> {
    let result = reconcile_one(&lts, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&object_key(&*lts));
    }
    result
}

/// One reconcile of one LoadTestSchedule: observe, decide, act.
pub async fn reconcile_one(lts: &LoadTestSchedule, ctx: &Context) -> Result<Next> {
    if lts.metadata.deletion_timestamp.is_some() {
        return Ok(Next::await_change());
    }
    let client = &ctx.client;
    let ns = lts.namespace().ok_or_else(|| Error::NoNamespace("a LoadTestSchedule"))?;
    let name = lts.name_any();
    let uid = lts.metadata.uid.clone().unwrap_or_default();
    let loadtests: Api<LoadTest> = Api::namespaced(client.clone(), &ns);
    let selector = format!("{SCHEDULE_LABEL}={}", names::label_value(&name));
    let runs: Vec<LoadTest> = loadtests
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|lt| lt.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    let mut decision = decide(lts, &Observed { now: OffsetDateTime::now_utc(), runs });

    if let Some(lt) = &decision.create {
        let run = lt.name_any();
        ctx.leading()?;
        match loadtests.create(&PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, lt).await {
            Ok(_) => tracing::info!(schedule = %name, loadtest = %run, "created a scheduled run"),
            // Created before (e.g. by this operator before a restart): that run, not a second one.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::info!(schedule = %name, loadtest = %run, "the scheduled run exists already")
            }
            // An invalid template stays invalid: this run is lost, said once; the next one tries again.
            Err(kube::Error::Api(e)) if e.code == 400 || e.code == 422 => {
                let why = format!("cannot create LoadTest {run}: {}", e.message);
                decision.status.active.retain(|a| *a != run);
                decision.status.active_count = decision.status.active.len() as i32;
                decision.status.message = Some(why.clone());
                decision.events.retain(|ev| ev.reason != "Created");
                decision.events.push(Event { warning: true, reason: "RunRejected".into(), note: why });
            }
            Err(e) => return Err(e.into()),
        }
    }
    for run in &decision.abort {
        let patch = serde_json::json!({"spec": {"abort": true}});
        ctx.leading()?;
        match loadtests.patch(run, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Conditional, as for LoadTests: a stale copy must not move lastScheduleTime back.
    if lts.status.as_ref() != Some(&decision.status) && !write_status(ctx, lts, &decision.status).await? {
        return Ok(Next::requeue(Duration::from_millis(200)));
    }
    for run in &decision.delete {
        delete::<LoadTest>(ctx, &ns, run).await?;
        tracing::info!(schedule = %name, loadtest = %run, "deleted a run beyond the history limits");
    }
    for ev in &decision.events {
        publish(ctx, lts, "Schedule", ev.warning, &ev.reason, &ev.note).await;
    }
    Ok(match decision.requeue {
        Some(d) => Next::requeue(d.max(Duration::from_millis(200))),
        None => Next::await_change(),
    })
}
