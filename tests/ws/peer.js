// A WebSocket server on Node's `ws` library, for Stampede's WebSocket tests: the same paths and
// the same records as peer.py (see there), except that `ws` hands over whole messages, so a
// `message` record has no `frames`.
//
// Usage: NODE_PATH=<node_modules> node peer.js RECORD_FILE

"use strict";

const crypto = require("crypto");
const fs = require("fs");
const { WebSocketServer } = require("ws");

const BAD_FRAMES = {
  continuation: Buffer.from([0x80, 0x01, 0x78]),
  utf8: Buffer.from([0x81, 0x02, 0xff, 0xfe]),
  rsv: Buffer.from([0xc1, 0x01, 0x78]),
};

const recordFd = fs.openSync(process.argv[2], "a");
function record(event) {
  fs.writeSync(recordFd, JSON.stringify(event) + "\n");
}

function split(data, parts) {
  const step = Math.max(1, Math.floor(data.length / parts));
  const pieces = [];
  for (let i = 0; i < parts - 1; i++) pieces.push(data.subarray(i * step, (i + 1) * step));
  pieces.push(data.subarray((parts - 1) * step));
  return pieces;
}

let ids = 0;
const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 128 << 20, perMessageDeflate: false });

wss.on("headers", (headers, req) => {
  if (!req.url.startsWith("/badaccept")) return;
  const i = headers.findIndex((h) => h.toLowerCase().startsWith("sec-websocket-accept:"));
  headers[i] = "Sec-WebSocket-Accept: d3JvbmcgYWNjZXB0IGtleQ==";
});

wss.on("connection", (ws, req) => {
  const conn = ++ids;
  const url = new URL(req.url, "http://peer");
  const q = url.searchParams;
  const fragments = Number(q.get("fragments") || "1");
  record({ event: "open", conn, path: req.url, key: req.headers["sec-websocket-key"] });
  ws.on("pong", (data) => record({ event: "pong", conn, payload: data.toString() }));
  ws.on("close", (code, reason) => record({ event: "close", conn, code, reason: reason.toString() }));
  ws.on("message", (data, isBinary) => {
    const raw = Buffer.isBuffer(data) ? data : Buffer.concat(data);
    const kind = isBinary ? "binary" : "text";
    record({ event: "message", conn, kind, size: raw.length, sha256: crypto.createHash("sha256").update(raw).digest("hex") });
    const echo = () => {
      const parts = fragments > 1 ? split(raw, fragments) : [raw];
      parts.forEach((p, i) => ws.send(p, { binary: isBinary, fin: i === parts.length - 1 }));
      record({ event: "sent", conn, kind, size: raw.length, frames: parts.length });
    };
    switch (url.pathname) {
      case "/close":
        ws.close(Number(q.get("code")), q.get("reason") || "");
        return;
      case "/drop":
        ws._socket.destroy();
        return;
      case "/bad":
        ws._socket.write(BAD_FRAMES[q.get("frame")]);
        return;
      case "/big": {
        const big = Buffer.alloc(Number(q.get("size")), "a");
        ws.send(big, { binary: true });
        record({ event: "sent", conn, kind: "binary", size: big.length, frames: 1 });
        return;
      }
      case "/ping": {
        ws.ping(q.get("payload") || "");
        // The echo follows the pong, as peer.py waits for it.
        ws.once("pong", echo);
        return;
      }
      case "/pong":
        ws.pong("unsolicited");
        echo();
        return;
      default:
        echo();
    }
  });
});

wss.on("listening", () => {
  console.log(`listening 127.0.0.1:${wss.address().port}`);
});
