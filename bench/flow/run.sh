#!/usr/bin/env bash
# The 5-request "user flow" of issue #6 (seed 003): Stampede vs Artillery, Locust, drill and JMeter
# against Stampede's built-in httpbin-like target, closed loop, no think time.
#
#   bash bench/flow/run.sh                       # 20 VUs x 20 s, 1 round -> section in bench/RESULTS.md
#   ROUNDS=3 bash bench/flow/run.sh              # median of 3 rounds (order rotated each round)
#   QUICK=1 bash bench/flow/run.sh               # 5 VUs x 5 s smoke test -> bench/out/RESULTS-flow-quick.md
#   TOOLS="stampede locust" VUS=50 DURATION=30 bash bench/flow/run.sh
#   STAMPEDE_REV=HEAD bash bench/flow/run.sh     # build that commit (git archive) instead of the work tree
#   STAMPEDE_BIN=path bash bench/flow/run.sh     # that binary as is
#
# The target (`stampede target`) is pinned to CPU $SERVER_CPU (0), every generator to CPU $GEN_CPU (1).
# Peers are installed by this script, pinned, under $TOOLS_ROOT (~/.cache/stampede/tools); one that
# cannot be installed is skipped with a message. Each generator runs under bench/flow/measure.py:
# CPU = user + sys of its whole process tree (getrusage of the waited tree), peak RSS = peak of the
# sum of VmRSS over the tree, iterations = requests counted by the target (/stats) / 5.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FLOW="$ROOT/bench/flow"

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
    VUS=${VUS:-5}
    DURATION=${DURATION:-5}
    RESULTS=${RESULTS:-$ROOT/bench/out/RESULTS-flow-quick.md}
else
    VUS=${VUS:-20}
    DURATION=${DURATION:-20}
    RESULTS=${RESULTS:-$ROOT/bench/RESULTS.md}
fi
ROUNDS=${ROUNDS:-1}
TOOLS=${TOOLS:-"stampede artillery locust drill jmeter"}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
PAUSE=${PAUSE:-2}
TOOLS_ROOT=${TOOLS_ROOT:-$HOME/.cache/stampede/tools}
OUT_ROOT=${OUT_ROOT:-$ROOT/bench/out}
FLOW_SCENARIO=${FLOW_SCENARIO:-$ROOT/examples/user-flow.yaml}
FLOW_CSV=${FLOW_CSV:-$ROOT/examples/data/cities.csv}
# The file step 4 uploads: the one examples/user-flow.yaml uploads, else a stand-in.
FLOW_UPLOAD=${FLOW_UPLOAD:-$ROOT/examples/data/upload.json}
[[ -f "$FLOW_UPLOAD" ]] || FLOW_UPLOAD="$FLOW/upload.json"
ARTILLERY_VERSION=${ARTILLERY_VERSION:-2.0.34}
LOCUST_VERSION=${LOCUST_VERSION:-2.47.0}
DRILL_VERSION=${DRILL_VERSION:-0.9.1}
JMETER_VERSION=${JMETER_VERSION:-5.6.3}
# JMeter's own bin/jmeter defaults (heap, G1), as its non-GUI runs get them.
JMETER_JVM_ARGS=${JMETER_JVM_ARGS:-"-Xms1g -Xmx1g -XX:MaxMetaspaceSize=256m -XX:+UseG1GC -XX:MaxGCPauseMillis=100 -XX:G1ReservePercent=20"}

log() { printf '[flow %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ "$VUS" =~ ^[1-9][0-9]*$ ]] || die "VUS must be a positive integer"
[[ "$DURATION" =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
(( $(nproc) >= 2 )) || die "needs at least 2 CPUs (target on CPU $SERVER_CPU, generators on CPU $GEN_CPU)"

RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/flow-$RUN_ID"
mkdir -p "$RAW" "$TOOLS_ROOT" "$(dirname "$RESULTS")"
INSTALLS="$RAW/installs.tsv"
printf 'tool\tversion\tstatus\tseconds\tnote\n' >"$INSTALLS"

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
missing=()
command -v python3 >/dev/null || missing+=(python3)
command -v curl >/dev/null || missing+=(curl)
command -v taskset >/dev/null || missing+=(util-linux)
if (( ${#missing[@]} )); then apt_install "${missing[@]}" || die "cannot install ${missing[*]}"; fi

# record TOOL VERSION STATUS SECONDS NOTE
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$INSTALLS"; }
# remember DIR SECONDS NOTE: how long the install into DIR took, for later runs' reports
remember() { printf '%s s on %s: %s\n' "$2" "$(date -u +%Y-%m-%d)" "$3" >"$1/.install-info"; }
# cached TOOL VERSION DIR
cached() { record "$1" "$2" cached 0 "$(cat "$3/.install-info" 2>/dev/null | sed 's/^/installed in /')"; }

# Each install_* sets the tool's command variables or returns 1 (the tool is then skipped).
install_artillery() {
    local dir="$TOOLS_ROOT/artillery-$ARTILLERY_VERSION" t0=$SECONDS
    ARTILLERY="$dir/node_modules/.bin/artillery"
    if [[ -x "$ARTILLERY" && -f "$dir/.complete" ]]; then cached artillery "$ARTILLERY_VERSION" "$dir"; return 0; fi
    if ! command -v npm >/dev/null; then apt_install nodejs npm || { record artillery "$ARTILLERY_VERSION" failed 0 "no npm"; return 1; }; fi
    log "npm install artillery@$ARTILLERY_VERSION into $dir"
    rm -rf "$dir" && mkdir -p "$dir"
    # Artillery depends on its Playwright engine, whose install script downloads a browser from
    # outside the npm registry; the HTTP engine needs no browser.
    if ! (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 1800 npm install --prefix . --no-audit --no-fund --loglevel=error "artillery@$ARTILLERY_VERSION" >"$RAW/install-artillery.log" 2>&1); then
        record artillery "$ARTILLERY_VERSION" failed $((SECONDS - t0)) "npm install failed (install-artillery.log)"
        return 1
    fi
    touch "$dir/.complete"
    remember "$dir" $((SECONDS - t0)) "npm install"
    record artillery "$ARTILLERY_VERSION" installed $((SECONDS - t0)) "npm install"
}

install_locust() {
    local dir="$TOOLS_ROOT/locust-$LOCUST_VERSION" t0=$SECONDS
    LOCUST="$dir/venv/bin/locust"
    if [[ -x "$LOCUST" && -f "$dir/.complete" ]]; then cached locust "$LOCUST_VERSION" "$dir"; return 0; fi
    log "pip install locust==$LOCUST_VERSION into $dir/venv"
    rm -rf "$dir" && mkdir -p "$dir"
    if ! { python3 -m venv "$dir/venv" && timeout 1800 "$dir/venv/bin/pip" install -q --disable-pip-version-check \
            "locust==$LOCUST_VERSION"; } >"$RAW/install-locust.log" 2>&1; then
        record locust "$LOCUST_VERSION" failed $((SECONDS - t0)) "venv/pip failed (install-locust.log)"
        return 1
    fi
    touch "$dir/.complete"
    remember "$dir" $((SECONDS - t0)) "pip in a venv"
    record locust "$LOCUST_VERSION" installed $((SECONDS - t0)) "pip in a venv"
}

install_drill() {
    local dir="$TOOLS_ROOT/drill-$DRILL_VERSION" t0=$SECONDS
    DRILL="$dir/bin/drill"
    if [[ -x "$DRILL" ]]; then cached drill "$DRILL_VERSION" "$dir"; return 0; fi
    command -v cargo >/dev/null || { record drill "$DRILL_VERSION" failed 0 "no cargo"; return 1; }
    log "cargo install drill $DRILL_VERSION into $dir (a cold build takes several minutes)"
    if ! timeout 3600 cargo install drill --version "$DRILL_VERSION" --locked --root "$dir" --force \
            >"$RAW/install-drill.log" 2>&1; then
        record drill "$DRILL_VERSION" failed $((SECONDS - t0)) "cargo install failed (install-drill.log)"
        return 1
    fi
    remember "$dir" $((SECONDS - t0)) "cargo install --locked"
    record drill "$DRILL_VERSION" installed $((SECONDS - t0)) "cargo install --locked"
}

# JMeter from Maven Central: the jars of bench/flow/jmeter/pom.xml, laid out as a JMeter home.
install_jmeter() {
    local home="$TOOLS_ROOT/jmeter-$JMETER_VERSION" t0=$SECONDS tmp
    JMETER_HOME="$home"
    if [[ -f "$home/.complete" ]]; then cached jmeter "$JMETER_VERSION" "$home"; return 0; fi
    local need=()
    command -v java >/dev/null || need+=(default-jre-headless)
    command -v mvn >/dev/null || need+=(maven)
    command -v unzip >/dev/null || need+=(unzip)
    if (( ${#need[@]} )); then
        apt_install "${need[@]}" || { record jmeter "$JMETER_VERSION" failed 0 "cannot install ${need[*]}"; return 1; }
    fi
    log "mvn: resolving JMeter $JMETER_VERSION from Maven Central into $home"
    tmp="$home.tmp"
    rm -rf "$tmp" "$home" && mkdir -p "$tmp/bin" "$tmp/lib/ext" "$tmp/lib/junit"
    if ! timeout 1800 mvn -q -B -f "$FLOW/jmeter/pom.xml" -Djmeter.version="$JMETER_VERSION" \
            dependency:copy-dependencies -DoutputDirectory="$tmp/all" >"$RAW/install-jmeter.log" 2>&1; then
        record jmeter "$JMETER_VERSION" failed $((SECONDS - t0)) "mvn dependency:copy-dependencies failed (install-jmeter.log)"
        return 1
    fi
    (
        set -e
        cd "$tmp"
        unzip -q -o "all/ApacheJMeter_config-$JMETER_VERSION.jar" 'bin/*' -d .
        mv "all/ApacheJMeter-$JMETER_VERSION.jar" bin/ApacheJMeter.jar
        for m in core http components functions; do mv "all/ApacheJMeter_$m-$JMETER_VERSION.jar" lib/ext/; done
        rm -f "all/ApacheJMeter_config-$JMETER_VERSION.jar"
        mv all/*.jar lib/
        rmdir all
    ) >>"$RAW/install-jmeter.log" 2>&1 || { record jmeter "$JMETER_VERSION" failed $((SECONDS - t0)) "layout failed"; return 1; }
    touch "$tmp/.complete"
    remember "$tmp" $((SECONDS - t0)) "mvn dependency:copy-dependencies"
    mv "$tmp" "$home"
    record jmeter "$JMETER_VERSION" installed $((SECONDS - t0)) "mvn dependency:copy-dependencies"
}

install_stampede() {
    local t0=$SECONDS
    if [[ -n "${STAMPEDE_BIN:-}" ]]; then
        STAMPEDE="$STAMPEDE_BIN"
        STAMPEDE_DESC="binary $STAMPEDE_BIN"
    elif [[ -n "${STAMPEDE_REV:-}" ]]; then
        # That commit's tree (git archive), so edits in the work tree do not leak in; one source
        # folder, refreshed per commit, and CARGO_TARGET_DIR (default bench/out/target) for the build.
        local sha src target
        sha=$(git -C "$ROOT" rev-parse --verify "${STAMPEDE_REV}^{commit}") || return 1
        src="$OUT_ROOT/flow-stampede-src"
        target="${CARGO_TARGET_DIR:-$OUT_ROOT/target}"
        if [[ "$(cat "$src/.bench-commit" 2>/dev/null)" != "$sha" ]]; then
            rm -rf "$src" && mkdir -p "$src"
            git -C "$ROOT" archive "$sha" | tar -x -m -C "$src"
            echo "$sha" >"$src/.bench-commit"
        fi
        log "cargo build --release -p stampede at ${sha:0:12} (in $src)"
        (cd "$src" && CARGO_TARGET_DIR="$target" timeout 3600 cargo build --release -q -p stampede) || return 1
        STAMPEDE="$target/release/stampede"
        STAMPEDE_DESC="commit ${sha:0:12}"
    else
        log "cargo build --release -p stampede (work tree)"
        (cd "$ROOT" && timeout 3600 cargo build --release -q -p stampede) || return 1
        STAMPEDE="${CARGO_TARGET_DIR:-$ROOT/target}/release/stampede"
        STAMPEDE_DESC="work tree at $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
        if ! git -C "$ROOT" diff --quiet HEAD -- crates Cargo.toml Cargo.lock 2>/dev/null; then
            STAMPEDE_DESC+=" with uncommitted changes"
        fi
    fi
    [[ -x "$STAMPEDE" ]] || { log "no stampede binary at $STAMPEDE"; return 1; }
    record stampede "$("$STAMPEDE" --version | cut -d' ' -f2)" built $((SECONDS - t0)) "$STAMPEDE_DESC"
}

# The target is Stampede's, so Stampede is needed whether or not it is one of the generators.
install_stampede || die "cannot build stampede (needed for the target)"

declare -A VERSION
VERSION[stampede]="$("$STAMPEDE" --version | cut -d' ' -f2)"
VERSION[artillery]=$ARTILLERY_VERSION
VERSION[locust]=$LOCUST_VERSION
VERSION[drill]=$DRILL_VERSION
VERSION[jmeter]=$JMETER_VERSION

read -ra wanted <<<"$TOOLS"
tools=()
SKIPPED="$RAW/skipped.tsv"
: >"$SKIPPED"
for tool in "${wanted[@]}"; do
    case "$tool" in
        stampede)
            if [[ -f "$FLOW_SCENARIO" ]]; then tools+=(stampede)
            else log "skipping stampede: no scenario $FLOW_SCENARIO yet"; printf 'stampede\tno scenario file %s\n' "${FLOW_SCENARIO#"$ROOT"/}" >>"$SKIPPED"; fi ;;
        artillery|locust|drill|jmeter)
            if "install_$tool"; then tools+=("$tool")
            else log "skipping $tool: it could not be installed (see $INSTALLS)"; printf '%s\tnot installed (see installs.tsv)\n' "$tool" >>"$SKIPPED"; fi ;;
        *) die "unknown tool $tool (stampede artillery locust drill jmeter)" ;;
    esac
done
(( ${#tools[@]} )) || die "no tool to run"

# ----------------------------------------------------------------- data ---
if [[ -f "$FLOW_CSV" ]]; then
    CSV="$FLOW_CSV"
    CSV_DESC="${FLOW_CSV#"$ROOT"/}"
else
    CSV="$RAW/cities.csv"
    log "no $FLOW_CSV: generating a stand-in with the same header ($CSV)"
    python3 - "$CSV" <<'PY'
import csv, random, sys
random.seed(3)
names = ["andorra la vella", "sao paulo", "zurich", "koln", "malaga", "reykjavik", "krakow", "orebro", "las palmas"]
accents = ["Andorra la Vella", "São Paulo", "Zürich", "Köln", "Málaga", "Reykjavík", "Kraków", "Örebro", "Las Palmas"]
with open(sys.argv[1], "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["Country", "City", "AccentCity", "Region", "Population", "Latitude", "Longitude"])
    for i in range(10000):
        k = i % len(names)
        w.writerow([random.choice(["ad", "br", "ch", "de", "es", "is", "pl", "se"]), f"{names[k]} {i}", f"{accents[k]} {i}",
                    f"{i % 90:02d}", random.randint(1000, 9000000), f"{random.uniform(-60, 70):.7f}", f"{random.uniform(-180, 180):.7f}"])
PY
    CSV_DESC="a generated stand-in (examples/data/cities.csv was missing)"
fi
CSV_ROWS=$(( $(wc -l <"$CSV") - 1 ))
head -n1 "$CSV" | grep -q '^Country,City,AccentCity' || die "$CSV: header must start with Country,City,AccentCity"

# ---------------------------------------------------------------- target ---
TARGET_PID=
cleanup() {
    if [[ -n "$TARGET_PID" ]] && kill -0 "$TARGET_PID" 2>/dev/null; then
        kill -INT "$TARGET_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$TARGET_PID" 2>/dev/null || true
        wait "$TARGET_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
taskset -c "$SERVER_CPU" "$STAMPEDE" target --port "$PORT" >"$RAW/target.log" 2>&1 &
TARGET_PID=$!
for _ in $(seq 100); do
    curl -fsS --max-time 1 -o /dev/null "$BASE/stats" 2>/dev/null && break
    kill -0 "$TARGET_PID" 2>/dev/null || { cat "$RAW/target.log" >&2; die "the target did not start"; }
    sleep 0.1
done
curl -fsS --max-time 2 "$BASE/stats" | grep -q requests || die "no /stats on $BASE"
# The shapes the flow extracts from, checked once.
curl -fsS --max-time 2 -H 'authorization: bearer jwt' "$BASE/get" | grep -q '"Authorization": "bearer jwt"' \
    || die "the target's /get does not echo headers.Authorization"
curl -fsS --max-time 2 -F key21=key22 -F "file=@$FLOW_UPLOAD;type=application/json" "$BASE/post" | grep -q '"files"' \
    || die "the target's /post does not echo multipart files"
log "target $TARGET_PID on $BASE, pinned to CPU $SERVER_CPU; CSV $CSV ($CSV_ROWS rows)"

# Files the peers need in the run folder: drill's plan (with a prebuilt multipart body).
BOUNDARY=stampedeflowboundary7MA4YWxkTrZu0gW
python3 - "$FLOW_UPLOAD" "$RAW/drill-upload.multipart" "$BOUNDARY" <<'PY'
import os, sys
src, dst, b = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
body = (f"--{b}\r\nContent-Disposition: form-data; name=\"key21\"\r\n\r\nkey22\r\n"
        f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{os.path.basename(src)}\"\r\n"
        "Content-Type: application/json\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
open(dst, "wb").write(body)
PY
sed -e "s|@BASE@|$BASE|" -e "s|@VUS@|$VUS|" -e "s|@ITERATIONS@|1000000000|" -e "s|@CSV@|$CSV|g" \
    -e "s|@MULTIPART_FILE@|$RAW/drill-upload.multipart|" -e "s|@BOUNDARY@|$BOUNDARY|g" \
    "$FLOW/drill.yml.in" >"$RAW/drill.yml"

# ------------------------------------------------------------- generators ---
LIMIT=$((DURATION + 90))   # hard stop: the duration plus start-up (JVM, node) and shutdown

# run_one TOOL ROUND: runs TOOL under measure.py; files go to $RAW/TOOL-rROUND.*
run_one() {
    local tool=$1 round=$2 prefix interrupt=() cmd=() envs=()
    prefix="$RAW/$tool-r$round"
    case "$tool" in
        stampede)
            cmd=("$STAMPEDE" run "$FLOW_SCENARIO" --vus "$VUS" --duration "${DURATION}s" --threads 1
                 --base-url "$BASE" --quiet --out "$prefix.report.json") ;;
        artillery)
            local overrides
            overrides=$(python3 -c 'import json, sys
print(json.dumps({"config": {"phases": [{"duration": 1, "arrivalCount": int(sys.argv[1])}],
    "payload": [{"path": sys.argv[2], "fields": ["Country", "City", "AccentCity"], "skipHeader": True,
                 "loadAll": True, "name": "cities"}]}}))' "$VUS" "$CSV")
            envs=(FLOW_DURATION="$DURATION" ARTILLERY_DISABLE_TELEMETRY=true DO_NOT_TRACK=1 NO_UPDATE_NOTIFIER=1)
            cmd=("$ARTILLERY" run "$FLOW/artillery.yml" --target "$BASE" --overrides "$overrides"
                 --output "$prefix.report.json") ;;
        locust)
            envs=(FLOW_CSV="$CSV" FLOW_UPLOAD="$FLOW_UPLOAD")
            cmd=("$LOCUST" -f "$FLOW/locustfile.py" --headless -u "$VUS" -r "$VUS" -t "${DURATION}s"
                 -H "$BASE" --only-summary) ;;
        drill)
            interrupt=(--interrupt-after "$DURATION")
            cmd=("$DRILL" --benchmark "$RAW/drill.yml" --quiet) ;;
        jmeter)
            # shellcheck disable=SC2206
            cmd=(java $JMETER_JVM_ARGS -jar "$JMETER_HOME/bin/ApacheJMeter.jar" -n -t "$FLOW/flow.jmx"
                 -Jhost=127.0.0.1 -Jport="$PORT" -Jvus="$VUS" -Jduration="$DURATION" -Jcsv="$CSV"
                 -Jupload="$FLOW_UPLOAD" -j "$prefix.jmeter.log") ;;
    esac
    (cd "$RAW" && env "${envs[@]}" python3 "$FLOW/measure.py" --out "$prefix" --cpu "$GEN_CPU" --limit "$LIMIT" \
        "${interrupt[@]}" --stats-url "$BASE/stats" --stdout "$prefix.out" --stderr "$prefix.err" -- "${cmd[@]}") \
        2>"$prefix.measure.err" || log "  measure.py failed for $tool (see $prefix.measure.err)"
    python3 "$FLOW/summarize.py" --one "$tool" "$prefix" >&2 || true
}

log "${#tools[@]} tool(s) {${tools[*]}} x $ROUNDS round(s), $VUS VUs x ${DURATION}s each; raw data in $RAW"
LOAD_START=$(cat /proc/loadavg)
MANIFEST="$RAW/manifest.tsv"
printf 'round\ttool\tprefix\tload1_after\n' >"$MANIFEST"
for (( r = 1; r <= ROUNDS; r++ )); do
    for (( i = 0; i < ${#tools[@]}; i++ )); do
        tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
        log "round $r/$ROUNDS: $tool"
        run_one "$tool" "$r"
        printf '%s\t%s\t%s\t%s\n' "$r" "$tool" "$RAW/$tool-r$r" "$(cut -d' ' -f1 /proc/loadavg)" >>"$MANIFEST"
        sleep "$PAUSE"
    done
done
LOAD_END=$(cat /proc/loadavg)
cleanup
TARGET_PID=

# ----------------------------------------------------------------- report ---
cmdline="bash bench/flow/run.sh"
[[ "$QUICK" == 1 ]] && cmdline="QUICK=1 $cmdline"
[[ "$ROUNDS" != 1 ]] && cmdline="ROUNDS=$ROUNDS $cmdline"
[[ "$TOOLS" != "stampede artillery locust drill jmeter" ]] && cmdline="TOOLS=\"$TOOLS\" $cmdline"
if [[ "$QUICK" == 1 ]]; then
    [[ "$VUS" != 5 ]] && cmdline="VUS=$VUS $cmdline"; [[ "$DURATION" != 5 ]] && cmdline="DURATION=$DURATION $cmdline"
else
    [[ "$VUS" != 20 ]] && cmdline="VUS=$VUS $cmdline"; [[ "$DURATION" != 20 ]] && cmdline="DURATION=$DURATION $cmdline"
fi
if [[ -n "${STAMPEDE_BIN:-}" ]]; then cmdline="STAMPEDE_BIN=… $cmdline"
elif [[ -n "${STAMPEDE_REV:-}" ]]; then cmdline="STAMPEDE_REV=$STAMPEDE_REV $cmdline"; fi

FLOW_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" FLOW_CMDLINE="$cmdline" FLOW_VUS="$VUS" FLOW_DURATION="$DURATION" \
FLOW_ROUNDS="$ROUNDS" FLOW_SERVER_CPU="$SERVER_CPU" FLOW_GEN_CPU="$GEN_CPU" FLOW_LOAD_START="$LOAD_START" \
FLOW_LOAD_END="$LOAD_END" FLOW_RAW="${RAW#"$ROOT"/}" FLOW_CSV_DESC="$CSV_DESC" FLOW_CSV_ROWS="$CSV_ROWS" \
FLOW_STAMPEDE_DESC="${STAMPEDE_DESC:-}" FLOW_SCENARIO_DESC="${FLOW_SCENARIO#"$ROOT"/}" \
FLOW_UPLOAD_BYTES="$(stat -c %s "$FLOW_UPLOAD")" FLOW_UPLOAD_DESC="${FLOW_UPLOAD#"$ROOT"/}" FLOW_JVM_ARGS="$JMETER_JVM_ARGS" \
FLOW_V_JAVA="$(java -version 2>&1 | head -n1 || true)" FLOW_V_NODE="$(node --version 2>/dev/null || true)" \
FLOW_V_PYTHON="$(python3 --version 2>&1)" \
FLOW_VERSIONS="$(for t in "${!VERSION[@]}"; do printf '%s=%s ' "$t" "${VERSION[$t]}"; done)" \
    python3 -c 'import json, os, sys
json.dump({k: v for k, v in sorted(os.environ.items()) if k.startswith("FLOW_")}, open(sys.argv[1], "w"), indent=1)' \
    "$RAW/meta.json"
python3 "$FLOW/summarize.py" --raw "$RAW" --results "$RESULTS"
log "wrote $RESULTS"
