//! The target's WebSocket endpoints:
//!
//! - `/ws/echo`: every text or binary message back as it came.
//! - `/ws/broadcast`: every message to every socket connected to it (the sender too).
//!
//! `?refuse=CODE` refuses the upgrade with that HTTP status. A client that offers
//! subprotocols gets the first of `chat` and `echo` it offers; one that offers only others is
//! answered without one (which a client must treat as a failed handshake). `?close=CODE`
//! closes the socket with that code after the first message. The counters (upgrades,
//! refusals, messages each way, closes by code) are what tests compare reports with.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::grpc::TargetBody;

/// The WebSocket counters.
#[derive(Debug)]
pub struct WsStats {
    upgrades: AtomicU64,
    refused: AtomicU64,
    messages_received: AtomicU64,
    messages_sent: AtomicU64,
    open: AtomicU64,
    closes: Mutex<BTreeMap<u16, u64>>,
    broadcast: broadcast::Sender<Message>,
}

impl Default for WsStats {
    fn default() -> Self {
        WsStats {
            upgrades: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            messages_received: AtomicU64::new(0),
            messages_sent: AtomicU64::new(0),
            open: AtomicU64::new(0),
            closes: Mutex::default(),
            broadcast: broadcast::channel(1024).0,
        }
    }
}

impl WsStats {
    /// Upgrades accepted.
    pub fn upgrades(&self) -> u64 {
        self.upgrades.load(Ordering::Relaxed)
    }

    /// Upgrades refused (`?refuse=`).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Text and binary messages received (control frames not counted).
    pub fn messages_received(&self) -> u64 {
        self.messages_received.load(Ordering::Relaxed)
    }

    /// Text and binary messages sent: echoes and broadcasts.
    pub fn messages_sent(&self) -> u64 {
        self.messages_sent.load(Ordering::Relaxed)
    }

    /// Sockets open now.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Close frames received, by code (1005 for a close frame without one).
    pub fn closes(&self) -> BTreeMap<u16, u64> {
        self.closes.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The counters as JSON, for `/stats`.
    pub fn to_json(&self) -> Value {
        let closes: serde_json::Map<String, Value> =
            self.closes().into_iter().map(|(code, n)| (code.to_string(), json!(n))).collect();
        json!({
            "upgrades": self.upgrades(),
            "refused": self.refused(),
            "open": self.open(),
            "messagesReceived": self.messages_received(),
            "messagesSent": self.messages_sent(),
            "closes": closes,
        })
    }
}

/// Whether `req` asks for a WebSocket upgrade.
pub fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<TargetBody> {
    let mut r = Response::new(TargetBody::Full(Full::new(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r
}

/// Answers an upgrade request on `/ws/echo` or `/ws/broadcast`, and serves the socket.
pub fn upgrade(mut req: Request<Incoming>, stats: std::sync::Arc<crate::TargetStats>) -> Response<TargetBody> {
    let broadcast = match req.uri().path() {
        "/ws/echo" => false,
        "/ws/broadcast" => true,
        _ => return plain(StatusCode::NOT_FOUND, "not found\n"),
    };
    let query: BTreeMap<String, String> =
        req.uri().query().map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    if let Some(code) =
        query.get("refuse").and_then(|c| c.parse::<u16>().ok()).and_then(|c| StatusCode::from_u16(c).ok())
    {
        stats.ws.refused.fetch_add(1, Ordering::Relaxed);
        return plain(code, "upgrade refused\n");
    }
    let Some(key) = req.headers().get("sec-websocket-key").map(|k| k.as_bytes().to_vec()) else {
        return plain(StatusCode::BAD_REQUEST, "no sec-websocket-key\n");
    };
    let close_after = query.get("close").and_then(|c| c.parse::<u16>().ok());
    let protocol = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find(|p| matches!(*p, "chat" | "echo"))
        .map(str::to_string);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let mut r = Response::new(TargetBody::Full(Full::new(Bytes::new())));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(&key);
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert("sec-websocket-accept", HeaderValue::from_str(&accept).expect("base64 is a valid header value"));
    if let Some(p) = &protocol
        && let Ok(v) = HeaderValue::from_str(p)
    {
        h.insert("sec-websocket-protocol", v);
    }
    stats.ws.upgrades.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        // Small buffers (the defaults are 128 KiB each way per socket): thousands of idle sockets.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(4096)
            .write_buffer_size(0);
        let socket = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
        stats.ws.open.fetch_add(1, Ordering::Relaxed);
        serve(socket, &stats.ws, broadcast, close_after).await;
        stats.ws.open.fetch_sub(1, Ordering::Relaxed);
    });
    r
}

async fn serve<S>(mut socket: WebSocketStream<S>, ws: &WsStats, broadcast: bool, close_after: Option<u16>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut others = broadcast.then(|| ws.broadcast.subscribe());
    loop {
        let incoming = async {
            match others.as_mut() {
                Some(rx) => Some(rx.recv().await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            message = socket.next() => {
                let message = match message {
                    Some(Ok(m)) => m,
                    Some(Err(_)) | None => return,
                };
                match message {
                    Message::Text(_) | Message::Binary(_) => {
                        ws.messages_received.fetch_add(1, Ordering::Relaxed);
                        if let Some(code) = close_after {
                            let frame = CloseFrame { code: CloseCode::from(code), reason: "asked to close".into() };
                            let _ = socket.send(Message::Close(Some(frame))).await;
                            continue;
                        }
                        if broadcast {
                            let _ = ws.broadcast.send(message);
                        } else {
                            ws.messages_sent.fetch_add(1, Ordering::Relaxed);
                            if socket.send(message).await.is_err() {
                                return;
                            }
                        }
                    }
                    Message::Close(frame) => {
                        let code = frame.as_ref().map_or(1005, |f| u16::from(f.code));
                        if let Ok(mut closes) = ws.closes.lock() {
                            *closes.entry(code).or_default() += 1;
                        }
                        // tungstenite answers the close frame itself; drive it out.
                        let _ = socket.flush().await;
                        return;
                    }
                    _ => {}
                }
            }
            Some(Ok(message)) = incoming => {
                ws.messages_sent.fetch_add(1, Ordering::Relaxed);
                if socket.send(message).await.is_err() {
                    return;
                }
            }
        }
    }
}
