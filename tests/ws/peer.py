"""A WebSocket server on Python's `websockets` library, for Stampede's WebSocket tests.

Usage: PYTHONPATH=<websockets> python3 peer.py RECORD_FILE. Listens on a free loopback port and
prints `listening 127.0.0.1:PORT`. Every connection and what it saw go to RECORD_FILE as JSON
lines, each with the connection's number: `open` (path, Sec-WebSocket-Key), `message` (kind,
size, sha256, frames), `sent` (kind, size, frames), `pong` (its payload), `close` (the code and
reason of the client's Close; 1006 when none came).

What a connection does follows its path (peer.js does the same with Node's `ws`):
  /echo[?fragments=K]  every message back, in K frames
  /close?code=C&reason=R  after the first message, a Close with C and R
  /ping?payload=P      before each echo, a ping with P, and waits for its pong
  /pong                before each echo, an unsolicited pong
  /drop                after the first message, the TCP connection ends without a Close
  /bad?frame=F         after the first message, an invalid frame F: `continuation` (no message
                       to continue), `utf8` (a text frame that is not UTF-8), `rsv` (RSV1 set)
  /big?size=N          after the first message, a binary message of N bytes
  /badaccept           the handshake answer's Sec-WebSocket-Accept is wrong
"""

import asyncio
import hashlib
import itertools
import json
import sys
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

BAD_FRAMES = {
    "continuation": b"\x80\x01x",
    "utf8": b"\x81\x02\xff\xfe",
    "rsv": b"\xc1\x01x",
}

ids = itertools.count(1)
record_file = None


def record(**event):
    record_file.write(json.dumps(event) + "\n")
    record_file.flush()


def split(data, parts):
    """`data` in `parts` pieces (the last takes the rest)."""
    step = max(1, len(data) // parts)
    pieces = [data[i * step:(i + 1) * step] for i in range(parts - 1)]
    pieces.append(data[(parts - 1) * step:])
    return pieces


def process_response(connection, request, response):
    if request.path.startswith("/badaccept"):
        del response.headers["Sec-WebSocket-Accept"]
        response.headers["Sec-WebSocket-Accept"] = "d3JvbmcgYWNjZXB0IGtleQ=="
    return response


async def receive(conn):
    """The next message, whole, and the number of frames it came in."""
    frames = []
    async for frame in conn.recv_streaming():
        frames.append(frame)
    if isinstance(frames[0], bytes):
        return b"".join(frames), len(frames)
    return "".join(frames), len(frames)


async def handler(conn):
    conn_id = next(ids)
    url = urlsplit(conn.request.path)
    path = url.path
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    record(event="open", conn=conn_id, path=conn.request.path, key=conn.request.headers["Sec-WebSocket-Key"])
    fragments = int(query.get("fragments", "1"))
    try:
        while True:
            message, frames = await receive(conn)
            raw = message if isinstance(message, bytes) else message.encode()
            record(
                event="message",
                conn=conn_id,
                kind="binary" if isinstance(message, bytes) else "text",
                size=len(raw),
                sha256=hashlib.sha256(raw).hexdigest(),
                frames=frames,
            )
            if path == "/close":
                await conn.close(int(query["code"]), query.get("reason", ""))
                break
            if path == "/drop":
                conn.transport.abort()
                break
            if path == "/bad":
                conn.transport.write(BAD_FRAMES[query["frame"]])
                continue
            if path == "/big":
                big = b"a" * int(query["size"])
                await conn.send(big)
                record(event="sent", conn=conn_id, kind="binary", size=len(big), frames=1)
                continue
            if path == "/ping":
                payload = query.get("payload", "").encode()
                waiter = await conn.ping(payload)
                await asyncio.wait_for(waiter, 10)
                # websockets completes the waiter only for a pong with the ping's payload.
                record(event="pong", conn=conn_id, payload=payload.decode())
            if path == "/pong":
                await conn.pong(b"unsolicited")
            parts = split(message, fragments) if fragments > 1 else None
            await conn.send(parts if parts else message)
            record(
                event="sent",
                conn=conn_id,
                kind="binary" if isinstance(message, bytes) else "text",
                size=len(raw),
                frames=len(parts) if parts else 1,
            )
    except ConnectionClosed:
        pass
    await conn.wait_closed()
    rcvd = conn.protocol.close_rcvd
    record(
        event="close",
        conn=conn_id,
        code=rcvd.code if rcvd else 1006,
        reason=rcvd.reason if rcvd else "",
    )


async def main():
    global record_file
    record_file = open(sys.argv[1], "a", encoding="utf-8")
    async with serve(
        handler,
        "127.0.0.1",
        0,
        max_size=None,
        ping_interval=None,
        compression=None,
        close_timeout=10,
        process_response=process_response,
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening 127.0.0.1:{port}", flush=True)
        await asyncio.Future()


asyncio.run(main())
