//! WebSocket steps: the handshake request (a [`RequestPlan`] of its own, a GET with the
//! upgrade headers) and the session's actions — sends from templates, receives that wait for a
//! matching message (the step's checks' own matchers: equals, contains, regex, JSON paths),
//! and holds.

use std::collections::BTreeMap;
use std::time::Duration;

use stampede_model::scenario::{CheckSpec, Expect, RequestSpec, ScenarioFile, WsAction, WsClose, WsReceive, WsSpec};

use crate::compile::check::CheckPlan;
use crate::compile::files::Files;
use crate::compile::request::{RequestPlan, compile_request};
use crate::compile::template::{Escape, Scope, Template};
use crate::error::Problems;

const DEFAULT_RECEIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The bytes of a Close frame's reason: its payload is at most 125 bytes, 2 of them the code.
const MAX_CLOSE_REASON: usize = 123;

/// The codes a client's own close may give (RFC 6455 §7.4): normal closure, or one registered
/// for libraries and applications. The others (1001 going away, 1002 protocol error, 1007,
/// 1009…) Stampede sends by itself when they apply.
fn client_may_close_with(code: u16) -> bool {
    code == 1000 || (3000..=4999).contains(&code)
}

/// One thing a session does.
#[derive(Debug)]
pub enum WsActionPlan {
    /// A text frame (`binary: false`) or a binary one (the template gives base64).
    Send {
        /// The frame's content, rendered per VU: the text, or base64 of a binary frame's bytes.
        message: Template,
        /// Whether it is a binary frame (`sendBinary`) rather than text (`send`, `sendJson`).
        binary: bool,
    },
    /// Wait for `count` messages that pass every matcher, at most `timeout`.
    Receive {
        /// Checks a message must pass to count (`receive`'s `equals`, `contains`, `matches`, `json`);
        /// none: any message.
        matchers: Vec<CheckPlan>,
        /// How long to wait (`receive.timeout`, default 5s); past it the step fails with `timeout`.
        timeout: Duration,
        /// How many matching messages to wait for (`receive.count`, default 1, at least 1).
        count: u32,
    },
    /// Keep the socket open this long (`hold`); messages that come meanwhile are counted.
    Hold(Duration),
    /// A Close with this code and reason; the session ends.
    Close {
        /// The Close code: 1000 or 3000–4999 (`close.code`, else the step's `closeCode`, else 1000).
        code: u16,
        /// The Close reason (`close.reason`), at most 123 bytes; empty when not given.
        reason: String,
    },
}

/// A compiled WebSocket session.
#[derive(Debug)]
pub struct WsPlan {
    /// What the session does, in order.
    pub actions: Vec<WsActionPlan>,
    /// Subprotocols offered: the server must pick one of them.
    pub subprotocols: Vec<String>,
    /// Leave the socket open for a later `ws` step of the iteration with the same URL (`keepOpen`);
    /// it closes when the iteration ends.
    pub keep_open: bool,
    /// The Close code when the session ends without a `close` action, or times out (`closeCode`,
    /// default 1000).
    pub close_code: u16,
    /// The whole session's limit.
    pub timeout: Duration,
}

/// Compiles one `ws:` step: its handshake request and its actions.
pub fn compile_session(
    spec: &WsSpec,
    file: &ScenarioFile,
    scope: &Scope,
    files: Files<'_>,
    loc: &str,
    problems: &mut Problems,
) -> Option<(RequestPlan, WsPlan)> {
    let at = |field: &str| format!("{loc}: ws.{field}");
    let before = problems.len();
    let url = spec.url.trim();
    if url.is_empty() {
        problems.add(at("url"), "a `ws` step needs a `url` (ws://, wss://, or {{baseUrl}}/path)");
        return None;
    }
    let timeout = spec.timeout.unwrap_or(file.http.timeout).get();
    if timeout.is_zero() {
        problems.add(at("timeout"), "must be longer than 0s");
    }
    let head = compile_request(&handshake(spec, url, timeout), file, scope, files, loc, problems);
    let mut actions = Vec::new();
    for (i, a) in spec.actions.iter().enumerate() {
        let last = i + 1 == spec.actions.len();
        actions.extend(compile_action(spec, a, last, scope, &at(&format!("actions[{i}]")), problems));
    }
    let close_code = spec.close_code.unwrap_or(1000);
    if !client_may_close_with(close_code) {
        problems.add(at("closeCode"), "a client may close with 1000 or a code from 3000 to 4999");
    }
    if problems.len() != before {
        return None;
    }
    let plan =
        WsPlan { actions, subprotocols: spec.subprotocols.clone(), keep_open: spec.keep_open, close_code, timeout };
    Some((head?, plan))
}

/// The handshake's request: a GET of `url` (`ws://` as `http://`, `wss://` as `https://`)
/// with the upgrade headers, the subprotocols offered and the step's own headers.
fn handshake(spec: &WsSpec, url: &str, timeout: Duration) -> RequestSpec {
    let http_url = if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else {
        url.to_string()
    };
    let mut headers: BTreeMap<String, String> = BTreeMap::from([
        ("upgrade".to_string(), "websocket".to_string()),
        ("connection".to_string(), "Upgrade".to_string()),
        ("sec-websocket-version".to_string(), "13".to_string()),
    ]);
    if !spec.subprotocols.is_empty() {
        headers.insert("sec-websocket-protocol".into(), spec.subprotocols.join(", "));
    }
    for (k, v) in &spec.headers {
        headers.insert(k.to_ascii_lowercase(), v.clone());
    }
    RequestSpec {
        method: "GET".into(),
        url: http_url,
        headers,
        query: BTreeMap::new(),
        body: None,
        json: None,
        form: None,
        multipart: None,
        timeout: Some(stampede_model::Dur::from(timeout)),
        redirects: Some(0),
    }
}

/// One action of the session (`path` in messages, `last` when it ends the list); `None` when
/// it has problems (they are recorded).
fn compile_action(
    spec: &WsSpec,
    a: &WsAction,
    last: bool,
    scope: &Scope,
    path: &str,
    problems: &mut Problems,
) -> Option<WsActionPlan> {
    let given = [
        a.send.is_some(),
        a.send_json.is_some(),
        a.send_binary.is_some(),
        a.receive.is_some(),
        a.hold.is_some(),
        a.close.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        problems.add(path, "needs exactly one of `send`, `sendJson`, `sendBinary`, `receive`, `hold` and `close`");
        return None;
    }
    let template = |src: &str, field: &str, problems: &mut Problems| {
        Template::compile(src, scope, Escape::None).map_err(|e| problems.add(format!("{path}.{field}"), e)).ok()
    };
    if let Some(text) = &a.send {
        let message = template(text, "send", problems)?;
        Some(WsActionPlan::Send { message, binary: false })
    } else if let Some(value) = &a.send_json {
        match Template::json(value, scope) {
            Ok(message) => Some(WsActionPlan::Send { message, binary: false }),
            Err(e) => {
                problems.add(format!("{path}.sendJson"), e);
                None
            }
        }
    } else if let Some(b64) = &a.send_binary {
        let message = template(b64, "sendBinary", problems)?;
        if let Some(c) = message.as_const() {
            use base64::Engine as _;
            if base64::engine::general_purpose::STANDARD.decode(c).is_err() {
                problems.add(format!("{path}.sendBinary"), "is not base64");
            }
        }
        Some(WsActionPlan::Send { message, binary: true })
    } else if let Some(hold) = a.hold {
        Some(WsActionPlan::Hold(hold.get()))
    } else if let Some(c) = &a.close {
        Some(compile_close(spec, c, last, path, problems))
    } else {
        a.receive.as_ref().map(|r| compile_receive(r, scope, path, problems))
    }
}

/// A `close` action (`last` when it ends the list): its code (the step's `closeCode` by
/// default) and reason.
fn compile_close(spec: &WsSpec, c: &WsClose, last: bool, path: &str, problems: &mut Problems) -> WsActionPlan {
    if !last {
        problems.add(format!("{path}.close"), "ends the session: it must be the last action");
    }
    if spec.keep_open {
        problems.add(format!("{path}.close"), "closes the socket that `keepOpen` would keep");
    }
    let code = c.code.or(spec.close_code).unwrap_or(1000);
    if !client_may_close_with(code) {
        problems.add(format!("{path}.close.code"), "a client may close with 1000 or a code from 3000 to 4999");
    }
    let reason = c.reason.clone().unwrap_or_default();
    if reason.len() > MAX_CLOSE_REASON {
        problems.add(
            format!("{path}.close.reason"),
            format!("is {} bytes; a Close frame holds at most {MAX_CLOSE_REASON}", reason.len()),
        );
    }
    WsActionPlan::Close { code, reason }
}

/// A `receive` action: its matchers (compiled as the checks of a body), timeout and count.
fn compile_receive(r: &WsReceive, scope: &Scope, path: &str, problems: &mut Problems) -> WsActionPlan {
    let check = CheckSpec {
        status: None,
        headers: BTreeMap::new(),
        body: (r.equals.is_some() || r.contains.is_some() || r.matches.is_some()).then(|| Expect {
            equals: r.equals.clone().map(stampede_model::scenario::Scalar::Text),
            exists: None,
            contains: r.contains.clone(),
            matches: r.matches.clone(),
        }),
        json: r.json.clone(),
    };
    let matchers =
        crate::compile::check::compile(&check, None, scope, &mut problems.under(format!("{path}.receive: ")));
    if r.count == Some(0) {
        problems.add(format!("{path}.receive.count"), "must be at least 1");
    }
    let timeout = r.timeout.map_or(DEFAULT_RECEIVE_TIMEOUT, |t| t.get());
    WsActionPlan::Receive { matchers, timeout, count: r.count.unwrap_or(1).max(1) }
}
