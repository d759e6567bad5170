//! The operator's dashboard API: what a user may see and change of LoadTests, as the API
//! server decides it.
//!
//! Every request carries the user's own bearer token (`Authorization: Bearer …`: a
//! ServiceAccount token from `kubectl create token`, or the user's OIDC token). The operator
//! makes each read and write of a request **as that user**: with a client that has the user's
//! token and none of the operator's own credentials. So the API server authenticates and
//! authorizes every one, and its audit log names the user:
//! - a user sees only the LoadTests they may `list` or `get`, and follows one (server-sent
//!   events) from their own `watch` (or, without it, their `get` every second);
//! - a user changes a run's load (`spec.live`) only where they may `patch` the LoadTest.
//!
//! A request without a token gets 401 and reaches nothing; only the page itself (`/`), which holds
//! no data, is served without one. The operator's own client reads one
//! thing only: a LoadTest's report ConfigMap, after the user's `get` of that LoadTest succeeded.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use stampede_api::{LoadTest, LoadTestSchedule, REPORT_KEY, names};
use stampede_model::report::Report;
use stampede_serve::{Body, full};

/// The most bytes a change's body may have.
pub const CHANGE_BODY_BYTES: usize = 4096;
/// The most users' clients kept at once (the oldest goes first).
pub const USER_CLIENTS: usize = 64;
/// Pages that may follow a LoadTest at once (over every user); one more is answered 503.
pub const STREAMS: usize = 64;
/// How often a stream whose user may not `watch` asks for the LoadTest again (with `get`), and
/// how long an idle stream waits before it sends a comment (a page that went is noticed then).
pub const STREAM_POLL: std::time::Duration = std::time::Duration::from_secs(1);
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a user's client is kept: a page asks every second, and a client per request would be
/// a new TLS connection to the API server each time. (It caches a connection, never a decision:
/// the API server authorizes every request.)
pub const USER_CLIENT_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// The dashboard API: the API server to reach (address and CA, without credentials), the
/// operator's own client (for reports), and the namespaces it knows LoadTests in.
#[derive(Clone)]
pub struct DashboardApi {
    base: kube::Config,
    operator: Client,
    namespaces: Arc<dyn Fn() -> BTreeSet<String> + Send + Sync>,
    /// Users' clients by token, with when each was made, oldest first.
    clients: Arc<std::sync::Mutex<Vec<(String, Client, std::time::Instant)>>>,
    /// Pages following a LoadTest now.
    streams: Arc<std::sync::atomic::AtomicUsize>,
}

/// Why a request got no answer from the API server: its status and message.
#[derive(Debug)]
struct Refused(StatusCode, String);

impl From<kube::Error> for Refused {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => {
                Refused(StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY), s.message.clone())
            }
            other => Refused(StatusCode::BAD_GATEWAY, format!("the API server: {other}")),
        }
    }
}

impl DashboardApi {
    /// Answers for the API server of `base` (its credentials are never used for a user's
    /// request); `operator` reads reports; `namespaces` says where LoadTests are (the
    /// operator's caches).
    pub fn new(
        base: kube::Config,
        operator: Client,
        namespaces: impl Fn() -> BTreeSet<String> + Send + Sync + 'static,
    ) -> Self {
        DashboardApi {
            base,
            operator,
            namespaces: Arc::new(namespaces),
            clients: Arc::default(),
            streams: Arc::default(),
        }
    }

    /// A client that acts as the user whose bearer token is `token`, and as nobody else: the one
    /// made for this token in the last [`USER_CLIENT_TTL`], or a new one (at most
    /// [`USER_CLIENTS`] are kept).
    fn as_user(&self, token: &str) -> Result<Client, Refused> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain(|(_, _, made)| made.elapsed() < USER_CLIENT_TTL);
        if let Some((_, client, _)) = clients.iter().find(|(t, ..)| t == token) {
            return Ok(client.clone());
        }
        let client = self.new_user_client(token)?;
        if clients.len() >= USER_CLIENTS {
            clients.remove(0);
        }
        clients.push((token.to_string(), client.clone(), std::time::Instant::now()));
        Ok(client)
    }

    /// A new client with `token` as its only credentials.
    fn new_user_client(&self, token: &str) -> Result<Client, Refused> {
        let mut config = self.base.clone();
        config.auth_info = kube::config::AuthInfo::default();
        let mut value = header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Refused(StatusCode::UNAUTHORIZED, "the bearer token is not a header value".into()))?;
        value.set_sensitive(true);
        config.headers = vec![(header::AUTHORIZATION, value)];
        Client::try_from(config)
            .map_err(|e| Refused(StatusCode::BAD_GATEWAY, format!("cannot reach the API server: {e}")))
    }

    /// Answers one request.
    pub async fn respond(&self, req: http::Request<Incoming>) -> Response<Body> {
        match self.route(req).await {
            Ok(response) => response,
            Err(Refused(status, message)) => json_answer(status, &json!({ "error": message })),
        }
    }

    async fn route(&self, req: http::Request<Incoming>) -> Result<Response<Body>, Refused> {
        if req.method() == Method::GET && req.uri().path() == "/" {
            return Ok(page());
        }
        let Some(token) = bearer(&req) else {
            return Err(Refused(
                StatusCode::UNAUTHORIZED,
                "give your Kubernetes token: Authorization: Bearer …".into(),
            ));
        };
        let user = self.as_user(&token)?;
        let path: Vec<String> = req.uri().path().trim_matches('/').split('/').map(str::to_string).collect();
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        match (req.method().clone(), parts.as_slice()) {
            (Method::GET, ["api", "loadtests"]) => Ok(json_answer(StatusCode::OK, &self.list(&user).await?)),
            (Method::GET, ["api", "loadtests", ns, name]) => {
                let lt = Api::<LoadTest>::namespaced(user, ns).get(name).await?;
                Ok(json_answer(StatusCode::OK, &entry(&lt)))
            }
            (Method::GET, ["api", "loadtests", ns, name, "events"]) => self.events(user, ns, name).await,
            (Method::GET, ["api", "loadtests", ns, name, "report.html"]) => self.report(user, ns, name).await,
            (Method::POST, ["api", "loadtests", ns, name, "live"]) => {
                let body = read_body(req.into_body()).await?;
                let asked: stampede_core::output::live::ChangeRequest = serde_json::from_slice(&body)
                    .map_err(|e| Refused(StatusCode::BAD_REQUEST, format!("not a change of spec.live: {e}")))?;
                let live = stampede_api::LiveSpec { vus: asked.vus, rate: asked.rate, paused: asked.paused };
                let patch = json!({ "spec": { "live": live } });
                let lt = Api::<LoadTest>::namespaced(user, ns)
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                tracing::info!(namespace = %ns, loadtest = %name, ?live, "spec.live patched from the dashboard");
                Ok(json_answer(StatusCode::ACCEPTED, &json!({ "live": lt.spec.live })))
            }
            _ => Err(Refused(StatusCode::NOT_FOUND, "no such page".into())),
        }
    }

    /// The LoadTests and LoadTestSchedules of every namespace the user may list them in (those
    /// they may not are left out, not errors).
    async fn list(&self, user: &Client) -> Result<serde_json::Value, Refused> {
        let (mut items, mut schedules) = (Vec::new(), Vec::new());
        for ns in (self.namespaces)() {
            if let Some(list) = listed(Api::<LoadTest>::namespaced(user.clone(), &ns)).await? {
                items.extend(list.iter().map(entry));
            }
            if let Some(list) = listed(Api::<LoadTestSchedule>::namespaced(user.clone(), &ns)).await? {
                schedules.extend(list.iter().map(schedule_entry));
            }
        }
        Ok(json!({ "items": items, "schedules": schedules }))
    }

    /// The LoadTest as server-sent events, as the user sees it: the first after the user's `get`,
    /// then one for each change the API server reports on the user's own watch (or, where the
    /// user may not `watch`, their `get` every [`STREAM_POLL`]), until the page goes or the
    /// LoadTest is deleted (event `deleted`).
    async fn events(&self, user: Client, ns: &str, name: &str) -> Result<Response<Body>, Refused> {
        let api = Api::<LoadTest>::namespaced(user, ns);
        let first = api.get(name).await?;
        let streams = self.streams.clone();
        if streams.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= STREAMS {
            streams.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Refused(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("too many pages follow LoadTests (at most {STREAMS})"),
            ));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
        let name = name.to_string();
        tokio::spawn(async move {
            follow(api, &name, first, &tx).await;
            streams.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        });
        let mut response = Response::new(stampede_serve::streamed(rx));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
        Ok(response)
    }

    /// After the user's `get` of the LoadTest, its last finished run's HTML report, with the
    /// trend of the LoadTest's runs and its `spec.baseline` beside it when this user may read
    /// that baseline.
    async fn report(&self, user: Client, ns: &str, name: &str) -> Result<Response<Body>, Refused> {
        let lt = Api::<LoadTest>::namespaced(user.clone(), ns).get(name).await?;
        let cms: Api<ConfigMap> = Api::namespaced(self.operator.clone(), ns);
        let cm_name = names::report_config_map(name);
        let text = cms.get_opt(&cm_name).await?.and_then(|cm| cm.data).and_then(|mut d| d.remove(REPORT_KEY));
        let Some(text) = text else {
            return Err(Refused(StatusCode::NOT_FOUND, format!("{ns}/{name} has no report yet")));
        };
        let mut report: Report = serde_json::from_str(&text).map_err(|e| {
            Refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{cm_name} holds no report: {}", crate::controller::json_problem(&e)),
            )
        })?;
        report.trend = lt.status.as_ref().map(stampede_api::LoadTestStatus::trend).unwrap_or_default();
        let baseline = match &lt.spec.baseline {
            Some(b) => self.baseline(user, ns, b).await,
            None => None,
        };
        let mut response = Response::new(full(stampede_core::render_html(&report, baseline.as_ref())));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/html; charset=utf-8"));
        Ok(response)
    }

    /// `spec.baseline`'s report, read as far as the user may: a baseline LoadTest's report when
    /// they may get that LoadTest (its report goes with it, as their own LoadTest's does), a
    /// ConfigMap's key only with their own client. None when it cannot be had: the report is
    /// then served without it.
    async fn baseline(&self, user: Client, ns: &str, baseline: &stampede_api::Baseline) -> Option<Report> {
        let reader = match &baseline.load_test {
            Some(name) => {
                Api::<LoadTest>::namespaced(user, ns).get(name).await.ok()?;
                self.operator.clone()
            }
            None => user,
        };
        match crate::controller::read_baseline(&reader, ns, baseline).await {
            Ok(Ok(report)) => Some(report),
            Ok(Err(why)) => {
                tracing::debug!(%ns, baseline = %baseline.describe(), why = %why.0, "report served without its baseline");
                None
            }
            Err(e) => {
                tracing::debug!(%ns, baseline = %baseline.describe(), error = %e, "report served without its baseline");
                None
            }
        }
    }
}

/// The dashboard's page: the LoadTests the user may see, one run's figures every second, its
/// controls and its report. Self-contained (the cluster may have no internet); it asks for the
/// user's token and keeps it for the browser tab only (session storage).
pub const PAGE: &str = include_str!("dashboard/page.html");

/// The page, which anyone may load: it holds no data, and asks for the token.
fn page() -> Response<Body> {
    let mut response = Response::new(full(PAGE));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/html; charset=utf-8"));
    let csp =
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:";
    headers.insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static(csp));
    response
}

/// What the dashboard shows of a LoadTest in a list: where it is, and its status.
fn entry(lt: &LoadTest) -> serde_json::Value {
    json!({
        "namespace": lt.namespace().unwrap_or_default(),
        "name": lt.name_any(),
        "runners": lt.spec.runners,
        "live": lt.spec.live,
        "status": lt.status,
    })
}

/// One server-sent event of `lt`.
fn event_of(lt: &LoadTest) -> Bytes {
    Bytes::from(format!("data: {}\n\n", entry(lt)))
}

/// Sends `first`, then the LoadTest each time it changes, until the page goes (`tx` closed) or the
/// LoadTest is gone.
async fn follow(api: Api<LoadTest>, name: &str, first: LoadTest, tx: &tokio::sync::mpsc::Sender<Bytes>) {
    use futures::StreamExt as _;
    use kube::api::{WatchEvent, WatchParams};
    let mut version = first.resource_version().unwrap_or_default();
    if tx.send(event_of(&first)).await.is_err() {
        return;
    }
    let params = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(290);
    loop {
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(kube::Error::Api(e)) if e.code == 403 => return poll(&api, name, version, tx).await,
            Err(kube::Error::Api(e)) if e.code == 401 => return refused(tx, &e.message).await,
            Err(e) => {
                tracing::debug!(error = %e, loadtest = %name, "dashboard: the watch failed; again in a second");
                if pause_or_gone(tx).await {
                    return;
                }
                continue;
            }
        };
        futures::pin_mut!(stream);
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = tx.closed() => return,
                () = tokio::time::sleep(KEEPALIVE) => {
                    if tx.send(Bytes::from_static(b": still here\n\n")).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            match next {
                Some(Ok(WatchEvent::Added(lt) | WatchEvent::Modified(lt))) => {
                    version = lt.resource_version().unwrap_or(version);
                    if tx.send(event_of(&lt)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(WatchEvent::Deleted(_))) => {
                    let _ = tx.send(Bytes::from_static(b"event: deleted\ndata: {}\n\n")).await;
                    return;
                }
                Some(Ok(WatchEvent::Bookmark(b))) => version = b.metadata.resource_version,
                // Too old a version (410) or another error: read it again, then watch from there,
                // a second later (a watch that keeps failing is not asked again at once).
                Some(Ok(WatchEvent::Error(_)) | Err(_)) => {
                    match api.get_opt(name).await {
                        Ok(Some(lt)) => {
                            version = lt.resource_version().unwrap_or_default();
                            if tx.send(event_of(&lt)).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => {
                            let _ = tx.send(Bytes::from_static(b"event: deleted\ndata: {}\n\n")).await;
                            return;
                        }
                        Err(_) => {}
                    }
                    if pause_or_gone(tx).await {
                        return;
                    }
                    break;
                }
                // The watch's time is up: watch again from the last version.
                None => break,
            }
        }
    }
}

/// For a user who may `get` but not `watch`: the LoadTest every [`STREAM_POLL`], sent when its
/// version moved.
async fn poll(api: &Api<LoadTest>, name: &str, mut version: String, tx: &tokio::sync::mpsc::Sender<Bytes>) {
    loop {
        if pause_or_gone(tx).await {
            return;
        }
        match api.get_opt(name).await {
            Ok(Some(lt)) if lt.resource_version().as_deref() != Some(version.as_str()) => {
                version = lt.resource_version().unwrap_or_default();
                if tx.send(event_of(&lt)).await.is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                let _ = tx.send(Bytes::from_static(b"event: deleted\ndata: {}\n\n")).await;
                return;
            }
            // Refused now (the user lost `get`, the token expired).
            Err(kube::Error::Api(e)) if e.code == 401 || e.code == 403 => return refused(tx, &e.message).await,
            Err(_) => {}
        }
    }
}

/// Tells the page the API server refused the user now (the token expired, a permission was
/// taken away); the page stops following.
async fn refused(tx: &tokio::sync::mpsc::Sender<Bytes>, message: &str) {
    let _ = tx.send(Bytes::from(format!("event: refused\ndata: {}\n\n", json!({ "error": message })))).await;
}

/// Waits [`STREAM_POLL`]; true if the page went meanwhile.
async fn pause_or_gone(tx: &tokio::sync::mpsc::Sender<Bytes>) -> bool {
    tokio::select! {
        () = tx.closed() => true,
        () = tokio::time::sleep(STREAM_POLL) => false,
    }
}

/// The objects `api` lists as the user: `None` where the user may not (403) or the kind is not
/// installed (404).
async fn listed<K>(api: Api<K>) -> Result<Option<Vec<K>>, Refused>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(e)) if e.code == 403 || e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// What the dashboard shows of a schedule in a list: where it is, when it runs, and its runs.
fn schedule_entry(s: &LoadTestSchedule) -> serde_json::Value {
    json!({
        "namespace": s.namespace().unwrap_or_default(),
        "name": s.name_any(),
        "schedule": s.spec.schedule,
        "timeZone": s.spec.time_zone,
        "suspend": s.spec.suspend,
        "status": s.status,
    })
}

/// The request's bearer token.
fn bearer(req: &http::Request<Incoming>) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// A request body of at most [`CHANGE_BODY_BYTES`].
async fn read_body(body: Incoming) -> Result<Bytes, Refused> {
    match http_body_util::Limited::new(body, CHANGE_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(Refused(StatusCode::PAYLOAD_TOO_LARGE, format!("a change is at most {CHANGE_BODY_BYTES} bytes"))),
    }
}

fn json_answer(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(full(value.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}

/// Serves the dashboard API on `listener` until `stop` resolves.
pub async fn serve(listener: tokio::net::TcpListener, api: DashboardApi, stop: impl std::future::Future<Output = ()>) {
    let api = Arc::new(api);
    stampede_serve::serve(
        listener,
        move |req| {
            let api = api.clone();
            async move { api.respond(req).await }
        },
        stop,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_users_client_is_made_once_per_token_and_at_most_so_many_are_kept() {
        let base = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let operator = Client::try_from(base.clone()).unwrap();
        let api = DashboardApi::new(base, operator, BTreeSet::new);
        for i in 0..USER_CLIENTS + 6 {
            api.as_user(&format!("token-{i}")).unwrap();
            api.as_user(&format!("token-{i}")).unwrap();
        }
        let kept: Vec<String> = api.clients.lock().unwrap().iter().map(|(t, ..)| t.clone()).collect();
        assert_eq!(kept.len(), USER_CLIENTS, "one per token, at most USER_CLIENTS");
        assert_eq!(kept[0], "token-6", "the oldest went first");
        assert!(api.as_user("not a header value\n").is_err());
    }
}
