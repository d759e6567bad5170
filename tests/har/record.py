#!/usr/bin/env python3
"""Records a person's path through a page as a HAR file, in headless Chromium driven through its
DevTools protocol (over --remote-debugging-pipe: no port, no extra packages).

    record.py --chromium /usr/bin/chromium --url http://127.0.0.1:PORT/shop/app --out rec.har \
        --step '#login|document.getElementById("status").textContent.startsWith("logged in")' ...

Each --step clicks the element a CSS selector names (the first match), then waits until a
JavaScript expression is true (10 s at most). The HAR holds every request the page sent, with
its headers, body, and the response's status, headers and body, as Chromium's own HAR export does.
Exit 1 with the reason when a step does not come true.
"""

import argparse
import base64
import datetime
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="stampede-har-")
        # Pipes at fds 10 and up, so that placing them at 3 and 4 in the child clobbers nothing.
        # (os.pipe's are close-on-exec: only 3 and 4, made in the child, reach Chromium.)
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        high_r = fcntl.fcntl(to_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(from_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_r)
        os.close(from_w)
        to_r, from_w = high_r, high_w

        def child():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", "about:blank"]
        # close_fds=False: the fds 3 and 4 `child` makes must survive to exec (everything else
        # here is close-on-exec).
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=child,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.out = os.fdopen(to_w, "wb", buffering=0)
        self.inp = os.fdopen(from_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def read(self, deadline):
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = self.inp.read(65536)
            if not chunk:
                raise EOFError("Chromium closed its pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self.read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def headers_list(headers):
    return [{"name": k, "value": v} for k, v in (headers or {}).items()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--step", action="append", default=[])
    a = ap.parse_args()
    b = Browser(a.chromium)
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ["Network", "Page", "Runtime"]:
            b.call(f"{domain}.enable", session=s)
        b.call("Page.navigate", {"url": a.url}, session=s)

        def holds(expression):
            r = b.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=s)
            return r.get("result", {}).get("value") is True

        def wait(expression, what):
            deadline = time.monotonic() + 10
            while not holds(expression):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what}: `{expression}` did not come true in 10 s")
                time.sleep(0.05)

        wait("document.readyState === 'complete'", "the page load")
        for step in a.step:
            selector, _, until = step.partition("|")
            click = f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false; e.click(); return true; }})()"
            if not holds(click):
                raise RuntimeError(f"no element `{selector}` to click")
            wait(until or "true", f"after clicking `{selector}`")
        time.sleep(0.2)  # the last responses' events
        b.call("Runtime.evaluate", {"expression": "1"}, session=s)
        # The HAR, from the network events: request, response, body.
        requests, responses, order = {}, {}, []
        for e in b.events:
            p = e.get("params", {})
            if e["method"] == "Network.requestWillBeSent":
                rid = p["requestId"]
                if rid not in requests:
                    order.append(rid)
                requests[rid] = p
            elif e["method"] == "Network.responseReceived":
                responses[p["requestId"]] = p["response"]
        entries = []
        for rid in order:
            req = requests[rid]
            r = req["request"]
            resp = responses.get(rid)
            content = {"size": 0, "mimeType": resp.get("mimeType", "") if resp else ""}
            if resp:
                try:
                    body = b.call("Network.getResponseBody", {"requestId": rid}, session=s)
                    content["text"] = body.get("body", "")
                    if body.get("base64Encoded"):
                        content["encoding"] = "base64"
                    content["size"] = len(content["text"])
                except RuntimeError:
                    pass
            started = datetime.datetime.fromtimestamp(req.get("wallTime", time.time()), datetime.timezone.utc)
            entry = {
                "startedDateTime": started.isoformat().replace("+00:00", "Z"),
                "time": 0,
                "request": {
                    "method": r["method"], "url": r["url"], "httpVersion": "HTTP/1.1",
                    "headers": headers_list(r.get("headers")), "queryString": [], "cookies": [],
                    "headersSize": -1, "bodySize": len(r.get("postData", "")),
                },
                "response": {
                    "status": resp["status"] if resp else 0, "statusText": resp.get("statusText", "") if resp else "",
                    "httpVersion": "HTTP/1.1", "headers": headers_list(resp.get("headers")) if resp else [],
                    "cookies": [], "content": content, "redirectURL": "", "headersSize": -1, "bodySize": content["size"],
                },
                "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0},
            }
            if "postData" in r:
                mime = next((v for k, v in r.get("headers", {}).items() if k.lower() == "content-type"), "")
                entry["request"]["postData"] = {"mimeType": mime, "text": r["postData"]}
            entries.append(entry)
        har = {"log": {"version": "1.2", "creator": {"name": "stampede tests/har/record.py", "version": "1"},
                       "pages": [], "entries": entries}}
        with open(a.out, "w") as f:
            json.dump(har, f, indent=1)
        print(f"recorded {len(entries)} request(s) to {a.out}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the reason goes to the test's output
        print(f"record.py: {e}", file=sys.stderr)
        return 1
    finally:
        b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
