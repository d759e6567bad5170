# Shared by bench/open.sh, bench/sweep.sh and bench/h2.sh (issue #7): tools, the stampede
# binary, a pinned nginx with stub_status, and one measured generator run. Sourced, not run.
#
# The caller sets BENCH_TAG (log prefix) before sourcing, and may set any knob below.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
PAUSE=${PAUSE:-1}                         # seconds of quiet between two runs
TOOLS_ROOT=${TOOLS_ROOT:-$HOME/.cache/stampede/tools}
OUT_ROOT=${OUT_ROOT:-$BENCH/out}
OHA_VERSION=${OHA_VERSION:-1.16.0}
VEGETA_VERSION=${VEGETA_VERSION:-12.13.0}
JMETER_VERSION=${JMETER_VERSION:-5.6.3}
# JMeter's own bin/jmeter defaults (heap, G1), as its non-GUI runs get them (as bench/flow).
JMETER_JVM_ARGS=${JMETER_JVM_ARGS:-"-Xms1g -Xmx1g -XX:MaxMetaspaceSize=256m -XX:+UseG1GC -XX:MaxGCPauseMillis=100 -XX:G1ReservePercent=20"}

log() { printf '[%s %(%H:%M:%S)T] %s\n' "${BENCH_TAG:-bench}" -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

(( $(nproc) >= 2 )) || die "needs at least 2 CPUs (server on CPU $SERVER_CPU, generators on CPU $GEN_CPU)"

# ---------------------------------------------------------------- tools ---
apt_updated=0
apt_install() {
    command -v apt-get >/dev/null || return 1
    if [[ $apt_updated == 0 ]]; then
        log "apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
        apt_updated=1
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# need_debian CMD:PACKAGE ...: installs the packages whose command is missing.
need_debian() {
    local missing=() pair cmd pkg
    for pair in "$@"; do
        cmd=${pair%%:*} pkg=${pair#*:}
        if [[ "$cmd" == /* ]]; then [[ -x "$cmd" ]] && continue
        else command -v "$cmd" >/dev/null && continue; fi
        missing+=("$pkg")
    done
    (( ${#missing[@]} )) || return 0
    apt_install "${missing[@]}" || die "cannot install ${missing[*]}"
}

need_debian nginx:nginx /usr/bin/time:time taskset:util-linux python3:python3 curl:curl
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# oha: cargo install --locked into the tools cache (bench/run.sh installs the same one).
ensure_oha() {
    OHA="$TOOLS_ROOT/bin/oha"
    if [[ ! -x "$OHA" ]] || [[ "$("$OHA" --version 2>/dev/null)" != *"$OHA_VERSION"* ]]; then
        command -v cargo >/dev/null || { log "no cargo to install oha"; return 1; }
        log "cargo install oha $OHA_VERSION into $TOOLS_ROOT (a cold build takes several minutes)"
        mkdir -p "$TOOLS_ROOT"
        timeout 3600 cargo install oha --version "$OHA_VERSION" --locked --root "$TOOLS_ROOT" --force || return 1
    fi
}

# vegeta: `go install` of the pinned module into $TOOLS_ROOT/vegeta-VERSION/bin (the version is
# checked from the binary's module build info: `go install` sets no -version string).
ensure_vegeta() {
    local dir="$TOOLS_ROOT/vegeta-$VEGETA_VERSION"
    VEGETA="$dir/bin/vegeta"
    if [[ -x "$VEGETA" ]] && command -v go >/dev/null \
        && go version -m "$VEGETA" 2>/dev/null | grep -q "mod[[:space:]]*github.com/tsenart/vegeta/v12[[:space:]]*v$VEGETA_VERSION"; then
        return 0
    fi
    [[ -x "$VEGETA" && ! -x "$(command -v go)" ]] && return 0   # no go to check it with: trust the folder name
    if ! command -v go >/dev/null; then apt_install golang-go || { log "no go to install vegeta"; return 1; }; fi
    log "go install github.com/tsenart/vegeta/v12@v$VEGETA_VERSION into $dir/bin"
    mkdir -p "$dir/bin"
    GOBIN="$dir/bin" timeout 1800 go install "github.com/tsenart/vegeta/v12@v$VEGETA_VERSION" || return 1
}

# JMeter from Maven Central, laid out as a JMeter home (the same install as bench/flow/run.sh,
# which shares the cache folder).
ensure_jmeter() {
    local home="$TOOLS_ROOT/jmeter-$JMETER_VERSION" tmp
    JMETER_HOME="$home"
    [[ -f "$home/.complete" ]] && return 0
    local need=()
    command -v java >/dev/null || need+=(default-jre-headless)
    command -v mvn >/dev/null || need+=(maven)
    command -v unzip >/dev/null || need+=(unzip)
    if (( ${#need[@]} )); then apt_install "${need[@]}" || return 1; fi
    log "mvn: resolving JMeter $JMETER_VERSION from Maven Central into $home"
    tmp="$home.tmp"
    rm -rf "$tmp" "$home" && mkdir -p "$tmp/bin" "$tmp/lib/ext" "$tmp/lib/junit"
    timeout 1800 mvn -q -B -f "$BENCH/flow/jmeter/pom.xml" -Djmeter.version="$JMETER_VERSION" \
        dependency:copy-dependencies -DoutputDirectory="$tmp/all" >&2 || return 1
    (
        set -e
        cd "$tmp"
        unzip -q -o "all/ApacheJMeter_config-$JMETER_VERSION.jar" 'bin/*' -d .
        mv "all/ApacheJMeter-$JMETER_VERSION.jar" bin/ApacheJMeter.jar
        for m in core http components functions; do mv "all/ApacheJMeter_$m-$JMETER_VERSION.jar" lib/ext/; done
        rm -f "all/ApacheJMeter_config-$JMETER_VERSION.jar"
        mv all/*.jar lib/
        rmdir all
    ) || return 1
    printf 'installed on %s: mvn dependency:copy-dependencies\n' "$(date -u +%Y-%m-%d)" >"$tmp/.install-info"
    touch "$tmp/.complete"
    mv "$tmp" "$home"
}

# Builds stampede from commit REV's tree: `git archive` into $OUT_ROOT/SRC and its own target
# dir $OUT_ROOT/TARGET, both reused (a new commit replaces the sources with fresh mtimes, so
# cargo rebuilds the workspace crates but keeps the dependencies); copies the binary to DEST.
# Sets BUILT_SHA.
build_at_rev() {
    local rev=$1 src="$OUT_ROOT/$2" target="$OUT_ROOT/$3" dest=$4
    BUILT_SHA=$(git -C "$ROOT" rev-parse --verify "${rev}^{commit}") || die "no commit $rev"
    if [[ "$(cat "$src/.bench-commit" 2>/dev/null)" != "$BUILT_SHA" ]]; then
        rm -rf "$src" && mkdir -p "$src"
        git -C "$ROOT" archive "$BUILT_SHA" | tar -x -m -C "$src"
        echo "$BUILT_SHA" >"$src/.bench-commit"
    fi
    log "cargo build --release -p stampede at ${BUILT_SHA:0:12} (in $src)"
    (cd "$src" && CARGO_TARGET_DIR="$target" timeout 3600 cargo build --release -q -p stampede)
    cp "$target/release/stampede" "$dest"
}

# Which stampede: STAMPEDE_BIN (copied into the run folder first, so a rebuild cannot change it
# under a run), STAMPEDE_REV (built from that commit's tree, as bench/run.sh does), else the
# work tree (`cargo build --release -p stampede`). Sets STAMPEDE and STAMPEDE_DESC.
select_stampede() {
    local raw=$1
    if [[ -n "${STAMPEDE_BIN:-}" ]]; then
        [[ -x "$STAMPEDE_BIN" ]] || die "STAMPEDE_BIN=$STAMPEDE_BIN is not an executable"
        cp "$STAMPEDE_BIN" "$raw/stampede"
        STAMPEDE="$raw/stampede"
        STAMPEDE_DESC="binary ${STAMPEDE_BIN#"$ROOT"/}, sha256 $(sha256sum "$STAMPEDE" | cut -c1-12)"
    elif [[ -n "${STAMPEDE_REV:-}" ]]; then
        build_at_rev "$STAMPEDE_REV" stampede-src target "$raw/stampede"
        STAMPEDE="$raw/stampede"
        STAMPEDE_DESC="commit ${BUILT_SHA:0:12}"
    else
        log "cargo build --release -p stampede (work tree)"
        (cd "$ROOT" && timeout 3600 cargo build --release -q -p stampede)
        cp "$ROOT/target/release/stampede" "$raw/stampede"
        STAMPEDE="$raw/stampede"
        STAMPEDE_DESC="work tree at $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
        if ! git -C "$ROOT" diff --quiet HEAD -- crates Cargo.toml Cargo.lock 2>/dev/null; then
            STAMPEDE_DESC+=" with uncommitted changes"
        fi
    fi
    [[ -x "$STAMPEDE" ]] || die "no stampede binary at $STAMPEDE"
}

# The open-file limit: as high as the hard limit allows (NOFILE_WANT, default 65536).
raise_nofile() {
    local want=${NOFILE_WANT:-65536} hard
    ulimit -n "$want" 2>/dev/null || { hard=$(ulimit -Hn); [[ "$hard" == unlimited ]] && hard=$want; ulimit -n "$hard"; }
    NOFILE=$(ulimit -n)
}

# ---------------------------------------------------------------- nginx ---
NGINX_PID=
NGINX_TMP=
stop_nginx() {
    [[ -n "$NGINX_PID" ]] || return 0
    if kill -0 "$NGINX_PID" 2>/dev/null; then
        local workers
        workers=$(pgrep -P "$NGINX_PID" || true)
        kill -TERM "$NGINX_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$NGINX_PID" 2>/dev/null; then
            for w in $workers; do kill -KILL "$w" 2>/dev/null || true; done
            kill -KILL "$NGINX_PID" 2>/dev/null || true
        fi
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    NGINX_PID=
}
lib_cleanup() {
    stop_nginx
    [[ -n "$NGINX_TMP" ]] && rm -rf "$NGINX_TMP"
    return 0
}
trap lib_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_nginx LISTEN_OPTS: one worker pinned to $SERVER_CPU on a free loopback port, the page of
# bench/run.sh, `stub_status` at /stub_status. LISTEN_OPTS e.g. "backlog=4096" or "http2".
# worker_connections and worker_rlimit_nofile follow the open-file limit (NOFILE).
# Sets PORT, URL, STATUS_URL, PAGE_BYTES, NGINX_CONF_DESC.
start_nginx() {
    local listen_opts=${1:-} wc rl
    NGINX_TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-bench.XXXXXX")
    chmod 755 "$NGINX_TMP"                     # nginx workers run as nobody when started as root
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    URL="http://127.0.0.1:$PORT/"
    STATUS_URL="http://127.0.0.1:$PORT/stub_status"
    mkdir -p "$NGINX_TMP/www" "$NGINX_TMP/logs"
    printf '<html>\n<body>\n<p><em>Hello,World!</em></p>\n</body>\n</html>\n' >"$NGINX_TMP/www/index.html"
    PAGE_BYTES=$(stat -c %s "$NGINX_TMP/www/index.html")
    chmod -R a+rX "$NGINX_TMP/www"
    rl=${NOFILE:-8192}
    (( rl > 65536 )) && rl=65536
    wc=$(( rl - 64 ))
    cat >"$NGINX_TMP/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $rl;
daemon off;
pid $NGINX_TMP/nginx.pid;
error_log $NGINX_TMP/logs/error.log warn;
events {
    worker_connections $wc;
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
    reset_timedout_connection on;
    client_body_temp_path $NGINX_TMP/client_body;
    proxy_temp_path $NGINX_TMP/proxy;
    fastcgi_temp_path $NGINX_TMP/fastcgi;
    uwsgi_temp_path $NGINX_TMP/uwsgi;
    scgi_temp_path $NGINX_TMP/scgi;
    server {
        listen 127.0.0.1:$PORT $listen_opts;
        root $NGINX_TMP/www;
        index index.html;
        location = /stub_status { stub_status; }
    }
}
EOF
    NGINX_CONF_DESC="worker_processes 1, worker_connections $wc, worker_rlimit_nofile $rl, multi_accept on, listen ${listen_opts:-(defaults)}, access_log off, keepalive_requests 1000000, keepalive_timeout 300s"
    taskset -c "$SERVER_CPU" "$NGINX" -p "$NGINX_TMP" -c "$NGINX_TMP/nginx.conf" -e "$NGINX_TMP/logs/error.log" &
    NGINX_PID=$!
    local curl_opts=()
    [[ "$listen_opts" == *http2* ]] && curl_opts=(--http2-prior-knowledge)
    for _ in $(seq 100); do
        curl "${curl_opts[@]}" -fsS --max-time 1 -o /dev/null "$URL" 2>/dev/null && break
        kill -0 "$NGINX_PID" 2>/dev/null || { cat "$NGINX_TMP/logs/error.log" >&2 || true; die "nginx did not start"; }
        sleep 0.1
    done
    local body
    body=$(curl "${curl_opts[@]}" -fsS --max-time 2 "$URL") || die "nginx does not answer on $URL"
    [[ "$body" == *"Hello,World!"* ]] || die "unexpected page from $URL"
    nginx_status >/dev/null || die "no stub_status on $STATUS_URL"
    log "nginx $NGINX_PID (worker $(pgrep -P "$NGINX_PID" | tr '\n' ' ')) on $URL, pinned to CPU $SERVER_CPU, page $PAGE_BYTES bytes"
}

# nginx_status: "active accepts handled requests" from stub_status (this poll counts as a request).
nginx_status() {
    local curl_opts=()
    [[ "${NGINX_CONF_DESC:-}" == *http2* ]] && curl_opts=(--http2-prior-knowledge)
    curl "${curl_opts[@]}" -fsS --max-time 2 "$STATUS_URL" | awk '
        /^Active connections/ { a = $3 }
        /^ *[0-9]+ +[0-9]+ +[0-9]+ *$/ { acc = $1; h = $2; r = $3 }
        END { if (r == "") exit 1; print a, acc, h, r }'
}

# ----------------------------------------------------------- generators ---
# measured PREFIX LIMIT CMD...: CMD pinned to $GEN_CPU under /usr/bin/time (user, sys, peak RSS
# of the largest waited-for process) and timeout; stdout/stderr to PREFIX.out/.err; nginx's
# stub_status before and after to PREFIX.nginx. With SAMPLE_EVERY=S (seconds), a sampler pinned to
# the server's CPU also polls stub_status every S s while CMD runs ("at T active accepts handled
# requests POLL_S", T = when the poll returned, seconds after CMD started), and "end T" records when
# CMD ended. Every poll is itself a request nginx counts. Returns the generator's exit status.
measured() {
    local prefix=$1 limit=$2 rc=0 sampler= t0
    shift 2
    printf 'before %s\n' "$(nginx_status || echo '? ? ? ?')" >"$prefix.nginx"
    t0=${EPOCHREALTIME/[.,]/}
    if [[ -n "${SAMPLE_EVERY:-}" ]]; then
        (
            every_us=$(python3 -c "print(int(float('$SAMPLE_EVERY') * 1e6))")
            next=$t0
            while :; do
                next=$(( next + every_us ))
                now=${EPOCHREALTIME/[.,]/}
                wait_us=$(( next - now ))
                (( wait_us > 0 )) && sleep "$(( wait_us / 1000000 )).$(printf '%06d' $(( wait_us % 1000000 )))"
                before=${EPOCHREALTIME/[.,]/}
                st=$(nginx_status || echo '? ? ? ?')
                after=${EPOCHREALTIME/[.,]/}
                printf 'at %s %s %s\n' "$(( (after - t0) / 1000 ))e-3" "$st" "$(( (after - before) / 1000 ))e-3"
                (( after > next )) && next=$after
            done
        ) >>"$prefix.nginx" 2>/dev/null &
        sampler=$!
        taskset -cp "$SERVER_CPU" "$sampler" >/dev/null 2>&1 || true
    fi
    # shellcheck disable=SC2086
    taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$prefix.time" \
        timeout -k 5 "$limit" "$@" >"$prefix.out" 2>"$prefix.err" || rc=$?
    if [[ -n "$sampler" ]]; then
        local t1=${EPOCHREALTIME/[.,]/}
        kill "$sampler" 2>/dev/null || true      # our own background subshell
        wait "$sampler" 2>/dev/null || true
        printf 'end %s\n' "$(( (t1 - t0) / 1000 ))e-3" >>"$prefix.nginx"
    fi
    printf 'after %s\n' "$(nginx_status || echo '? ? ? ?')" >>"$prefix.nginx"
    return $rc
}

# Machine facts for the report's meta.json.
machine_meta() {
    printf 'BENCH_CPU_MODEL=%s\n' "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    printf 'BENCH_KERNEL=%s\n' "$(uname -r)"
    printf 'BENCH_NOFILE=%s\n' "$(ulimit -n)"
    printf 'BENCH_SOMAXCONN=%s\n' "$(cat /proc/sys/net/core/somaxconn 2>/dev/null)"
    printf 'BENCH_PORT_RANGE=%s\n' "$(tr '\t' ' ' </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)"
    printf 'BENCH_TW_REUSE=%s\n' "$(cat /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null)"
    printf 'BENCH_V_NGINX=%s\n' "$("$NGINX" -v 2>&1 | sed -n 1p | sed 's/^nginx version: //')"
}

# write_meta FILE: every BENCH_* variable of the environment plus machine_meta as JSON.
write_meta() {
    local file=$1
    machine_meta >"$file.tmp"
    python3 - "$file" "$file.tmp" <<'PY'
import json, os, sys
meta = {k: v for k, v in sorted(os.environ.items()) if k.startswith("BENCH_")}
for line in open(sys.argv[2], encoding="utf-8"):
    k, _, v = line.rstrip("\n").partition("=")
    meta[k] = v
json.dump(meta, open(sys.argv[1], "w"), indent=1)
PY
    rm -f "$file.tmp"
}
