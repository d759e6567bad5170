#!/usr/bin/env bash
# Open workload model (issue #7): stampede constant-arrival-rate vs oha -q --latency-correction vs
# vegeta attack -rate, against one pinned nginx worker: at a fixed 20,000 req/s and at each tool's
# highest sustainable rate (searched first).
#
#   bash bench/open.sh                     # search (5 s steps) + 3 rounds x 10 s at 20k and at each max
#   QUICK=1 bash bench/open.sh             # smoke test: 1 round x 3 s, coarse search -> bench/out/RESULTS-open-quick.md
#   TOOLS="stampede oha" bash bench/open.sh
#   STAMPEDE_BIN=path bash bench/open.sh   # that binary (copied into the run folder first)
#
# A rate is sustained when the tool's answered 2xx/3xx requests reach 99 % of rate x duration
# with no errors. The search goes up from SEARCH_START in SEARCH_STEP steps to the first rate not
# sustained, then tries half a step between (down from SEARCH_START when that already fails).
set -euo pipefail
BENCH_TAG=open
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
    ROUNDS=${ROUNDS:-1}; DURATION=${DURATION:-3}; SEARCH_DURATION=${SEARCH_DURATION:-2}; SEARCH_STEP=${SEARCH_STEP:-20000}
    RESULTS=${RESULTS:-$OUT_ROOT/RESULTS-open-quick.md}
else
    ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-10}; SEARCH_DURATION=${SEARCH_DURATION:-5}; SEARCH_STEP=${SEARCH_STEP:-5000}
    RESULTS=${RESULTS:-$BENCH/RESULTS.md}
fi
FIXED_RATE=${FIXED_RATE:-20000}
SEARCH_START=${SEARCH_START:-$FIXED_RATE}
SEARCH_MAX=${SEARCH_MAX:-200000}
OPEN_CONNS=${OPEN_CONNS:-50}             # oha -c, vegeta -max-workers, stampede preAllocatedVUs
OPEN_MAX_VUS=${OPEN_MAX_VUS:-$OPEN_CONNS} # stampede maxVUs: the same connection count as the peers (issue #17)
TOOLS=${TOOLS:-"stampede oha vegeta"}
for v in ROUNDS DURATION SEARCH_DURATION SEARCH_STEP FIXED_RATE SEARCH_START SEARCH_MAX OPEN_CONNS OPEN_MAX_VUS; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"
done

RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/open-$RUN_ID"
mkdir -p "$RAW" "$(dirname "$RESULTS")"
select_stampede "$RAW"

read -ra wanted <<<"$TOOLS"
tools=()
SKIPPED=""
for t in "${wanted[@]}"; do
    case "$t" in
        stampede) tools+=(stampede) ;;
        oha) if ensure_oha; then tools+=(oha); else log "skipping oha: not installed"; SKIPPED+="oha: could not be installed; "; fi ;;
        vegeta) if ensure_vegeta; then tools+=(vegeta); else log "skipping vegeta: not installed"; SKIPPED+="vegeta: could not be installed; "; fi ;;
        *) die "unknown tool $t (stampede oha vegeta)" ;;
    esac
done
(( ${#tools[@]} )) || die "no tool to run"

raise_nofile
start_nginx ""

# stampede's scenario for RATE and SECONDS (the same GET of / as bench/scenario.yaml).
scenario() {
    local rate=$1 secs=$2 f="$RAW/open-$1-$2s.yaml"
    [[ -f "$f" ]] || cat >"$f" <<EOF
name: open-bench
baseUrl: http://127.0.0.1:8089
load:
  executor: constant-arrival-rate
  rate: $rate
  timeUnit: 1s
  duration: ${secs}s
  preAllocatedVUs: $OPEN_CONNS
  maxVUs: $OPEN_MAX_VUS
scenarios:
  - name: get
    steps:
      - name: index
        request: {method: GET, url: "{{baseUrl}}/"}
EOF
    echo "$f"
}

gen_cmd() {   # TOOL RATE SECONDS PREFIX -> a bash command line
    local tool=$1 rate=$2 secs=$3 prefix=$4
    case "$tool" in
        stampede) echo "$STAMPEDE run $(scenario "$rate" "$secs") --threads 1 --quiet --out $prefix.json --base-url http://127.0.0.1:$PORT" ;;
        oha) echo "$OHA -q $rate -z ${secs}s -c $OPEN_CONNS --latency-correction --worker-threads 1 --no-tui --output-format json $URL" ;;
        vegeta) echo "echo 'GET $URL' | $VEGETA attack -rate=$rate/1s -duration=${secs}s -max-workers=$OPEN_CONNS -timeout=10s | $VEGETA report -type=json" ;;
    esac
}

MANIFEST="$RAW/manifest.tsv"
printf 'kind\trate\tseconds\tround\ttool\tprefix\trc\tload1_after\n' >"$MANIFEST"
# run_one KIND TOOL RATE SECONDS ROUND -> exit 0 when the rate was sustained
run_one() {
    local kind=$1 tool=$2 rate=$3 secs=$4 round=$5 prefix rc=0
    prefix="$RAW/$kind-$rate-r$round-$tool"
    measured "$prefix" $(( secs + 40 )) bash -c "$(gen_cmd "$tool" "$rate" "$secs" "$prefix")" || rc=$?
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$rate" "$secs" "$round" "$tool" "$prefix" "$rc" \
        "$(cut -d' ' -f1 /proc/loadavg)" >>"$MANIFEST"
    (( rc == 0 )) || log "  $tool exited with $rc (see $prefix.err)"
    python3 "$BENCH/sections.py" one open "$tool" "$prefix" >&2 || true
    sleep "$PAUSE"
    python3 "$BENCH/sections.py" verdict "$tool" "$prefix" "$rate" "$secs" >&2
}

LOAD_START=$(cat /proc/loadavg)
T_START=$SECONDS
taskset -c "$GEN_CPU" timeout 10 wrk -t1 -c10 -d1s "$URL" >/dev/null 2>&1 || true   # warm nginx up

# ---- search: each tool's highest sustained rate
declare -A MAXRATE
for tool in "${tools[@]}"; do
    best=0
    failed_at=
    rate=$SEARCH_START
    log "search: $tool from $rate req/s, steps of $SEARCH_STEP, ${SEARCH_DURATION}s each"
    if run_one search "$tool" "$rate" "$SEARCH_DURATION" 1; then
        best=$rate
        while (( rate + SEARCH_STEP <= SEARCH_MAX )); do
            rate=$(( rate + SEARCH_STEP ))
            if run_one search "$tool" "$rate" "$SEARCH_DURATION" 1; then best=$rate; else break; fi
        done
        # half a step between the last sustained rate and the first that was not
        if (( rate != best )); then
            half=$(( best + SEARCH_STEP / 2 ))
            run_one search "$tool" "$half" "$SEARCH_DURATION" 1 && best=$half
        fi
    else
        # down: a step at a time (halving once a step would reach 0), until sustained or < 1,000
        while :; do
            if (( rate > SEARCH_STEP )); then rate=$(( rate - SEARCH_STEP )); else rate=$(( rate / 2 )); fi
            (( rate >= 1000 )) || break
            if run_one search "$tool" "$rate" "$SEARCH_DURATION" 1; then best=$rate; break; fi
            failed_at=$rate
        done
        # half a step up from there, below the last rate that failed
        failed_at=${failed_at:-$SEARCH_START}
        half=$(( best + SEARCH_STEP / 2 ))
        if (( best > 0 && half < failed_at )); then
            run_one search "$tool" "$half" "$SEARCH_DURATION" 1 && best=$half
        fi
    fi
    MAXRATE[$tool]=$best
    log "search: $tool sustained up to $best req/s"
done

# ---- measured rounds: the fixed rate and each tool's own highest, order rotated each round
for (( r = 1; r <= ROUNDS; r++ )); do
    for (( i = 0; i < ${#tools[@]}; i++ )); do
        tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
        log "round $r/$ROUNDS $tool at $FIXED_RATE req/s"
        run_one fixed "$tool" "$FIXED_RATE" "$DURATION" "$r" || true
    done
    for (( i = 0; i < ${#tools[@]}; i++ )); do
        tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
        (( ${MAXRATE[$tool]} > 0 )) || continue
        log "round $r/$ROUNDS $tool at its highest, ${MAXRATE[$tool]} req/s"
        run_one max "$tool" "${MAXRATE[$tool]}" "$DURATION" "$r" || true
    done
done
LOAD_END=$(cat /proc/loadavg)
stop_nginx

cmdline="bash bench/open.sh"
[[ "$QUICK" == 1 ]] && cmdline="QUICK=1 $cmdline"
if [[ "$QUICK" == 1 ]]; then d="1 3 2 20000"; else d="3 10 5 5000"; fi
read -r dr dd ds dst <<<"$d"
[[ "$ROUNDS" != "$dr" ]] && cmdline="ROUNDS=$ROUNDS $cmdline"
[[ "$DURATION" != "$dd" ]] && cmdline="DURATION=$DURATION $cmdline"
[[ "$SEARCH_DURATION" != "$ds" ]] && cmdline="SEARCH_DURATION=$SEARCH_DURATION $cmdline"
[[ "$SEARCH_STEP" != "$dst" ]] && cmdline="SEARCH_STEP=$SEARCH_STEP $cmdline"
[[ "$FIXED_RATE" != 20000 ]] && cmdline="FIXED_RATE=$FIXED_RATE $cmdline"
[[ "$SEARCH_START" != "$FIXED_RATE" ]] && cmdline="SEARCH_START=$SEARCH_START $cmdline"
[[ "$OPEN_CONNS" != 50 ]] && cmdline="OPEN_CONNS=$OPEN_CONNS $cmdline"
[[ "$OPEN_MAX_VUS" != "$OPEN_CONNS" ]] && cmdline="OPEN_MAX_VUS=$OPEN_MAX_VUS $cmdline"
[[ "$TOOLS" != "stampede oha vegeta" ]] && cmdline="TOOLS=\"$TOOLS\" $cmdline"
[[ -n "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_BIN=${STAMPEDE_BIN#"$ROOT"/} $cmdline"
[[ -z "${STAMPEDE_BIN:-}" && -n "${STAMPEDE_REV:-}" ]] && cmdline="STAMPEDE_REV=$STAMPEDE_REV $cmdline"

vver=""
[[ -n "${VEGETA:-}" ]] && vver="vegeta v$VEGETA_VERSION ($(go version -m "$VEGETA" 2>/dev/null | awk 'NR == 1 {print $2}'); go install)"
export BENCH_PART=open BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_CMDLINE="$cmdline" \
    BENCH_ROUNDS="$ROUNDS" BENCH_DURATION="$DURATION" BENCH_SEARCH_DURATION="$SEARCH_DURATION" \
    BENCH_SEARCH_STEP="$SEARCH_STEP" BENCH_SEARCH_START="$SEARCH_START" BENCH_FIXED_RATE="$FIXED_RATE" \
    BENCH_OPEN_CONNS="$OPEN_CONNS" BENCH_OPEN_MAX_VUS="$OPEN_MAX_VUS" BENCH_SERVER_CPU="$SERVER_CPU" BENCH_GEN_CPU="$GEN_CPU" BENCH_PAGE_BYTES="$PAGE_BYTES" \
    BENCH_NGINX_CONF="$NGINX_CONF_DESC" BENCH_LOAD_START="$LOAD_START" BENCH_LOAD_END="$LOAD_END" \
    BENCH_ELAPSED_S=$(( SECONDS - T_START )) BENCH_RAW="${RAW#"$ROOT"/}" BENCH_SKIPPED="$SKIPPED" \
    BENCH_V_STAMPEDE="$("$STAMPEDE" --version 2>&1 | sed -n 1p) ($STAMPEDE_DESC)" \
    BENCH_V_OHA="$([[ -n "${OHA:-}" ]] && "$OHA" --version 2>&1 | sed -n 1p)" BENCH_V_VEGETA="$vver" \
    BENCH_CMD_STAMPEDE="taskset -c $GEN_CPU stampede run open.yaml --threads 1 --quiet --out report.json --base-url http://127.0.0.1:PORT (open.yaml: constant-arrival-rate, rate RATE, timeUnit 1s, duration D, preAllocatedVUs $OPEN_CONNS, maxVUs $OPEN_MAX_VUS, maxWaiting and maxWait at their defaults (10,000, 1s), one GET of /)" \
    BENCH_CMD_OHA="taskset -c $GEN_CPU $([[ -n "${OHA:-}" ]] && gen_cmd oha RATE D x | sed -e "s|$TOOLS_ROOT|~/.cache/stampede/tools|" -e "s|:$PORT|:PORT|")" \
    BENCH_CMD_VEGETA="taskset -c $GEN_CPU bash -c \"$([[ -n "${VEGETA:-}" ]] && gen_cmd vegeta RATE D x | sed -e "s|$TOOLS_ROOT|~/.cache/stampede/tools|g" -e "s|:$PORT|:PORT|")\""
write_meta "$RAW/meta.json"
python3 "$BENCH/sections.py" write open --raw "$RAW" --results "$RESULTS"
log "wrote $RESULTS"
