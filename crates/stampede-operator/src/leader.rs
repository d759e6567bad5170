//! Leader election on a `coordination.k8s.io/v1` Lease, so that two operator replicas never
//! reconcile at once. Updates use the Lease's resourceVersion (optimistic concurrency): of
//! two replicas racing for an expired lease, exactly one write succeeds.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// How long a lease is valid without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the leader renews.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

/// Whether `holder` may take a lease held by `current` (renewed at `renewed`, valid for `ttl`).
pub fn can_take(current: Option<&str>, me: &str, renewed: Option<i128>, ttl_secs: i32, now_nanos: i128) -> bool {
    match current {
        None | Some("") => true,
        Some(h) if h == me => true,
        Some(_) => renewed.is_none_or(|r| now_nanos - r > i128::from(ttl_secs.max(1)) * 1_000_000_000),
    }
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// Tries once to take or renew the lease; returns whether this replica leads.
pub async fn try_acquire(api: &Api<Lease>, name: &str, me: &str) -> Result<bool, kube::Error> {
    let spec = |transitions: i32, acquire: Option<MicroTime>| LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
        renew_time: Some(MicroTime(now())),
        acquire_time: acquire,
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    match api.get_opt(name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
                spec: Some(spec(0, Some(MicroTime(now())))),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(mut lease) => {
            let current = lease.spec.clone().unwrap_or_default();
            let holder = current.holder_identity.as_deref();
            let renewed = current.renew_time.as_ref().map(|t| t.0.as_nanosecond());
            let ttl = current.lease_duration_seconds.unwrap_or(LEASE_DURATION.as_secs() as i32);
            if !can_take(holder, me, renewed, ttl, now().as_nanosecond()) {
                return Ok(false);
            }
            let transitions = current.lease_transitions.unwrap_or(0) + i32::from(holder != Some(me));
            let acquire = if holder == Some(me) { current.acquire_time.clone() } else { Some(MicroTime(now())) };
            lease.spec = Some(spec(transitions, acquire));
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Waits until this replica leads, then keeps renewing in the background. The returned
/// future resolves if leadership is lost (the caller should exit so it restarts clean).
pub async fn lead(
    client: Client,
    namespace: &str,
    name: &str,
    me: &str,
) -> impl std::future::Future<Output = ()> + use<> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    loop {
        match try_acquire(&api, name, me).await {
            Ok(true) => break,
            Ok(false) => tracing::info!("another replica leads; waiting"),
            Err(e) => tracing::warn!("leader election: {e}"),
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
    tracing::info!(identity = me, "leading");
    let (name, me) = (name.to_string(), me.to_string());
    async move {
        let mut failures = 0;
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            match try_acquire(&api, &name, &me).await {
                Ok(true) => failures = 0,
                Ok(false) => {
                    tracing::error!("lost the lease to another replica");
                    return;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!("cannot renew the lease: {e}");
                    if failures * RENEW_EVERY.as_secs() >= LEASE_DURATION.as_secs() {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_taken_when_free_expired_or_already_ours() {
        let s = 1_000_000_000i128;
        assert!(can_take(None, "a", None, 15, 100 * s));
        assert!(can_take(Some("a"), "a", Some(99 * s), 15, 100 * s));
        assert!(!can_take(Some("b"), "a", Some(90 * s), 15, 100 * s), "b renewed 10 s ago");
        assert!(can_take(Some("b"), "a", Some(80 * s), 15, 100 * s), "b's lease expired");
    }
}
