//! Leader election on a `coordination.k8s.io/v1` Lease, so that two operator replicas never
//! reconcile at once.
//!
//! Three rules keep it safe under faults:
//!
//! - Writes carry the Lease's resourceVersion (optimistic concurrency): of two replicas racing
//!   for an expired lease, exactly one write succeeds.
//! - A candidate judges another holder's lease by its own monotonic clock, never by the
//!   renewTime the holder wrote (another machine's wall clock): the lease has expired only when
//!   the candidate has seen the record stay the same for the lease's duration ([`expired`]).
//! - The leader steps down when it has not renewed within the renew deadline, which is shorter
//!   than the lease: every renewal attempt runs under that deadline, so a hung request cannot
//!   keep it leading after another replica may have taken the lease ([`Leadership`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;

use crate::api_count::CountLayer;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

/// How long leader election waits, and for what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long others wait, after they last saw the lease record change, before they take it.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal. Shorter than the lease,
    /// so that it stops before anyone else may start.
    pub renew_deadline: Duration,
    /// The pause between attempts to take or renew the lease.
    pub retry_period: Duration,
}

impl Default for Timing {
    /// Kubernetes' own controllers' durations: a 15 s lease, a 10 s renew deadline, a try every 2 s.
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// Checks that 0 < retry period < renew deadline < lease duration, and that the lease
    /// lasts at least a second (the Lease counts whole seconds).
    pub fn check(&self) -> Result<(), Error> {
        let ordered = Duration::ZERO < self.retry_period
            && self.retry_period < self.renew_deadline
            && self.renew_deadline < self.lease_duration;
        if ordered && self.lease_duration >= Duration::from_secs(1) { Ok(()) } else { Err(Error::Timing(*self)) }
    }

    /// The lease's duration as written in the Lease: whole seconds, rounded up (a longer lease
    /// only makes others wait longer).
    fn lease_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// Whether this replica may act as leader now: until the renew deadline after the start of its
/// last successful renewal (locally observed time), and never after leadership ended. The shell
/// checks it before every write, so that a replica that was frozen (a stopped process, a stalled
/// connection) writes nothing when it wakes, before its renewal task has even run: another may
/// lead by then. [`Fence::always`] when there is no election (a single replica).
#[derive(Clone, Debug, Default)]
pub struct Fence(Option<Arc<Mutex<Instant>>>);

impl Fence {
    /// A fence that always holds: no leader election.
    pub fn always() -> Self {
        Fence(None)
    }

    /// A fence that holds until `deadline`.
    pub fn until(deadline: Instant) -> Self {
        Fence(Some(Arc::new(Mutex::new(deadline))))
    }

    /// Moves the deadline (after a renewal), or to now (leadership ended).
    fn set(&self, deadline: Instant) {
        if let Some(d) = &self.0 {
            *d.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
        }
    }

    /// Whether this replica may write now.
    pub fn holds(&self) -> bool {
        self.holds_at(Instant::now())
    }

    /// Whether this replica may write at `now`.
    pub fn holds_at(&self, now: Instant) -> bool {
        match &self.0 {
            None => true,
            Some(d) => now < *d.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// A layer for the controllers' API client: every write (any method but GET) is refused at
/// the moment it is dispatched unless the [`Fence`] holds. Checked there, not only before a
/// reconcile acts, so that a replica frozen between its check and its request (a stopped
/// process) does not send that request when it wakes; what remains is the microseconds between
/// this check and the connection's write of the bytes. Lease renewals go through another client.
#[derive(Clone, Debug)]
pub struct FenceLayer(pub Fence);

impl<S> tower::Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced { inner, fence: self.0.clone() }
    }
}

/// The service [`FenceLayer`] makes.
#[derive(Clone, Debug)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

/// A write refused because this replica no longer leads.
#[derive(Debug, thiserror::Error)]
#[error("not leading: the write was not sent")]
pub struct NotLeading;

impl<S, B> tower::Service<http::Request<B>> for Fenced<S>
where
    S: tower::Service<http::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.method() != http::Method::GET && !self.fence.holds() {
            return Box::pin(std::future::ready(Err(NotLeading.into())));
        }
        let call = self.inner.call(request);
        Box::pin(async move { call.await.map_err(Into::into) })
    }
}

/// An executor for the controllers' HTTP client that runs each connection's task only while
/// the [`Fence`] holds: polled once it no longer holds, the task ends and its connection closes
/// without writing another byte. A connection's task is where a request's bytes are written,
/// and a request passes [`FenceLayer`] some time before that (the connection is checked out,
/// the request queued for its task): frozen in between, a replica would otherwise send the
/// request when it wakes. Checked here, the check and the write happen in the same poll.
#[derive(Clone, Debug)]
pub struct FencedExecutor(pub Fence);

impl hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>> for FencedExecutor {
    fn execute(&self, task: Pin<Box<dyn Future<Output = ()> + Send>>) {
        tokio::spawn(FencedTask { fence: self.0.clone(), task });
    }
}

/// A task that ends, unpolled, once its fence no longer holds.
struct FencedTask {
    fence: Fence,
    task: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Future for FencedTask {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.fence.holds() {
            return Poll::Ready(());
        }
        self.task.as_mut().poll(cx)
    }
}

/// The client the controllers write through: [`FenceLayer`] refuses a write when it is made,
/// and [`FencedExecutor`] closes the connections before they write anything once `fence` no
/// longer holds. Reads stop too then: the replica is about to exit.
/// `count` counts every request that passes the fence.
pub fn fenced_client(config: kube::Config, fence: Fence, count: CountLayer) -> Result<Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from((config, FencedExecutor(fence.clone())))?
        .with_layer(&count)
        .with_layer(&FenceLayer(fence))
        .build())
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The API server did not answer within this time (the renew deadline).
    #[error("the API server did not answer within {0:?}")]
    TimedOut(Duration),
    #[error(
        "leader election needs 0 < retry period < renew deadline < lease duration, and a lease of 1 s or more: {0:?}"
    )]
    /// These durations break 0 < retry period < renew deadline < lease duration, or the lease
    /// is shorter than 1 s.
    Timing(Timing),
}

/// Why a leader stopped leading.
#[derive(Debug, thiserror::Error)]
pub enum Lost {
    /// Another replica holds the lease now.
    #[error("{holder} holds the lease now")]
    Taken {
        /// The identity written in the Lease.
        holder: String,
    },
    /// No renewal succeeded within this renew deadline.
    #[error("the lease was not renewed within the renew deadline ({0:?})")]
    Deadline(Duration),
    /// This replica released the lease ([`Leadership::release`]).
    #[error("the lease was released")]
    Released,
    /// The renewal task panicked or was cancelled.
    #[error("the renewal task ended: {0}")]
    Stopped(#[from] JoinError),
}

/// The last lease record a replica read, and when (by its own monotonic clock) it last saw the
/// record change.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The Lease's spec as last read.
    pub record: LeaseSpec,
    /// When this replica first saw that record, by its own monotonic clock.
    pub changed_at: Instant,
}

impl Observed {
    /// What a replica knows after reading `record` at `now`, having known `previous`: the
    /// record's change time moves only when the record differs from the one seen before.
    pub fn saw(previous: Option<Observed>, record: LeaseSpec, now: Instant) -> Observed {
        match previous {
            Some(previous) if previous.record == record => previous,
            _ => Observed { record, changed_at: now },
        }
    }
}

/// Whether the observed lease has expired at `now`: its record has not changed for the lease
/// duration it names (`fallback` when it names none), measured by the observer's clock from
/// when it saw the record change. The renewTime written in the record is not used: it comes
/// from the holder's clock, which may be far from ours.
pub fn expired(observed: &Observed, now: Instant, fallback: Duration) -> bool {
    let duration = observed
        .record
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(fallback, Duration::from_secs);
    now.saturating_duration_since(observed.changed_at) >= duration
}

/// Whether `me` may write itself into the observed lease at `now`: it is free, already ours,
/// or [`expired`].
pub fn may_take(observed: &Observed, me: &str, now: Instant, fallback: Duration) -> bool {
    match observed.record.holder_identity.as_deref() {
        None | Some("") => true,
        Some(holder) if holder == me => true,
        Some(_) => expired(observed, now, fallback),
    }
}

/// The outcome of one attempt to take or renew the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// This replica holds the lease (took or renewed it).
    Leading,
    /// Another replica holds a lease that has not expired.
    HeldBy(String),
    /// Another write changed the lease between the read and this replica's write.
    Conflict,
}

/// One replica's side of the election on one Lease.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    me: String,
    timing: Timing,
    observed: Option<Observed>,
}

fn wall_now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    /// Elects on the Lease `name` of `api` as `me`.
    pub fn new(api: Api<Lease>, name: &str, me: &str, timing: Timing) -> Result<Self, Error> {
        timing.check()?;
        Ok(Elector { api, name: name.to_string(), me: me.to_string(), timing, observed: None })
    }

    /// What this replica last saw of the lease.
    pub fn observed(&self) -> Option<&Observed> {
        self.observed.as_ref()
    }

    fn observe(&mut self, record: LeaseSpec, now: Instant) -> &Observed {
        let seen = Observed::saw(self.observed.take(), record, now);
        self.observed.insert(seen)
    }

    /// Tries once to take or renew the lease (a read, then a write if it may take it).
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.me.clone()),
                    lease_duration_seconds: Some(self.timing.lease_seconds()),
                    acquire_time: Some(wall_now()),
                    renew_time: Some(wall_now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default(), Instant::now());
                    Ok(Attempt::Leading)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(e.into()),
            };
        };
        let current = lease.spec.clone().unwrap_or_default();
        let now = Instant::now();
        let fallback = self.timing.lease_duration;
        let seen = Observed::saw(self.observed.take(), current.clone(), now);
        if !may_take(self.observed.insert(seen), &self.me, now, fallback) {
            return Ok(Attempt::HeldBy(current.holder_identity.unwrap_or_default()));
        }
        let ours = current.holder_identity.as_deref() == Some(self.me.as_str());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.me.clone()),
            lease_duration_seconds: Some(self.timing.lease_seconds()),
            acquire_time: if ours { current.acquire_time.clone() } else { Some(wall_now()) },
            renew_time: Some(wall_now()),
            lease_transitions: Some(current.lease_transitions.unwrap_or(0) + i32::from(!ours)),
            ..current
        });
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(replaced) => {
                self.observe(replaced.spec.unwrap_or_default(), Instant::now());
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    /// Clears the holder if this replica holds the lease, so that another takes it at once.
    /// Returns whether it did. Call it only once this replica has stopped acting as leader.
    pub async fn release(&mut self) -> Result<bool, Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else { return Ok(false) };
        let current = lease.spec.clone().unwrap_or_default();
        if current.holder_identity.as_deref() != Some(self.me.as_str()) {
            return Ok(false);
        }
        lease.spec =
            Some(LeaseSpec { holder_identity: None, acquire_time: None, renew_time: Some(wall_now()), ..current });
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Tries every retry period until this replica holds the lease; returns when the successful
    /// attempt started (the leader's renew deadline counts from there).
    async fn acquire(&mut self) -> Instant {
        let mut waiting_for: Option<String> = None;
        loop {
            let started = Instant::now();
            match tokio::time::timeout(self.timing.renew_deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Leading)) => return started,
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    if waiting_for.as_ref() != Some(&holder) {
                        tracing::info!(%holder, "another replica leads; waiting");
                        waiting_for = Some(holder);
                    }
                }
                Ok(Ok(Attempt::Conflict)) => tracing::debug!("the lease changed while taking it; retrying"),
                Ok(Err(e)) => tracing::warn!("leader election: {e}"),
                Err(_) => tracing::warn!("leader election: {}", Error::TimedOut(self.timing.renew_deadline)),
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Renews every retry period while leading; returns why it stopped. Each attempt must
    /// succeed within the renew deadline of the start of the last successful one (`renewed`).
    async fn keep_renewing(&mut self, mut renewed: Instant, fence: &Fence) -> Lost {
        let Timing { renew_deadline, retry_period, .. } = self.timing;
        loop {
            let deadline = renewed + renew_deadline;
            tokio::time::sleep_until((Instant::now() + retry_period).min(deadline)).await;
            let started = Instant::now();
            if started >= deadline {
                return Lost::Deadline(renew_deadline);
            }
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Leading)) => {
                    renewed = started;
                    fence.set(started + renew_deadline);
                }
                Ok(Ok(Attempt::HeldBy(holder))) => return Lost::Taken { holder },
                Ok(Ok(Attempt::Conflict)) => tracing::debug!("the lease changed while renewing it; retrying"),
                Ok(Err(e)) => tracing::warn!("cannot renew the lease: {e}"),
                Err(_) => return Lost::Deadline(renew_deadline),
            }
        }
    }

    /// Waits until this replica leads, then keeps renewing in a task of its own.
    pub async fn lead(self) -> Leadership {
        self.lead_fencing(Fence::until(Instant::now())).await
    }

    /// [`Elector::lead`], keeping `fence` (e.g. one a [`FenceLayer`] checks) open while it leads.
    pub async fn lead_fencing(mut self, fence: Fence) -> Leadership {
        let renewed = self.acquire().await;
        tracing::info!(identity = self.me, "leading");
        let (stop, stopped) = oneshot::channel::<()>();
        fence.set(renewed + self.timing.renew_deadline);
        let renewing = fence.clone();
        let task = tokio::spawn(async move {
            tokio::select! {
                lost = self.keep_renewing(renewed, &renewing) => {
                    renewing.set(Instant::now());
                    tracing::error!("stopped leading: {lost}");
                    Ended::Lost(lost)
                }
                Ok(()) = stopped => {
                    renewing.set(Instant::now());
                    let released = match tokio::time::timeout(self.timing.renew_deadline, self.release()).await {
                        Ok(released) => released,
                        Err(_) => Err(Error::TimedOut(self.timing.renew_deadline)),
                    };
                    Ended::Released(released)
                }
            }
        });
        Leadership { task: Some(task), stop: Some(stop), fence }
    }
}

/// How the renewal task ended.
enum Ended {
    Lost(Lost),
    Released(Result<bool, Error>),
}

/// This replica leads while the renewal task runs. As a future, it resolves when leadership
/// is lost; the caller must stop acting as leader at once (exit, so that it restarts clean).
/// Dropping it stops renewing.
pub struct Leadership {
    task: Option<JoinHandle<Ended>>,
    stop: Option<oneshot::Sender<()>>,
    fence: Fence,
}

impl Leadership {
    /// What the shell checks before every write: whether this replica still leads now.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Stops renewing and clears the holder, so that another replica takes over at once; call
    /// it only once this replica has stopped acting as leader. Returns whether it released
    /// the lease (false when it no longer held it).
    pub async fn release(&mut self) -> Result<bool, Error> {
        let Some(task) = self.task.take() else { return Ok(false) };
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match task.await {
            Ok(Ended::Released(released)) => released,
            Ok(Ended::Lost(_)) | Err(_) => Ok(false),
        }
    }
}

impl Future for Leadership {
    type Output = Lost;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Lost> {
        let Some(task) = self.task.as_mut() else { return Poll::Pending };
        let lost = match std::task::ready!(Pin::new(task).poll(cx)) {
            Ok(Ended::Lost(lost)) => lost,
            Ok(Ended::Released(_)) => Lost::Released,
            Err(e) => Lost::Stopped(e),
        };
        self.task = None;
        Poll::Ready(lost)
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.fence.set(Instant::now());
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Waits until this replica (`me`) holds the Lease `name` in `namespace`, then keeps renewing
/// it; the returned [`Leadership`] resolves if leadership is lost.
pub async fn lead(client: Client, namespace: &str, name: &str, me: &str, timing: Timing) -> Result<Leadership, Error> {
    lead_fencing(client, namespace, name, me, timing, Fence::until(Instant::now())).await
}

/// [`lead`], keeping `fence` open while this replica leads.
pub async fn lead_fencing(
    client: Client,
    namespace: &str,
    name: &str,
    me: &str,
    timing: Timing,
    fence: Fence,
) -> Result<Leadership, Error> {
    let elector = Elector::new(Api::namespaced(client, namespace), name, me, timing)?;
    Ok(elector.lead_fencing(fence).await)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn record(holder: Option<&str>, renewed: &str) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed.parse::<Timestamp>().unwrap())),
            ..LeaseSpec::default()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_lease_is_taken_when_free_or_already_ours_whenever_it_changed() {
        let t0 = Instant::now();
        let just_now = |r| Observed { record: r, changed_at: t0 };
        assert!(may_take(&just_now(LeaseSpec::default()), "a", t0, LEASE), "no holder");
        assert!(may_take(&just_now(record(Some(""), "2025-01-01T00:00:00Z")), "a", t0, LEASE), "released");
        assert!(may_take(&just_now(record(Some("a"), "2025-01-01T00:00:00Z")), "a", t0, LEASE), "ours");
        assert!(!may_take(&just_now(record(Some("b"), "2025-01-01T00:00:00Z")), "a", t0, LEASE), "b's, just changed");
    }

    #[test]
    fn an_unchanged_lease_expires_after_its_duration_of_local_time() {
        let t0 = Instant::now();
        let mut seen = Observed::saw(None, record(Some("b"), "2025-01-01T00:00:00Z"), t0);
        // Read again and again, unchanged: it stays the record seen changing at t0.
        for s in 1..15 {
            seen = Observed::saw(Some(seen), record(Some("b"), "2025-01-01T00:00:00Z"), t0 + secs(s));
            assert_eq!(seen.changed_at, t0);
            assert!(!may_take(&seen, "a", t0 + secs(s), LEASE), "{s} s after the change");
        }
        assert!(!may_take(&seen, "a", t0 + secs(15) - Duration::from_millis(1), LEASE));
        assert!(may_take(&seen, "a", t0 + secs(15), LEASE), "unchanged for the lease's 15 s");
        // The record's own duration counts, and ours when it names none.
        let short = Observed { record: LeaseSpec { lease_duration_seconds: Some(3), ..seen.record.clone() }, ..seen };
        assert!(!expired(&short, t0 + secs(2), LEASE) && expired(&short, t0 + secs(3), LEASE));
        let unnamed = Observed { record: LeaseSpec { lease_duration_seconds: None, ..seen.record.clone() }, ..seen };
        assert!(!expired(&unnamed, t0 + secs(4), secs(5)) && expired(&unnamed, t0 + secs(5), secs(5)));
    }

    #[test]
    fn a_lease_that_keeps_changing_never_expires() {
        let t0 = Instant::now();
        let mut seen: Option<Observed> = None;
        // b renews every 2 s for ten minutes; its clock writes times in 1970.
        for n in 0..300u64 {
            let now = t0 + secs(2 * n);
            let renewed = Timestamp::from_second(i64::try_from(n).unwrap()).unwrap();
            let record =
                LeaseSpec { renew_time: Some(MicroTime(renewed)), ..record(Some("b"), "1970-01-01T00:00:00Z") };
            let observed = Observed::saw(seen.take(), record, now);
            assert_eq!(observed.changed_at, now, "a changed record is seen changing");
            assert!(!may_take(&observed, "a", now + secs(14), LEASE), "renewal #{n}");
            seen = Some(observed);
        }
    }

    #[test]
    fn the_holders_clock_does_not_decide_expiry() {
        let t0 = Instant::now();
        // Skewed far into the past: the written renewTime is decades old, but the record was
        // just seen changing, so the lease is live.
        let behind = Observed::saw(None, record(Some("b"), "1999-01-01T00:00:00Z"), t0);
        assert!(!may_take(&behind, "a", t0 + secs(1), LEASE));
        assert!(!may_take(&behind, "a", t0 + secs(14), LEASE));
        assert!(may_take(&behind, "a", t0 + secs(15), LEASE), "unchanged for 15 s of our time");
        // Skewed far into the future: the renewTime is decades ahead, yet a record that stops
        // changing expires after the lease's duration all the same.
        let ahead = Observed::saw(None, record(Some("b"), "2099-01-01T00:00:00Z"), t0);
        assert!(!may_take(&ahead, "a", t0 + secs(14), LEASE));
        assert!(may_take(&ahead, "a", t0 + secs(15), LEASE), "unchanged for 15 s of our time");
    }

    #[test]
    fn the_renew_deadline_is_shorter_than_the_lease() {
        let default = Timing::default();
        assert!(default.check().is_ok());
        assert_eq!(default.lease_seconds(), 15);
        assert_eq!(Timing { lease_duration: Duration::from_millis(1500), ..default }.lease_seconds(), 2);
        let bad = [
            Timing { renew_deadline: secs(15), ..default },
            Timing { retry_period: secs(10), ..default },
            Timing { retry_period: Duration::ZERO, ..default },
            Timing {
                lease_duration: Duration::from_millis(900),
                renew_deadline: Duration::from_millis(500),
                retry_period: Duration::from_millis(100),
            },
        ];
        for timing in bad {
            assert!(matches!(timing.check(), Err(Error::Timing(t)) if t == timing), "{timing:?}");
        }
    }

    /// A request made while the fence held, queued for its connection's task, and the fence
    /// closing before that task ran (a replica frozen in between, waking past its deadline):
    /// an unfenced connection writes the request when it runs; a fenced one closes unwritten.
    #[tokio::test]
    async fn a_request_queued_before_the_fence_closed_is_not_written_after() {
        type Executor = Box<dyn Fn(Fence) -> Option<FencedExecutor>>;
        let fenced: Executor = Box::new(|fence| Some(FencedExecutor(fence)));
        let unfenced: Executor = Box::new(|_| None);
        for (executor, written) in [(unfenced, vec!["GET /first", "PUT /second"]), (fenced, vec!["GET /first"])] {
            let (addr, seen) = recording_server().await;
            let fence = Fence::until(Instant::now() + secs(600));
            let builder = match executor(fence.clone()) {
                Some(fenced) => hyper_util::client::legacy::Client::builder(fenced),
                None => hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()),
            };
            let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
                builder.build_http();
            let request = |method: &str, path: &str| {
                http::Request::builder()
                    .method(method)
                    .uri(format!("http://{addr}{path}"))
                    .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
                    .unwrap()
            };
            client.request(request("GET", "/first")).await.unwrap();
            let mut put = Box::pin(client.request(request("PUT", "/second")));
            assert!(futures::poll!(&mut put).is_pending(), "queued for the connection's task");
            fence.set(Instant::now());
            let put = put.await;
            assert_eq!(put.is_ok(), written.len() == 2, "{put:?}");
            assert_eq!(*seen.lock().unwrap(), written);
        }
    }

    /// An HTTP/1 server on loopback that answers `{}` and records each request it receives.
    async fn recording_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = log.clone();
                let service = hyper::service::service_fn(move |r: http::Request<hyper::body::Incoming>| {
                    log.lock().unwrap().push(format!("{} {}", r.method(), r.uri().path()));
                    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"{}"));
                    std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(body)))
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
            }
        });
        (addr, seen)
    }

    #[test]
    fn the_fence_holds_until_its_deadline_and_always_without_an_election() {
        let t0 = Instant::now();
        let fence = Fence::until(t0 + secs(10));
        assert!(fence.holds_at(t0) && fence.holds_at(t0 + secs(9)));
        assert!(!fence.holds_at(t0 + secs(10)) && !fence.holds_at(t0 + secs(600)));
        // A renewal moves it; an ended leadership closes it at once.
        let renewing = fence.clone();
        renewing.set(t0 + secs(20));
        assert!(fence.holds_at(t0 + secs(15)));
        renewing.set(t0);
        assert!(!fence.holds_at(t0));
        assert!(Fence::always().holds_at(t0 + secs(1_000_000)));
    }
}
