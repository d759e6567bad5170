//! Leader election against a fake Lease API (a mock API server that keeps one Lease and
//! checks resourceVersions as the real one does), in tokio's paused time: every duration
//! below is read from the paused clock, never from the wall clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use stampede_operator::leader::{self, Leadership, Lost, Timing};
use tokio::time::Instant;
use tower_test::mock;

const NS: &str = "stampede-system";
const NAME: &str = "stampede-operator";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/stampede-system/leases";

/// A request the fake API server received, and when (by the paused clock).
#[derive(Debug, Clone)]
struct Call {
    at: Instant,
    method: Method,
    path: String,
    body: Value,
    /// Whether the server left it unanswered.
    hung: bool,
}

/// How the fake API server treats one request.
enum Reply {
    /// As a real API server would, from the stored Lease.
    Store,
    /// Never: the request hangs until the client gives up on it.
    Hang,
}

/// The one Lease the fake API server holds, and its last resourceVersion.
#[derive(Default)]
struct Store {
    lease: Option<Value>,
    version: u64,
}

impl Store {
    /// Stores `lease` as a new version of the object.
    fn put(&mut self, mut lease: Value) -> Value {
        self.version += 1;
        lease["metadata"]["name"] = json!(NAME);
        lease["metadata"]["namespace"] = json!(NS);
        lease["metadata"]["resourceVersion"] = json!(self.version.to_string());
        self.lease = Some(lease.clone());
        lease
    }

    fn answer(&mut self, call: &Call) -> (StatusCode, Value) {
        let status = |code: StatusCode, reason: &str| {
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "reason": reason, "code": code.as_u16()});
            (code, body)
        };
        let one = format!("{LEASES}/{NAME}");
        match (&call.method, call.path.as_str()) {
            (&Method::GET, p) if p == one => match &self.lease {
                Some(lease) => (StatusCode::OK, lease.clone()),
                None => status(StatusCode::NOT_FOUND, "NotFound"),
            },
            (&Method::POST, LEASES) if self.lease.is_some() => status(StatusCode::CONFLICT, "AlreadyExists"),
            (&Method::POST, LEASES) => (StatusCode::CREATED, self.put(call.body.clone())),
            (&Method::PUT, p) if p == one => {
                let Some(stored) = &self.lease else { return status(StatusCode::NOT_FOUND, "NotFound") };
                if stored["metadata"]["resourceVersion"] != call.body["metadata"]["resourceVersion"] {
                    return status(StatusCode::CONFLICT, "Conflict");
                }
                (StatusCode::OK, self.put(call.body.clone()))
            }
            _ => panic!("unexpected request {} {}", call.method, call.path),
        }
    }
}

/// What the fake API server saw and holds.
#[derive(Clone, Default)]
struct Fake {
    calls: Arc<Mutex<Vec<Call>>>,
    store: Arc<Mutex<Store>>,
}

impl Fake {
    /// A client of a fake API server that asks `rule` how to treat each request (it may
    /// change the stored Lease first, as another replica would).
    fn client(&self, mut rule: impl FnMut(&Call, &mut Store) -> Reply + Send + 'static) -> Client {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        tokio::spawn(async move {
            let mut hung = Vec::new();
            while let Some((request, send)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let bytes = body.collect().await.expect("request body").to_bytes();
                let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
                let mut call = Call {
                    at: Instant::now(),
                    method: parts.method,
                    path: parts.uri.path().to_string(),
                    body,
                    hung: false,
                };
                let mut store = fake.store.lock().unwrap();
                let reply = rule(&call, &mut store);
                call.hung = matches!(reply, Reply::Hang);
                fake.calls.lock().unwrap().push(call.clone());
                match reply {
                    Reply::Hang => hung.push(send),
                    Reply::Store => {
                        let (status, answer) = store.answer(&call);
                        let response = Response::builder()
                            .status(status)
                            .header(http::header::CONTENT_TYPE, "application/json")
                            .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                            .unwrap();
                        send.send_response(response);
                    }
                }
            }
        });
        Client::new(service, NS)
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The writes (creates and replaces) the server received and answered.
    fn writes(&self) -> Vec<Call> {
        self.calls().into_iter().filter(|c| !c.hung && (c.method == Method::POST || c.method == Method::PUT)).collect()
    }
}

const LEASE_DURATION: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY_PERIOD: Duration = Duration::from_secs(2);

async fn lead(client: Client, me: &str) -> Leadership {
    let timing = Timing::default();
    assert_eq!(
        (timing.lease_duration, timing.renew_deadline, timing.retry_period),
        (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
    );
    leader::lead(client, NS, NAME, me, timing).await.unwrap()
}

/// A Lease held by `holder`, written with `renewed` as its renewTime.
fn held_by(holder: &str, renewed: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 3,
                    "acquireTime": renewed, "renewTime": renewed}})
}

#[tokio::test(start_paused = true)]
async fn a_hung_renewal_steps_the_leader_down_within_the_renew_deadline() {
    for hang_at in [Method::GET, Method::PUT] {
        let fake = Fake::default();
        // The lease is created, renewed twice, then the API server stops answering the
        // renewal's `hang_at` request.
        let mut renewals = 0;
        let client = fake.client(move |call, _| {
            if renewals >= 2 && call.method == hang_at {
                return Reply::Hang;
            }
            renewals += usize::from(call.method == Method::PUT);
            Reply::Store
        });
        let leadership = lead(client, "replica-a").await;
        let stepped_down = tokio::time::timeout(Duration::from_secs(600), leadership).await;
        let at = Instant::now();
        let writes = fake.writes();
        assert_eq!(writes.len(), 3, "a create and two renewals: {writes:?}");
        let renewed = writes.last().unwrap().at;
        let Ok(lost) = stepped_down else {
            panic!("the leader still leads {:?} after its last renewal", at - renewed);
        };
        assert!(matches!(lost, Lost::Deadline(d) if d == RENEW_DEADLINE), "{lost}");
        assert!(
            at - renewed <= RENEW_DEADLINE && RENEW_DEADLINE < LEASE_DURATION,
            "stepped down {:?} after the last renewal",
            at - renewed
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_steps_down_before_another_replica_takes_the_lease() {
    let fake = Fake::default();
    // a's requests hang after its second renewal; b reaches the API server all along.
    let mut renewals = 0;
    let a = fake.client(move |call, _| {
        if renewals >= 2 {
            return Reply::Hang;
        }
        renewals += usize::from(call.method == Method::PUT);
        Reply::Store
    });
    let b = fake.client(|_, _| Reply::Store);
    let leadership = lead(a, "replica-a").await;
    let candidate = tokio::spawn(async move {
        let leadership = lead(b, "replica-b").await;
        (Instant::now(), leadership)
    });
    let lost = tokio::time::timeout(Duration::from_secs(600), leadership).await.expect("a steps down");
    let a_stopped = Instant::now();
    assert!(matches!(lost, Lost::Deadline(_)), "{lost}");
    let (b_leads, _b) = tokio::time::timeout(Duration::from_secs(600), candidate).await.expect("b leads").unwrap();
    assert!(a_stopped < b_leads, "a led until {a_stopped:?}, b from {b_leads:?}");
    let took = fake.writes().into_iter().find(|w| w.body["spec"]["holderIdentity"] == "replica-b").unwrap();
    let a_renewed = fake.writes().iter().rfind(|w| w.body["spec"]["holderIdentity"] == "replica-a").unwrap().at;
    assert!(took.at - a_renewed >= LEASE_DURATION, "b took the lease {:?} after a's last renewal", took.at - a_renewed);
    assert_eq!(took.body["spec"]["leaseTransitions"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_live_lease_is_not_taken_however_skewed_its_holders_clock() {
    for renewed in ["1999-01-01T00:00:00.000000Z", "2099-01-01T00:00:00.000000Z"] {
        let fake = Fake::default();
        fake.store.lock().unwrap().put(held_by("replica-b", renewed));
        // b renews between any two reads: its record changes each time, though the time it
        // writes (by its own clock) is decades away from ours.
        let client = fake.client(|call, store| {
            if call.method == Method::GET {
                let mut lease = store.lease.clone().unwrap();
                let n = lease["spec"]["leaseTransitions"].as_i64().unwrap();
                lease["spec"]["renewTime"] = json!(format!("{}.{:06}Z", &renewed[..19], n));
                lease["spec"]["leaseTransitions"] = json!(n + 1);
                store.put(lease);
            }
            Reply::Store
        });
        let candidate = tokio::time::timeout(Duration::from_secs(600), lead(client, "replica-a")).await;
        assert!(candidate.is_err(), "took b's live lease (renewTime {renewed})");
        let calls = fake.calls();
        assert_eq!(fake.writes().len(), 0, "{:?}", fake.writes());
        assert!(calls.len() >= 300, "read the lease every {RETRY_PERIOD:?} for ten minutes: {}", calls.len());
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_holders_lease_is_taken_after_the_lease_duration_of_local_time() {
    // The holder's clock was far ahead (or behind) when it last renewed; it renews no more.
    for renewed in ["2099-01-01T00:00:00.000000Z", "1999-01-01T00:00:00.000000Z"] {
        let fake = Fake::default();
        fake.store.lock().unwrap().put(held_by("replica-b", renewed));
        let client = fake.client(|_, _| Reply::Store);
        let started = Instant::now();
        let _leadership = lead(client, "replica-a").await;
        let writes = fake.writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        let took = &writes[0];
        let waited = took.at - started;
        assert!(
            waited >= LEASE_DURATION && waited < LEASE_DURATION + RETRY_PERIOD,
            "took the lease {waited:?} after first seeing it (renewTime {renewed})"
        );
        assert_eq!(took.method, Method::PUT);
        assert_eq!(took.body["metadata"]["resourceVersion"], "1");
        assert_eq!(took.body["spec"]["holderIdentity"], "replica-a");
        assert_eq!(took.body["spec"]["leaseTransitions"], 4);
        assert_eq!(took.body["spec"]["leaseDurationSeconds"], 15);
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_steps_down_at_once_when_another_replica_holds_the_lease() {
    let fake = Fake::default();
    // After the lease is created, another replica writes itself in (as after a partition).
    let client = fake.client(|call, store| {
        if call.method == Method::GET && store.lease.is_some() {
            store.put(held_by("replica-b", "2025-01-01T00:00:00.000000Z"));
        }
        Reply::Store
    });
    let leadership = lead(client, "replica-a").await;
    let led = Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(600), leadership).await.expect("a steps down");
    assert!(matches!(&lost, Lost::Taken { holder } if holder == "replica-b"), "{lost}");
    assert_eq!(Instant::now() - led, RETRY_PERIOD, "at the first renewal");
    assert_eq!(fake.writes().len(), 1, "the create only");
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let fake = Fake::default();
    let a = fake.client(|_, _| Reply::Store);
    let b = fake.client(|_, _| Reply::Store);
    let mut leadership = lead(a, "replica-a").await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(leadership.release().await.unwrap(), "a held the lease");
    let released = fake.writes().last().unwrap().clone();
    assert_eq!(released.method, Method::PUT);
    assert_eq!(released.body["spec"].get("holderIdentity"), None, "{released:?}");
    assert!(!leadership.release().await.unwrap(), "released already");
    let released_at = Instant::now();
    let _b = lead(b, "replica-b").await;
    assert_eq!(Instant::now(), released_at, "b took the free lease at its first try");
    let took = fake.writes().last().unwrap().clone();
    assert_eq!(took.body["spec"]["holderIdentity"], "replica-b");
    assert_eq!(took.body["spec"]["leaseTransitions"], 1);
}

/// #22: the controllers' client refuses a write at the moment it would be sent once the fence
/// no longer holds (a replica that froze after its reconcile's check sends nothing on waking);
/// reads still go out.
#[tokio::test]
async fn the_fenced_client_sends_no_write_once_the_fence_is_closed() {
    use tower::Layer;
    for (open, sent) in [(true, vec!["PUT /x", "GET /y"]), (false, vec!["GET /y"])] {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let until = if open { Instant::now() + Duration::from_secs(600) } else { Instant::now() };
        let client = Client::new(leader::FenceLayer(leader::Fence::until(until)).layer(service), NS);
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((request, send)) = handle.next_request().await {
                seen.push(format!("{} {}", request.method(), request.uri().path()));
                send.send_response(
                    Response::builder().status(StatusCode::OK).body(Body::from(b"ok".to_vec())).unwrap(),
                );
            }
            seen
        });
        let put = client.request_text(Request::put("/x").body(b"{}".to_vec()).unwrap()).await;
        let get = client.request_text(Request::get("/y").body(Vec::new()).unwrap()).await;
        assert_eq!(get.unwrap(), "ok");
        match (open, put) {
            (true, Ok(text)) => assert_eq!(text, "ok"),
            (false, Err(e)) => assert!(e.to_string().contains("not leading"), "{e}"),
            (_, other) => panic!("fence open: {open}: {other:?}"),
        }
        drop(client);
        assert_eq!(server.await.unwrap(), sent, "what reached the API server");
    }
}

/// #36: the operator's clients count every request they send, by Kubernetes verb and resource
/// (`stampede_operator_api_requests_total`), as the API server sees them.
#[tokio::test]
async fn the_operators_client_counts_each_request_by_verb_and_resource() {
    use tower::Layer;
    let metrics = stampede_operator::metrics::Metrics::default();
    let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let layer = stampede_operator::api_count::CountLayer(metrics.api_requests.clone());
    let client = Client::new(layer.layer(service), NS);
    let server = tokio::spawn(async move {
        while let Some((_, send)) = handle.next_request().await {
            send.send_response(Response::builder().status(StatusCode::OK).body(Body::from(b"{}".to_vec())).unwrap());
        }
    });
    let requests = [
        Request::get("/api/v1/namespaces/a/configmaps?labelSelector=x").body(Vec::new()).unwrap(),
        Request::get("/api/v1/namespaces/a/configmaps/one").body(Vec::new()).unwrap(),
        Request::get("/api/v1/namespaces/a/configmaps/two").body(Vec::new()).unwrap(),
        Request::patch("/apis/stampede.dev/v1alpha1/namespaces/a/loadtests/t/status").body(b"{}".to_vec()).unwrap(),
    ];
    for r in requests {
        client.request_text(r).await.unwrap();
    }
    drop(client);
    server.await.unwrap();
    let count = |verb: &str, resource: &str| metrics.api_requests.with_label_values(&[verb, resource]).get();
    assert_eq!(count("list", "configmaps"), 1);
    assert_eq!(count("get", "configmaps"), 2);
    assert_eq!(count("patch", "loadtests/status"), 1);
    assert_eq!(count("watch", "configmaps"), 0);
    assert!(metrics.render().contains(r#"stampede_operator_api_requests_total{resource="configmaps",verb="get"} 2"#));
}
