//! The live dashboard of a local run (`stampede run --dashboard ADDR`): the core's page and
//! frames ([`stampede_core::output::live`]) served over HTTP with server-sent events, and the
//! run's controls.
//!
//! Every route but the page itself asks for the token the server was started with (`?token=`,
//! printed with the address): the controls change a run's load, so whoever can reach the
//! address must also have been given the link.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use stampede_model::report::{LoadChange, Report, TimelinePoint};
use stampede_serve::{Body, full, streamed};
use tokio::sync::broadcast;

use crate::compile::plan::Plan;
use crate::output::live::{self, ChangeRequest, ControlState, LiveFrame};
use crate::run::executor::{LiveControl, Tick};

/// The most bytes a control request's body may have.
pub(crate) const CONTROL_BODY_BYTES: usize = 4096;
/// Frames a slow page may fall behind before it is sent a whole snapshot again.
const FRAMES_BEHIND: usize = 64;
/// Pages that may follow the run at once; one more is answered 503.
pub const PAGES: usize = 32;

/// What the page shows: the run's frames as they come, and its report at the end.
pub struct Dashboard {
    plan: Arc<Plan>,
    control: Arc<LiveControl>,
    token: String,
    board: Mutex<Board>,
    frames: broadcast::Sender<Bytes>,
    /// Pages following the run now.
    pages: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Board {
    history: Vec<TimelinePoint>,
    frame: LiveFrame,
    report_html: Option<String>,
}

impl Dashboard {
    /// A dashboard of a run of `plan` that takes its changes through `control`; a new random
    /// token guards it.
    pub fn new(plan: Arc<Plan>, control: Arc<LiveControl>) -> Arc<Dashboard> {
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system's random source");
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let (frames, _) = broadcast::channel(FRAMES_BEHIND);
        let frame = LiveFrame { name: plan.name.clone(), executor: plan.executor_name(), ..LiveFrame::default() };
        let dashboard =
            Dashboard { plan, control, token, board: Mutex::new(Board::default()), frames, pages: Default::default() };
        dashboard.board().frame = LiveFrame { control: dashboard.control_state(), ..frame };
        Arc::new(dashboard)
    }

    /// The token every route but the page asks for.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Shows `tick` (a tick of a run asked for its totals).
    pub fn tick(&self, tick: &Tick) {
        let frame = live::tick_frame(&self.plan, tick, self.control_state());
        let mut board = self.board();
        if let Some(point) = &frame.point {
            board.history.push(point.clone());
            live::thin(&mut board.history, live::HISTORY_POINTS);
        }
        board.frame = frame;
        let _ = self.frames.send(event("frame", &board.frame));
    }

    /// Shows the run's end: its report's figures, and the report as `html` for the page to keep.
    pub fn ended(&self, report: &Report, html: String) {
        let mut board = self.board();
        board.frame = live::final_frame(report, self.control_state());
        board.report_html = Some(html);
        let _ = self.frames.send(event("frame", &board.frame));
    }

    /// Checks and takes a change asked for with `body` (JSON, a [`ChangeRequest`]).
    pub fn change(&self, body: &[u8]) -> Result<LoadChange, (StatusCode, String)> {
        let request: ChangeRequest =
            serde_json::from_slice(body).map_err(|e| (StatusCode::BAD_REQUEST, format!("not a change: {e}")))?;
        let ended = self.board().frame.ended;
        let change = live::check_change(&self.plan, &request, ended).map_err(|e| (StatusCode::CONFLICT, e))?;
        let taken = self.control.apply(&change);
        tracing::info!(?taken, "load changed from the dashboard");
        // Shown at once, not at the next interval (a frame without a point adds none).
        let mut board = self.board();
        board.frame.control = self.control_state();
        let update = LiveFrame { point: None, ..board.frame.clone() };
        let _ = self.frames.send(event("frame", &update));
        Ok(taken)
    }

    fn control_state(&self) -> ControlState {
        let limits = live::control_limits(&self.plan);
        ControlState {
            max_vus: limits.max_vus,
            max_rate: limits.max_rate,
            can_pause: limits.pause,
            paused: self.control.paused(),
            changes: self.control.changes(),
        }
    }

    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything so far, for a page that (re)connects.
    fn snapshot(&self) -> Bytes {
        let board = self.board();
        #[derive(serde::Serialize)]
        struct Snapshot<'a> {
            history: &'a [TimelinePoint],
            frame: &'a LiveFrame,
        }
        event("snapshot", &Snapshot { history: &board.history, frame: &board.frame })
    }
}

/// One server-sent event named `name` holding `data` as JSON (one line: JSON escapes newlines).
fn event(name: &str, data: &impl serde::Serialize) -> Bytes {
    let json = serde_json::to_string(data).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

/// The dashboard's HTTP server, on a thread of its own; stopped when dropped.
pub struct DashboardServer {
    server: stampede_serve::Background,
    token: String,
}

impl DashboardServer {
    /// Binds `addr` (port 0 picks one) and serves `dashboard`.
    pub fn start(addr: SocketAddr, dashboard: Arc<Dashboard>) -> std::io::Result<DashboardServer> {
        let token = dashboard.token().to_string();
        let handle = move |req| respond(dashboard.clone(), req);
        let server = stampede_serve::Background::start("stampede-dashboard", addr, handle)?;
        Ok(DashboardServer { server, token })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The page's address, with its token.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.server.addr(), self.token)
    }
}

/// Answers one request to the dashboard.
async fn respond(dashboard: Arc<Dashboard>, req: http::Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    if req.method() == Method::GET && path == "/" {
        return page();
    }
    let token = req.uri().query().and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "token"));
    if !token.is_some_and(|(_, t)| same(t.as_bytes(), dashboard.token.as_bytes())) {
        return answer(
            StatusCode::FORBIDDEN,
            "application/json",
            error_json("the dashboard's token is missing or wrong"),
        );
    }
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/events") => events(&dashboard),
        (Method::GET, "/report.html") => match dashboard.board().report_html.clone() {
            Some(html) => answer(StatusCode::OK, "text/html; charset=utf-8", html),
            None => answer(StatusCode::NOT_FOUND, "application/json", error_json("the run has not ended")),
        },
        (Method::POST, "/control") => {
            let body = match read_body(req.into_body()).await {
                Ok(body) => body,
                Err(e) => return answer(StatusCode::PAYLOAD_TOO_LARGE, "application/json", error_json(&e)),
            };
            match dashboard.change(&body) {
                Ok(taken) => {
                    answer(StatusCode::OK, "application/json", serde_json::to_string(&taken).unwrap_or_default())
                }
                Err((status, why)) => answer(status, "application/json", error_json(&why)),
            }
        }
        _ => answer(StatusCode::NOT_FOUND, "application/json", error_json("no such page")),
    }
}

/// The page: scripts and styles inline, nothing fetched from elsewhere.
fn page() -> Response<Body> {
    let mut response = answer(StatusCode::OK, "text/html; charset=utf-8", live::PAGE);
    let csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; \
               img-src data:";
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static(csp));
    response
}

/// The event stream: everything so far, then each frame as it comes (everything again after
/// falling behind); it ends with the run's last frame.
fn events(dashboard: &Arc<Dashboard>) -> Response<Body> {
    use std::sync::atomic::Ordering;
    if dashboard.pages.fetch_add(1, Ordering::Relaxed) >= PAGES {
        dashboard.pages.fetch_sub(1, Ordering::Relaxed);
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "application/json",
            error_json("too many pages follow this run"),
        );
    }
    let mut frames = dashboard.frames.subscribe();
    let first = dashboard.snapshot();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let dashboard = dashboard.clone();
    tokio::spawn(async move {
        follow(&dashboard, first, &mut frames, &tx).await;
        dashboard.pages.fetch_sub(1, Ordering::Relaxed);
    });
    let mut response = Response::new(streamed(rx));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}

/// Sends a page `first`, then each frame, until the page goes or the run has ended.
async fn follow(
    dashboard: &Dashboard,
    first: Bytes,
    frames: &mut broadcast::Receiver<Bytes>,
    tx: &tokio::sync::mpsc::Sender<Bytes>,
) {
    if tx.send(first).await.is_err() || dashboard.board().frame.ended {
        return;
    }
    loop {
        let next = match frames.recv().await {
            Ok(frame) => frame,
            Err(broadcast::error::RecvError::Lagged(_)) => dashboard.snapshot(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if tx.send(next).await.is_err() || dashboard.board().frame.ended {
            return;
        }
    }
}

/// A request body of at most [`CONTROL_BODY_BYTES`].
async fn read_body(body: Incoming) -> Result<Bytes, String> {
    let limited = http_body_util::Limited::new(body, CONTROL_BODY_BYTES);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(format!("a change is at most {CONTROL_BODY_BYTES} bytes")),
    }
}

fn answer(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}

fn error_json(why: &str) -> String {
    serde_json::json!({ "error": why }).to_string()
}

/// Whether `a` equals `b`, looking at every byte whatever differs first.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
