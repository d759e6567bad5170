#!/usr/bin/env bash
# Stampede vs wrk vs oha against one local nginx worker.
#
#   bash bench/run.sh                  # full run: 3 rounds x 10 s per generator and level (~10 min)
#   QUICK=1 bash bench/run.sh          # smoke test: 1 round x 3 s (~1.5 min, results under bench/out/)
#   IDLE_LOAD=0.6 bash bench/run.sh    # first wait (up to IDLE_WAIT_MAX s) for 1-min load < 0.6
#   PROFILE=50 bash bench/run.sh       # instead: perf profile of stampede at 50 connections for
#                                      # PROFILE_DURATION (3) s -> bench/out/profile-50.txt
#
# nginx (one worker) is pinned to CPU $SERVER_CPU, every generator to CPU $GEN_CPU with one
# thread. Each generator runs under /usr/bin/time, so CPU time and peak RSS are measured the
# same way for all three. See bench/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
    ROUNDS=${ROUNDS:-1}
    DURATION=${DURATION:-3}
    RESULTS=${RESULTS:-$BENCH/out/RESULTS-quick.md}
else
    ROUNDS=${ROUNDS:-3}
    DURATION=${DURATION:-10}
    RESULTS=${RESULTS:-$BENCH/RESULTS.md}
fi
CONNS=${CONNS:-"1 10 50 200 1000"}
TOOLS=${TOOLS:-"stampede wrk oha"}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
PAUSE=${PAUSE:-1}                        # seconds of quiet between two runs
IDLE_LOAD=${IDLE_LOAD:-}                 # e.g. 0.6: wait for a quiet machine before measuring
IDLE_WAIT_MAX=${IDLE_WAIT_MAX:-4200}     # give up waiting after this many seconds, then run anyway
IDLE_POLL=${IDLE_POLL:-60}
PROFILE=${PROFILE:-}                     # connections: profile stampede with perf, no matrix
PROFILE_DURATION=${PROFILE_DURATION:-3}
PROFILE_DELAY=${PROFILE_DELAY:-0}         # ms of the run before perf starts sampling (skips connection set-up)
PROFILE_SCENARIO=${PROFILE_SCENARIO:-}   # another scenario file, run as it is (its own load; e.g. an open model)
OHA_VERSION=${OHA_VERSION:-1.16.0}
TOOLS_ROOT=${TOOLS_ROOT:-$HOME/.cache/stampede/tools}
OUT_ROOT=${OUT_ROOT:-$BENCH/out}

BENCH_TAG=bench
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"   # log, die, tool installs, nginx start/stop (shared with bench/open.sh, sweep.sh, h2.sh)

[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ "$DURATION" =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds"
(( $(nproc) >= 2 )) || die "needs at least 2 CPUs (server on CPU $SERVER_CPU, generators on CPU $GEN_CPU)"

# ---------------------------------------------------------------- tools ---
need_debian wrk:wrk
if [[ -n "$PROFILE" ]]; then
    [[ "$PROFILE" =~ ^[1-9][0-9]*$ ]] || die "PROFILE must be a number of connections"
    need_debian perf:linux-perf
    perf stat -e cpu-clock -o /dev/null true 2>/dev/null || die "perf cannot count cpu-clock here (perf_event_paranoid?)"
fi

ensure_oha || die "cannot install oha $OHA_VERSION"

# Which stampede: STAMPEDE_BIN as is; STAMPEDE_REV (e.g. HEAD) built from that commit's tree
# (build_at_rev: git archive into bench/out, own target dir, so edits in the work tree do not
# leak in);
# by default the work tree, built like `make release`.
if [[ -n "${STAMPEDE_BIN:-}" ]]; then
    STAMPEDE="$STAMPEDE_BIN"
    STAMPEDE_DESC="binary $STAMPEDE_BIN"
elif [[ -n "${STAMPEDE_REV:-}" ]]; then
    mkdir -p "$OUT_ROOT"
    build_at_rev "$STAMPEDE_REV" stampede-src target "$OUT_ROOT/stampede-rev"
    STAMPEDE="$OUT_ROOT/stampede-rev"
    STAMPEDE_DESC="commit ${BUILT_SHA:0:12}"
else
    log "cargo build --release -p stampede (work tree)"
    (cd "$ROOT" && timeout 3600 cargo build --release -q -p stampede)
    STAMPEDE="$ROOT/target/release/stampede"
    STAMPEDE_DESC="work tree at $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
    if ! git -C "$ROOT" diff --quiet HEAD -- crates Cargo.toml Cargo.lock 2>/dev/null; then
        STAMPEDE_DESC+=" with uncommitted changes"
    fi
fi
[[ -x "$STAMPEDE" ]] || die "no stampede binary at $STAMPEDE"

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
(( $(ulimit -n) >= 2200 )) || die "open-file limit $(ulimit -n) is too low for 1000 connections"

# -------------------------------------------------------- quiet machine ---
LOAD_WAITED=0
LOAD_GAVE_UP=0
if [[ -n "$IDLE_LOAD" ]]; then
    start=$SECONDS
    while :; do
        load1=$(cut -d' ' -f1 /proc/loadavg)
        if python3 -c "import sys; sys.exit(0 if $load1 < $IDLE_LOAD else 1)"; then
            log "1-min load $load1 < $IDLE_LOAD: starting"
            break
        fi
        if (( SECONDS - start >= IDLE_WAIT_MAX )); then
            log "1-min load still $load1 after $((SECONDS - start)) s: running anyway"
            LOAD_GAVE_UP=1
            break
        fi
        log "1-min load $load1 >= $IDLE_LOAD, waiting (${IDLE_POLL}s polls, $((SECONDS - start)) s so far)"
        sleep "$IDLE_POLL"
    done
    LOAD_WAITED=$((SECONDS - start))
fi

# ---------------------------------------------------------------- nginx ---
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-bench.XXXXXX")
chmod 755 "$TMP"                         # nginx workers run as nobody when started as root
NGINX_PID=

cleanup() {
    stop_nginx
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT/"
mkdir -p "$TMP/www" "$TMP/logs"
printf '<html>\n<body>\n<p><em>Hello,World!</em></p>\n</body>\n</html>\n' >"$TMP/www/index.html"
PAGE_BYTES=$(stat -c %s "$TMP/www/index.html")
chmod -R a+rX "$TMP/www"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $(( ${PROFILE:-0} > 4000 ? $(ulimit -n) : 8192 ));
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;
events {
    # As many as the open-file limit allows (as bench/sweep.sh): with too few, nginx closes
    # kept-alive connections to accept new ones, and the generator reconnects all the time.
    worker_connections $(( ${PROFILE:-0} > 4000 ? $(ulimit -n) - 64 : 4096 ));
    use epoll;
    multi_accept on;
}
http {
    access_log off;
    default_type text/html;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_body_temp_path $TMP/client_body;
    proxy_temp_path $TMP/proxy;
    fastcgi_temp_path $TMP/fastcgi;
    uwsgi_temp_path $TMP/uwsgi;
    scgi_temp_path $TMP/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo 511);
        root $TMP/www;
        index index.html;
    }
}
EOF
taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/logs/error.log" &
NGINX_PID=$!
for _ in $(seq 100); do
    curl -fsS --max-time 1 -o /dev/null "$URL" 2>/dev/null && break
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$TMP/logs/error.log" >&2 || true; die "nginx did not start"; }
    sleep 0.1
done
body=$(curl -fsS --max-time 2 "$URL") || die "nginx does not answer on $URL"
[[ "$body" == *"Hello,World!"* ]] || die "unexpected page from $URL"
log "nginx $NGINX_PID (worker $(pgrep -P "$NGINX_PID" | tr '\n' ' ')) on $URL, pinned to CPU $SERVER_CPU, page $PAGE_BYTES bytes"

# ----------------------------------------------------------- generators ---
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/run-$RUN_ID"
mkdir -p "$RAW" "$(dirname "$RESULTS")"
MANIFEST="$RAW/manifest.tsv"
printf 'conns\tround\ttool\tprefix\trc\tload1_after\n' >"$MANIFEST"
SCENARIO="$BENCH/scenario.yaml"

# The generator command for TOOL at N connections; `@OUT@` stands for the report path.
gen_cmd() {
    local tool=$1 n=$2
    case "$tool" in
        stampede) echo "$STAMPEDE run $SCENARIO --threads 1 --vus $n --duration ${DURATION}s --quiet --out @OUT@ --base-url http://127.0.0.1:$PORT" ;;
        # A baseline binary (STAMPEDE_BASE_BIN) for a before/after in the same run.
        stampede-base) echo "${STAMPEDE_BASE_BIN:?stampede-base needs STAMPEDE_BASE_BIN} run $SCENARIO --threads 1 --vus $n --duration ${DURATION}s --quiet --out @OUT@ --base-url http://127.0.0.1:$PORT" ;;
        wrk) echo "wrk -t1 -c$n -d${DURATION}s --latency $URL" ;;
        oha) echo "$OHA -z ${DURATION}s -c $n --worker-threads 1 --no-tui --output-format json $URL" ;;
        *) die "unknown tool $tool" ;;
    esac
}

run_one() {
    local tool=$1 n=$2 round=$3 prefix rc=0 cmd
    prefix="$RAW/c${n}-r${round}-${tool}"
    cmd=$(gen_cmd "$tool" "$n")
    cmd=${cmd//@OUT@/$prefix.json}
    # time -> timeout -> generator: /usr/bin/time reports the generator's user+sys CPU
    # and its peak RSS (max over waited-for descendants; timeout itself is tiny).
    # shellcheck disable=SC2086
    taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$prefix.time" \
        timeout -k 5 $((DURATION + 30)) $cmd >"$prefix.out" 2>"$prefix.err" || rc=$?
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$round" "$tool" "$prefix" "$rc" \
        "$(cut -d' ' -f1 /proc/loadavg)" >>"$MANIFEST"
    (( rc == 0 )) || log "  $tool exited with $rc (see $prefix.err)"
    python3 "$BENCH/summarize.py" --one "$tool" "$prefix" >&2 || true
}

# PROFILE=N: where stampede spends its CPU at N connections (perf's cpu-clock samples; the
# accelerator-less VMs this runs on have no hardware counters). Flat profile by symbol.
if [[ -n "$PROFILE" ]]; then
    prefix="$RAW/profile-c$PROFILE"
    text="$OUT_ROOT/profile-$PROFILE.txt"
    taskset -c "$GEN_CPU" timeout 10 wrk -t1 -c10 -d1s "$URL" >/dev/null 2>&1 || true
    log "perf record: stampede at $PROFILE connections for ${PROFILE_DURATION}s"
    vus_args=(--vus "$PROFILE")
    [[ -n "$PROFILE_SCENARIO" ]] && vus_args=()
    taskset -c "$GEN_CPU" timeout -k 5 $((PROFILE_DURATION + 60)) \
        perf record -e cpu-clock -F 4999 -D "$PROFILE_DELAY" -o "$prefix.data" -- \
        "$STAMPEDE" run "${PROFILE_SCENARIO:-$SCENARIO}" --threads 1 "${vus_args[@]}" --duration "${PROFILE_DURATION}s" --quiet \
        --out "$prefix.json" --base-url "http://127.0.0.1:$PORT" >"$prefix.out" 2>"$prefix.err" \
        || { cat "$prefix.err" >&2; die "perf record failed"; }
    {
        echo "# perf profile of stampede at $PROFILE connections${PROFILE_SCENARIO:+ (${PROFILE_SCENARIO#"$ROOT"/}: its own load)}, ${PROFILE_DURATION} s ($(date -u '+%Y-%m-%d %H:%M UTC'))"
        echo "# stampede $("$STAMPEDE" --version | cut -d' ' -f2) ($STAMPEDE_DESC); nginx 1 worker on CPU $SERVER_CPU, stampede --threads 1 on CPU $GEN_CPU"
        echo "# perf record -e cpu-clock -F 4999 -D $PROFILE_DELAY (ms not sampled at the start); load at end: $(cat /proc/loadavg)"
        python3 - "$prefix.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
g = t["run"]["generator"]
print(f"# {t['total']['requests']} requests, {t['total']['rps']:.0f} req/s, {g['cpuSeconds']} CPU s, "
      f"{g['cpuMicrosPerRequest']} CPU-us/req (stampede's own count, perf overhead included)")
PY
        echo "# top 30 symbols, self time (perf report --no-children --sort dso,symbol):"
        perf report -i "$prefix.data" --stdio --no-children --sort dso,symbol --percent-limit 0 \
            >"$prefix.report.txt" 2>/dev/null
        awk '!/^#/ && NF { sub(/([[:space:]]+-)+[[:space:]]*$/, ""); print; if (++n == 30) exit }' "$prefix.report.txt"
    } >"$text"
    log "wrote $text"
    cat "$text"
    exit 0
fi

read -ra tools <<<"$TOOLS"
read -ra levels <<<"$CONNS"
runs=$(( ${#tools[@]} * ${#levels[@]} * ROUNDS ))
log "$runs runs of ${DURATION}s: connections {$CONNS} x tools {$TOOLS} x $ROUNDS round(s); raw data in $RAW"
LOAD_START=$(cat /proc/loadavg)

# Warm nginx up (page cache, first accepts) before the first measured run.
taskset -c "$GEN_CPU" timeout 10 wrk -t1 -c10 -d1s "$URL" >/dev/null 2>&1 || true

for n in "${levels[@]}"; do
    for (( r = 1; r <= ROUNDS; r++ )); do
        # Rotate the order each round so no tool always runs first or last.
        for (( i = 0; i < ${#tools[@]}; i++ )); do
            tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
            log "c=$n round $r/$ROUNDS $tool"
            run_one "$tool" "$n" "$r"
            sleep "$PAUSE"
        done
    done
done
LOAD_END=$(cat /proc/loadavg)
stop_nginx

# -------------------------------------------------------------- report ---
cmdline="bash bench/run.sh"
for v in QUICK ROUNDS DURATION CONNS TOOLS IDLE_LOAD STAMPEDE_REV; do
    case $v in
        QUICK) [[ "$QUICK" == 1 ]] && cmdline="QUICK=1 $cmdline" ;;
        ROUNDS) [[ "$ROUNDS" != "$([[ "$QUICK" == 1 ]] && echo 1 || echo 3)" ]] && cmdline="ROUNDS=$ROUNDS $cmdline" ;;
        DURATION) [[ "$DURATION" != "$([[ "$QUICK" == 1 ]] && echo 3 || echo 10)" ]] && cmdline="DURATION=$DURATION $cmdline" ;;
        CONNS) [[ "$CONNS" != "1 10 50 200 1000" ]] && cmdline="CONNS=\"$CONNS\" $cmdline" ;;
        TOOLS) [[ "$TOOLS" != "stampede wrk oha" ]] && cmdline="TOOLS=\"$TOOLS\" $cmdline" ;;
        IDLE_LOAD) [[ -n "$IDLE_LOAD" ]] && cmdline="IDLE_LOAD=$IDLE_LOAD $cmdline" ;;
        STAMPEDE_REV) [[ -n "${STAMPEDE_REV:-}" && -z "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_REV=$STAMPEDE_REV $cmdline" ;;
    esac
done
[[ -n "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_BIN=${STAMPEDE_BIN#"$ROOT"/} $cmdline"
[[ " $TOOLS " == *" stampede-base "* ]] && cmdline="STAMPEDE_BASE_BIN=${STAMPEDE_BASE_BIN#"$ROOT"/} $cmdline"

export BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_CMDLINE="$cmdline" BENCH_ROUNDS="$ROUNDS" BENCH_DURATION="$DURATION" \
    BENCH_SERVER_CPU="$SERVER_CPU" BENCH_GEN_CPU="$GEN_CPU" BENCH_PAGE_BYTES="$PAGE_BYTES" \
    BENCH_LOAD_START="$LOAD_START" BENCH_LOAD_END="$LOAD_END" BENCH_IDLE_LOAD="$IDLE_LOAD" \
    BENCH_LOAD_WAITED="$LOAD_WAITED" BENCH_LOAD_GAVE_UP="$LOAD_GAVE_UP" BENCH_RAW="${RAW#"$ROOT"/}" \
    BENCH_V_NGINX="$("$NGINX" -v 2>&1 | head -n1)" \
    BENCH_V_WRK="$(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)" \
    BENCH_V_OHA="$("$OHA" --version 2>&1 | head -n1)" \
    BENCH_V_STAMPEDE="$("$STAMPEDE" --version 2>&1 | head -n1) ($STAMPEDE_DESC)" \
    BENCH_CMD_STAMPEDE="taskset -c $GEN_CPU $(gen_cmd stampede N | sed -e "s|$ROOT/||g" -e 's|@OUT@|report.json|' -e "s|:$PORT|:PORT|")" \
    BENCH_CMD_WRK="taskset -c $GEN_CPU $(gen_cmd wrk N | sed -e "s|:$PORT|:PORT|")" \
    BENCH_CMD_OHA="taskset -c $GEN_CPU $(gen_cmd oha N | sed -e "s|$TOOLS_ROOT|~/.cache/stampede/tools|" -e "s|:$PORT|:PORT|")"
python3 -c 'import json, os, sys
json.dump({k: v for k, v in sorted(os.environ.items()) if k.startswith("BENCH_")}, open(sys.argv[1], "w"), indent=1)' \
    "$RAW/meta.json"
python3 "$BENCH/summarize.py" --manifest "$MANIFEST" --results "$RESULTS"
log "wrote $RESULTS"
