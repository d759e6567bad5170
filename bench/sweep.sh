#!/usr/bin/env bash
# Connection sweep (issues #7 and #36, like seed 000): stampede vs wrk, oha and JMeter (and
# stampede-base: another build, STAMPEDE_BASE_BIN) against one pinned nginx
# worker at 1 … 15,000 keep-alive connections, closed model.
#
#   bash bench/sweep.sh                         # 3 rounds x (5 s warm-up + 10 s measured) per tool and level
#   QUICK=1 bash bench/sweep.sh                 # smoke test: 1 round x (2 + 3) s -> bench/out/RESULTS-sweep-quick.md
#   CONNS="1 1000 15000" TOOLS="stampede wrk" bash bench/sweep.sh
#   STAMPEDE_BIN=path bash bench/sweep.sh       # that binary (copied into the run folder first)
#
# nginx (1 worker, worker_connections/worker_rlimit_nofile from the open-file limit) on CPU
# $SERVER_CPU, every generator on CPU $GEN_CPU with one thread, under /usr/bin/time. req/s is
# counted by nginx (stub_status) over the measured window after the warm-up, the same way for
# every tool; the tools' own req/s, p99 and errors come from their output. See bench/README.md.
set -euo pipefail
BENCH_TAG=sweep
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
    ROUNDS=${ROUNDS:-1}; WARMUP=${WARMUP:-2}; MEASURE=${MEASURE:-3}
    RESULTS=${RESULTS:-$OUT_ROOT/RESULTS-sweep-quick.md}
else
    ROUNDS=${ROUNDS:-3}; WARMUP=${WARMUP:-5}; MEASURE=${MEASURE:-10}
    RESULTS=${RESULTS:-$BENCH/RESULTS.md}
fi
CONNS=${CONNS:-"1 10 50 200 1000 5000 15000"}
TOOLS=${TOOLS:-"stampede wrk jmeter"}
for v in ROUNDS WARMUP MEASURE; do [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
# Each generator runs RUN_S s; nginx's stub_status is polled every SAMPLE_EVERY s, and the measured
# window runs from WARMUP s after the generator's first request for MEASURE s (3 s to spare for a
# slow start, e.g. the JVM's, and for polls, which wait about a second at 15,000 connections).
RUN_S=$(( WARMUP + MEASURE + 3 ))
SAMPLE_EVERY=${SAMPLE_EVERY:-0.5}

need_debian wrk:wrk
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/sweep-$RUN_ID"
mkdir -p "$RAW" "$(dirname "$RESULTS")"
select_stampede "$RAW"

read -ra wanted <<<"$TOOLS"
tools=()
SKIPPED=""
for t in "${wanted[@]}"; do
    case "$t" in
        stampede|wrk) tools+=("$t") ;;
        stampede-base) [[ -n "${STAMPEDE_BASE_BIN:-}" ]] || die "stampede-base needs STAMPEDE_BASE_BIN"; tools+=("$t") ;;
        oha) ensure_oha || die "cannot install oha $OHA_VERSION"; tools+=("$t") ;;
        jmeter)
            if ensure_jmeter; then tools+=(jmeter)
            else log "skipping jmeter: it could not be installed"; SKIPPED+="jmeter: could not be installed; "; fi ;;
        *) die "unknown tool $t (stampede stampede-base wrk oha jmeter)" ;;
    esac
done
(( ${#tools[@]} )) || die "no tool to run"

raise_nofile
read -ra levels <<<"$CONNS"
maxc=0; for n in "${levels[@]}"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "bad level $n"; (( n > maxc )) && maxc=$n; done
(( NOFILE >= maxc + 200 )) || log "warning: open-file limit $NOFILE (hard $(ulimit -Hn)) is below $maxc connections + 200"

# nginx: listen backlog up to somaxconn so thousands of connects at once are not dropped.
BACKLOG=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo 511)
start_nginx "backlog=$BACKLOG"

SCENARIO="$BENCH/scenario.yaml"
JMX="$BENCH/jmeter/sweep.jmx"
JPROPS="$BENCH/jmeter/sweep.properties"
gen_cmd() {   # TOOL N PREFIX -> the command line (words)
    local tool=$1 n=$2 prefix=$3
    case "$tool" in
        stampede) echo "$STAMPEDE run $SCENARIO --threads 1 --vus $n --duration ${RUN_S}s --quiet --out $prefix.json --base-url http://127.0.0.1:$PORT" ;;
        stampede-base) echo "$STAMPEDE_BASE_BIN run $SCENARIO --threads 1 --vus $n --duration ${RUN_S}s --quiet --out $prefix.json --base-url http://127.0.0.1:$PORT" ;;
        wrk) echo "wrk -t1 -c$n -d${RUN_S}s --timeout 10s --latency $URL" ;;
        oha) echo "$OHA -z ${RUN_S}s -c $n --worker-threads 1 --no-tui --output-format json $URL" ;;
        jmeter) echo "java $JMETER_JVM_ARGS -jar $JMETER_HOME/bin/ApacheJMeter.jar -n -t $JMX -q $JPROPS -Jhost=127.0.0.1 -Jport=$PORT -Jthreads=$n -Jrampup=1 -Jduration=$RUN_S -l $prefix.jtl -j $prefix.jmeter.log" ;;
    esac
}

MANIFEST="$RAW/manifest.tsv"
printf 'conns\tround\ttool\tprefix\trc\tload1_after\n' >"$MANIFEST"
runs=$(( ${#tools[@]} * ${#levels[@]} * ROUNDS ))
log "$runs runs of ${RUN_S}s (${MEASURE}s measured after ${WARMUP}s of warm-up): connections {$CONNS} x tools {${tools[*]}} x $ROUNDS round(s); open files $NOFILE; raw data in $RAW"
LOAD_START=$(cat /proc/loadavg)
T_START=$SECONDS
taskset -c "$GEN_CPU" timeout 10 wrk -t1 -c10 -d1s "$URL" >/dev/null 2>&1 || true   # warm nginx up
for n in "${levels[@]}"; do
    for (( r = 1; r <= ROUNDS; r++ )); do
        for (( i = 0; i < ${#tools[@]}; i++ )); do
            tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
            prefix="$RAW/c${n}-r${r}-${tool}"
            log "c=$n round $r/$ROUNDS $tool"
            ss -s >"$prefix.ss-before" 2>/dev/null || true
            rc=0
            # shellcheck disable=SC2046
            SAMPLE_EVERY=$SAMPLE_EVERY measured "$prefix" $(( RUN_S + 150 )) $(gen_cmd "$tool" "$n" "$prefix") || rc=$?
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$r" "$tool" "$prefix" "$rc" "$(cut -d' ' -f1 /proc/loadavg)" >>"$MANIFEST"
            (( rc == 0 )) || log "  $tool exited with $rc (see $prefix.err)"
            python3 "$BENCH/sections.py" one sweep "$tool" "$prefix" --warmup "$WARMUP" --measure "$MEASURE" >&2 || true
            # Let the closed connections drain before the next run (TIME_WAIT, nginx's close).
            for _ in $(seq 30); do
                a=$(nginx_status | cut -d' ' -f1) || break
                (( a <= 1 )) && break
                sleep 0.5
            done
            sleep "$PAUSE"
        done
    done
done
LOAD_END=$(cat /proc/loadavg)
stop_nginx

cmdline="bash bench/sweep.sh"
[[ "$QUICK" == 1 ]] && cmdline="QUICK=1 $cmdline"
if [[ "$QUICK" == 1 ]]; then d="1 2 3"; else d="3 5 10"; fi
read -r dr dw dm <<<"$d"
[[ "$ROUNDS" != "$dr" ]] && cmdline="ROUNDS=$ROUNDS $cmdline"
[[ "$WARMUP" != "$dw" ]] && cmdline="WARMUP=$WARMUP $cmdline"
[[ "$MEASURE" != "$dm" ]] && cmdline="MEASURE=$MEASURE $cmdline"
[[ "$CONNS" != "1 10 50 200 1000 5000 15000" ]] && cmdline="CONNS=\"$CONNS\" $cmdline"
[[ "$TOOLS" != "stampede wrk jmeter" ]] && cmdline="TOOLS=\"$TOOLS\" $cmdline"
[[ -n "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_BIN=${STAMPEDE_BIN#"$ROOT"/} $cmdline"
[[ " $TOOLS " == *" stampede-base "* ]] && cmdline="STAMPEDE_BASE_BIN=${STAMPEDE_BASE_BIN#"$ROOT"/} $cmdline"
[[ -z "${STAMPEDE_BIN:-}" && -n "${STAMPEDE_REV:-}" ]] && cmdline="STAMPEDE_REV=$STAMPEDE_REV $cmdline"

export BENCH_PART=sweep BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_CMDLINE="$cmdline" \
    BENCH_ROUNDS="$ROUNDS" BENCH_WARMUP="$WARMUP" BENCH_MEASURE="$MEASURE" BENCH_RUN_S="$RUN_S" BENCH_SAMPLE_EVERY="$SAMPLE_EVERY" BENCH_LIMIT_S=$(( RUN_S + 150 )) BENCH_QUICK="$QUICK" \
    BENCH_SERVER_CPU="$SERVER_CPU" BENCH_GEN_CPU="$GEN_CPU" BENCH_PAGE_BYTES="$PAGE_BYTES" \
    BENCH_NGINX_CONF="$NGINX_CONF_DESC" BENCH_LOAD_START="$LOAD_START" BENCH_LOAD_END="$LOAD_END" \
    BENCH_ELAPSED_S=$(( SECONDS - T_START )) BENCH_RAW="${RAW#"$ROOT"/}" BENCH_SKIPPED="$SKIPPED" \
    BENCH_V_STAMPEDE="$("$STAMPEDE" --version 2>&1 | sed -n 1p) ($STAMPEDE_DESC)" \
    BENCH_V_WRK="$(wrk -v 2>&1 | sed -n 1p | cut -d' ' -f1-2)" \
    BENCH_V_OHA="$( [[ -n "${OHA:-}" ]] && "$OHA" --version 2>&1 | sed -n 1p)" \
    BENCH_V_JMETER="$( [[ " ${tools[*]} " == *" jmeter "* ]] && echo "JMeter $JMETER_VERSION ($(java -version 2>&1 | sed -n 1p))")" \
    BENCH_JVM_ARGS="$JMETER_JVM_ARGS" \
    BENCH_CMD_STAMPEDE="taskset -c $GEN_CPU $(gen_cmd stampede N report | sed -e "s|$RAW/stampede|stampede|" -e "s|$ROOT/||g" -e "s|:$PORT|:PORT|")" \
    BENCH_CMD_WRK="taskset -c $GEN_CPU $(gen_cmd wrk N x | sed -e "s|:$PORT|:PORT|")" \
    BENCH_CMD_OHA="$( [[ -n "${OHA:-}" ]] && echo "taskset -c $GEN_CPU $(gen_cmd oha N x | sed -e "s|$TOOLS_ROOT|~/.cache/stampede/tools|" -e "s|:$PORT|:PORT|")")" \
    BENCH_CMD_STAMPEDE_BASE="$( [[ -n "${STAMPEDE_BASE_BIN:-}" ]] && echo "taskset -c $GEN_CPU $(gen_cmd stampede-base N report | sed -e "s|$RAW/||g" -e "s|$ROOT/||g" -e "s|:$PORT|:PORT|")")" \
    BENCH_CMD_JMETER="$( [[ -n "${JMETER_HOME:-}" ]] && echo "taskset -c $GEN_CPU $(gen_cmd jmeter N "$RAW/out" | sed -e "s|$TOOLS_ROOT|~/.cache/stampede/tools|" -e "s|$RAW/||g" -e "s|$ROOT/||g" -e "s|$PORT|PORT|")")"
write_meta "$RAW/meta.json"
python3 "$BENCH/sections.py" write sweep --raw "$RAW" --results "$RESULTS"
log "wrote $RESULTS"
