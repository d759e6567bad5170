#!/usr/bin/env bash
# gRPC and WebSocket (issue #25), same-run ratios on this machine:
#
#   1. gRPC unary: stampede vs ghz (built from its Go module), the same UnaryCall of grpc-go's own
#      interop server (tests/grpc/interop.sh), server pinned to CPU 0, generators to CPU 1 with one
#      thread, C concurrent calls over one HTTP/2 connection each way. CPU-µs per call.
#   2. WebSocket idle sockets: one stampede runner holding N sockets open to the built-in target
#      (`stampede target`, pinned to CPU 0); peak RSS against the same run with 1 socket.
#   3. WebSocket echo: messages (sent + received) per CPU-second, stampede (one kept socket per VU,
#      a `repeat` of send/receive steps) vs a Go peer on gorilla/websocket (bench/ws-peer), C
#      connections each.
#
#   STAMPEDE_BIN=path bash bench/grpc.sh      # that stampede (else a release build of the tree)
#   ROUNDS=3 DURATION=10 CONC=50 SOCKETS=10000 bash bench/grpc.sh
#
# Writes the `grpc` section of bench/RESULTS.md (between its BEGIN/END markers); raw files under
# bench/out/grpc-<time>/.
set -euo pipefail
BENCH_TAG=grpc
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONC=${CONC:-50}
SOCKETS=${SOCKETS:-10000}
HOLD=${HOLD:-15}
GHZ_VERSION=${GHZ_VERSION:-0.93.0}
RESULTS=${RESULTS:-$BENCH/RESULTS.md}
STATUS_URL=""   # no nginx here: `measured` notes `?` for its counters
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/grpc-$RUN_ID"
mkdir -p "$RAW"
select_stampede "$RAW"
raise_nofile

GHZ="$TOOLS_ROOT/ghz-$GHZ_VERSION/ghz"
if [[ ! -x "$GHZ" ]]; then
    log "go install github.com/bojand/ghz/cmd/ghz@v$GHZ_VERSION"
    GOBIN="$(dirname "$GHZ")" go install "github.com/bojand/ghz/cmd/ghz@v$GHZ_VERSION"
fi
PEER="$TOOLS_ROOT/ws-peer-$(sha256sum "$BENCH/ws-peer/main.go" "$BENCH/ws-peer/go.sum" | sha256sum | cut -c1-12)"
[[ -x "$PEER" ]] || (cd "$BENCH/ws-peer" && go build -o "$PEER" .)
INTEROP=$(bash "$ROOT/tests/grpc/interop.sh")

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# --- 1. gRPC unary: stampede vs ghz -----------------------------------------------------------
taskset -c "$SERVER_CPU" "$INTEROP/server" -addr 127.0.0.1:0 >"$RAW/interop.addr" 2>"$RAW/interop.err" &
PIDS+=($!)
for _ in $(seq 100); do [[ -s "$RAW/interop.addr" ]] && break; sleep 0.1; done
GRPC_ADDR=$(head -1 "$RAW/interop.addr")
BODY='{"responseSize": 16, "payload": {"body": "AAAAAAAAAAAAAAAAAAAAAA=="}}'
cat >"$RAW/grpc.yaml" <<EOF
name: grpc-bench
baseUrl: http://$GRPC_ADDR
load: {executor: constant-vus, vus: $CONC, duration: ${DURATION}s}
grpc: {protoFiles: [grpc/testing/test.proto], importPaths: ["$INTEROP/protos"]}
scenarios:
  - name: unary
    steps:
      - name: call
        grpc: {method: grpc.testing.TestService/UnaryCall, message: $BODY}
EOF
for (( r = 1; r <= ROUNDS; r++ )); do
    for tool in stampede ghz; do
        prefix="$RAW/unary-r$r-$tool"
        log "gRPC unary round $r/$ROUNDS $tool"
        case $tool in
            stampede) measured "$prefix" $(( DURATION + 30 )) "$STAMPEDE" run "$RAW/grpc.yaml" --threads 1 --quiet --out "$prefix.json" || true ;;
            ghz) GOMAXPROCS=1 measured "$prefix" $(( DURATION + 30 )) "$GHZ" --insecure --cpus 1 \
                    --proto "$INTEROP/protos/grpc/testing/test.proto" --import-paths "$INTEROP/protos" \
                    --call grpc.testing.TestService/UnaryCall -d "$BODY" -c "$CONC" --connections 1 \
                    -z "${DURATION}s" -O json -o "$prefix.json" "$GRPC_ADDR" || true ;;
        esac
        sleep "$PAUSE"
    done
done

# --- 2 and 3. WebSocket: idle sockets, echo --------------------------------------------------
WS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c "$SERVER_CPU" "$STAMPEDE" target --port "$WS_PORT" >"$RAW/target.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$WS_PORT") 2>/dev/null && break; sleep 0.1; done
idle() {   # SOCKETS -> scenario
    cat >"$RAW/idle-$1.yaml" <<EOF
name: ws-idle
baseUrl: http://127.0.0.1:$WS_PORT
load: {executor: constant-vus, vus: $1, iterations: $1}
http: {connectTimeout: 60s, timeout: 120s}
scenarios:
  - name: idle
    steps:
      - name: hold
        ws: {url: "{{baseUrl}}/ws/echo", actions: [{hold: ${HOLD}s}], timeout: 120s}
EOF
    echo "$RAW/idle-$1.yaml"
}
for n in 1 "$SOCKETS"; do
    prefix="$RAW/idle-$n"
    log "WebSocket: $n idle socket(s) for ${HOLD}s"
    measured "$prefix" $(( HOLD + 120 )) "$STAMPEDE" run "$(idle "$n")" --threads 1 --quiet --out "$prefix.json" || true
done
cat >"$RAW/echo.yaml" <<EOF
name: ws-echo
baseUrl: http://127.0.0.1:$WS_PORT
load: {executor: constant-vus, vus: $CONC, duration: ${DURATION}s, gracefulStop: 0s}
scenarios:
  - name: echo
    steps:
      - repeat: {count: 1000000}
        steps:
          - name: echo
            ws: {url: "{{baseUrl}}/ws/echo", keepOpen: true, actions: [{send: hello}, {receive: {equals: hello}}]}
EOF
for (( r = 1; r <= ROUNDS; r++ )); do
    for tool in stampede peer; do
        prefix="$RAW/echo-r$r-$tool"
        log "WebSocket echo round $r/$ROUNDS $tool"
        case $tool in
            stampede) measured "$prefix" $(( DURATION + 60 )) "$STAMPEDE" run "$RAW/echo.yaml" --threads 1 --quiet --out "$prefix.json" || true ;;
            peer) GOMAXPROCS=1 measured "$prefix" $(( DURATION + 30 )) "$PEER" -url "ws://127.0.0.1:$WS_PORT/ws/echo" -c "$CONC" -d "$DURATION" || true ;;
        esac
        sleep "$PAUSE"
    done
done

cmdline="bash bench/grpc.sh"
[[ -n "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_BIN=${STAMPEDE_BIN/#$HOME/\~} $cmdline"
for v in ROUNDS:3 DURATION:10 CONC:50 SOCKETS:10000 HOLD:15; do
    name=${v%%:*} default=${v#*:}
    [[ "${!name}" != "$default" ]] && cmdline="$name=${!name} $cmdline"
done
python3 - "$RAW" "$RESULTS" "$cmdline" "$STAMPEDE_DESC" "$GHZ_VERSION" "$ROUNDS" "$DURATION" "$CONC" "$SOCKETS" "$HOLD" <<'PY'
import json, os, re, statistics, sys, time
raw, results, cmdline, desc, ghz_v, rounds, duration, conc, sockets, hold = sys.argv[1:]
rounds, conc, sockets = int(rounds), int(conc), int(sockets)

def cpu(prefix):
    user, sys_, rss = open(prefix + ".time").read().split()[-3:]
    return float(user) + float(sys_), int(rss) * 1024

def med(xs):
    return statistics.median(xs) if xs else float("nan")

rows = {}
for tool in ("stampede", "ghz"):
    calls, rates, p99s, cpus, rss, errs = [], [], [], [], [], []
    for r in range(1, rounds + 1):
        p = f"{raw}/unary-r{r}-{tool}"
        try:
            j = json.load(open(p + ".json"))
            c, m = cpu(p)
        except Exception:
            continue
        if tool == "stampede":
            t = j["total"]
            ok, err = t["requests"] - t["errors"], t["errors"]
            rate, p99 = t["rps"], t["latencyMs"]["p99"]
        else:
            ok = j.get("statusCodeDistribution", {}).get("OK", 0)
            err = j["count"] - ok
            rate = j["rps"]
            p99 = next((d["latency"] / 1e6 for d in j.get("latencyDistribution") or [] if d["percentage"] == 99), float("nan"))
        calls.append(ok); rates.append(rate); p99s.append(p99); cpus.append(c * 1e6 / max(ok, 1)); rss.append(m / 1e6); errs.append(err)
    rows[tool] = dict(rate=med(rates), p99=med(p99s), cpu=med(cpus), lo=min(cpus, default=float("nan")),
                      hi=max(cpus, default=float("nan")), rss=med(rss), errors=sum(errs), runs=len(cpus))

def idle(n):
    p = f"{raw}/idle-{n}"
    j = json.load(open(p + ".json"))
    _, rss = cpu(p)
    return rss, j["total"]["requests"], j["total"]["errors"]
rss1, _, _ = idle(1)
rssn, reqn, errn = idle(sockets)

echo = {}
for tool in ("stampede", "peer"):
    per, rates = [], []
    for r in range(1, rounds + 1):
        p = f"{raw}/echo-r{r}-{tool}"
        try:
            c, _ = cpu(p)
            if tool == "stampede":
                j = json.load(open(p + ".json"))
                m = j["total"].get("messages") or {}
                n = m.get("sent", 0) + m.get("received", 0)
                secs = j["run"]["durationSeconds"]
            else:
                out = open(p + ".out").read()
                s, rcv = map(int, re.search(r"sent (\d+) received (\d+)", out).groups())
                n, secs = s + rcv, float(duration)
        except Exception:
            continue
        per.append(n / c); rates.append(n / secs)
    echo[tool] = dict(per=med(per), rate=med(rates), runs=len(per))

s, g = rows["stampede"], rows["ghz"]
e, q = echo["stampede"], echo["peer"]
lines = [
    "<!-- BEGIN bench/grpc -->",
    "## gRPC and WebSocket (issue #25): stampede vs ghz, and a Go WebSocket peer",
    "",
    f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {os.cpu_count()} CPUs, {open('/proc/loadavg').read().split()[0]} 1-min load at the end.",
    f"- Command: `{cmdline}`; stampede: {desc}; ghz v{ghz_v} (`go install github.com/bojand/ghz/cmd/ghz@v{ghz_v}`).",
    f"- Server CPU 0, generator CPU 1 (`taskset`), one generator thread (`--threads 1`, `GOMAXPROCS=1 ghz --cpus 1`); CPU = user + sys of `/usr/bin/time`; medians over {rounds} rounds of {duration} s.",
    f"- gRPC: grpc-go's interop server (tests/grpc/interop.sh, grpc-go v1.85.0), `UnaryCall` with a 16-byte payload and answer, {conc} calls in flight over one HTTP/2 connection (ghz `-c {conc} --connections 1`).",
    "",
    "| gRPC unary | calls/s | p99 ms | CPU-µs/call | min–max | peak RSS MB | errors | runs |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
for name, r in (("**stampede**", s), ("ghz", g)):
    lines.append(f"| {name} | {r['rate']:,.0f} | {r['p99']:.2f} | {r['cpu']:.1f} | {r['lo']:.1f}–{r['hi']:.1f} | {r['rss']:.1f} | {r['errors']} | {r['runs']}/{rounds} |")
ratio = s["cpu"] / g["cpu"] if g["cpu"] else float("nan")
goal = "meets" if ratio <= 0.5 else "misses"
lines += [
    "",
    f"CPU per call, stampede / ghz: **{ratio:.2f}×** (goal ≤ 0.5×: {goal} it). ghz's errors, if any, are the calls in flight when its duration ends (`Unavailable: transport is closing`), not the server's; CPU per call counts OK calls only.",
    "",
    f"WebSocket, idle sockets: one runner (`--threads 1`) holding {sockets:,} sockets to `stampede target` for {hold} s: "
    f"peak RSS {rssn / 1e6:.1f} MB against {rss1 / 1e6:.1f} MB with one socket: **{(rssn - rss1) / max(sockets - 1, 1) / 1024:.1f} KiB per socket** "
    f"({reqn - errn:,} of {reqn:,} sessions held without error).",
    "",
    "| WebSocket echo | messages/s | messages per CPU-second | runs |",
    "|---|---:|---:|---:|",
    f"| **stampede** (`repeat` of `ws` steps on a kept socket) | {e['rate']:,.0f} | {e['per']:,.0f} | {e['runs']}/{rounds} |",
    f"| Go peer (gorilla/websocket, bench/ws-peer) | {q['rate']:,.0f} | {q['per']:,.0f} | {q['runs']}/{rounds} |",
    "",
    f"Messages per CPU-second, stampede / peer: **{e['per'] / q['per']:.2f}×**. Raw files: `{os.path.relpath(raw)}`.",
    "<!-- END bench/grpc -->",
]
section = "\n".join(lines) + "\n"
text = open(results).read() if os.path.exists(results) else ""
m = re.search(r"<!-- BEGIN bench/grpc -->.*?<!-- END bench/grpc -->\n?", text, re.S)
text = text[:m.start()] + section + text[m.end():] if m else text.rstrip("\n") + "\n\n" + section
open(results, "w").write(text)
print(section)
PY
