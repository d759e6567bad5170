#!/usr/bin/env bash
# HTTP/2 (issue #7): stampede vs h2load (Debian nghttp2-client) against one pinned nginx worker
# serving cleartext HTTP/2 (`listen … http2`: h2c with prior knowledge), the same layout for both:
# C connections x S concurrent streams each.
#
#   bash bench/h2.sh                         # 3 rounds x 10 s per tool and layout (10x10 and 1x100)
#   QUICK=1 bash bench/h2.sh                 # smoke test: 1 round x 3 s -> bench/out/RESULTS-h2-quick.md
#   LAYOUTS="10x10 1x100" bash bench/h2.sh
#   STAMPEDE_BIN=path bash bench/h2.sh       # that binary (copied into the run folder first)
#
# h2load prints no percentiles, so each round also runs h2load with --log-file (per-request
# lines) for its p99; the plain run is the one for req/s and CPU.
set -euo pipefail
BENCH_TAG=h2
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
    ROUNDS=${ROUNDS:-1}; DURATION=${DURATION:-3}
    RESULTS=${RESULTS:-$OUT_ROOT/RESULTS-h2-quick.md}
else
    ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-10}
    RESULTS=${RESULTS:-$BENCH/RESULTS.md}
fi
LAYOUTS=${LAYOUTS:-"10x10 1x100"}
TOOLS=${TOOLS:-"stampede h2load h2load-log"}
for v in ROUNDS DURATION; do [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
read -ra layouts <<<"$LAYOUTS"
for l in "${layouts[@]}"; do [[ "$l" =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "bad layout $l (CxS, e.g. 10x10)"; done
read -ra tools <<<"$TOOLS"
for t in "${tools[@]}"; do [[ "$t" =~ ^(stampede|h2load|h2load-log)$ ]] || die "unknown tool $t (stampede h2load h2load-log)"; done

need_debian h2load:nghttp2-client
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
RAW="$OUT_ROOT/h2-$RUN_ID"
mkdir -p "$RAW" "$(dirname "$RESULTS")"
select_stampede "$RAW"
raise_nofile
start_nginx "http2"

scenario() {   # C S SECONDS -> a scenario file: C x S VUs over C connections of S streams
    local c=$1 s=$2 secs=$3 f="$RAW/h2-$1x$2-$3s.yaml"
    [[ -f "$f" ]] || cat >"$f" <<EOF
name: h2-bench
baseUrl: http://127.0.0.1:8089
load: {executor: constant-vus, vus: $(( c * s )), duration: ${secs}s}
http: {version: "2", connections: $c, maxStreams: $s}
scenarios:
  - name: get
    steps:
      - name: index
        request: {method: GET, url: "{{baseUrl}}/"}
EOF
    echo "$f"
}

gen_cmd() {   # TOOL C S PREFIX
    local tool=$1 c=$2 s=$3 prefix=$4
    case "$tool" in
        stampede) echo "$STAMPEDE run $(scenario "$c" "$s" "$DURATION") --threads 1 --quiet --out $prefix.json --base-url http://127.0.0.1:$PORT" ;;
        h2load) echo "h2load -c $c -m $s -t 1 -D $DURATION $URL" ;;
        h2load-log) echo "h2load -c $c -m $s -t 1 -D $DURATION --log-file $prefix.log $URL" ;;
    esac
}

MANIFEST="$RAW/manifest.tsv"
printf 'layout\tround\ttool\tprefix\trc\tload1_after\n' >"$MANIFEST"
LOAD_START=$(cat /proc/loadavg)
T_START=$SECONDS
timeout 10 taskset -c "$GEN_CPU" h2load -c 2 -m 10 -t 1 -D 1 "$URL" >/dev/null 2>&1 || true   # warm nginx up
for lay in "${layouts[@]}"; do
    c=${lay%x*} s=${lay#*x}
    for (( r = 1; r <= ROUNDS; r++ )); do
        for (( i = 0; i < ${#tools[@]}; i++ )); do
            tool=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
            prefix="$RAW/$lay-r$r-$tool"
            log "$c x $s round $r/$ROUNDS $tool"
            rc=0
            # shellcheck disable=SC2046
            measured "$prefix" $(( DURATION + 40 )) $(gen_cmd "$tool" "$c" "$s" "$prefix") || rc=$?
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$lay" "$r" "$tool" "$prefix" "$rc" "$(cut -d' ' -f1 /proc/loadavg)" >>"$MANIFEST"
            (( rc == 0 )) || log "  $tool exited with $rc (see $prefix.err)"
            python3 "$BENCH/sections.py" one h2 "$tool" "$prefix" >&2 || true
            sleep "$PAUSE"
        done
    done
done
LOAD_END=$(cat /proc/loadavg)
stop_nginx

cmdline="bash bench/h2.sh"
[[ "$QUICK" == 1 ]] && cmdline="QUICK=1 $cmdline"
if [[ "$QUICK" == 1 ]]; then d="1 3"; else d="3 10"; fi
read -r dr dd <<<"$d"
[[ "$ROUNDS" != "$dr" ]] && cmdline="ROUNDS=$ROUNDS $cmdline"
[[ "$DURATION" != "$dd" ]] && cmdline="DURATION=$DURATION $cmdline"
[[ "$LAYOUTS" != "10x10 1x100" ]] && cmdline="LAYOUTS=\"$LAYOUTS\" $cmdline"
[[ "$TOOLS" != "stampede h2load h2load-log" ]] && cmdline="TOOLS=\"$TOOLS\" $cmdline"
[[ -n "${STAMPEDE_BIN:-}" ]] && cmdline="STAMPEDE_BIN=${STAMPEDE_BIN#"$ROOT"/} $cmdline"
[[ -z "${STAMPEDE_BIN:-}" && -n "${STAMPEDE_REV:-}" ]] && cmdline="STAMPEDE_REV=$STAMPEDE_REV $cmdline"

export BENCH_PART=h2 BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_CMDLINE="$cmdline" \
    BENCH_ROUNDS="$ROUNDS" BENCH_DURATION="$DURATION" BENCH_SERVER_CPU="$SERVER_CPU" BENCH_GEN_CPU="$GEN_CPU" \
    BENCH_PAGE_BYTES="$PAGE_BYTES" BENCH_NGINX_CONF="$NGINX_CONF_DESC" BENCH_LOAD_START="$LOAD_START" \
    BENCH_LOAD_END="$LOAD_END" BENCH_ELAPSED_S=$(( SECONDS - T_START )) BENCH_RAW="${RAW#"$ROOT"/}" \
    BENCH_V_STAMPEDE="$("$STAMPEDE" --version 2>&1 | sed -n 1p) ($STAMPEDE_DESC)" \
    BENCH_V_H2LOAD="$(h2load --version 2>&1 | sed -n 1p) (Debian $(dpkg-query -W -f '${Version}' nghttp2-client 2>/dev/null || echo '?'))" \
    BENCH_CMD_STAMPEDE="taskset -c $GEN_CPU stampede run h2.yaml --threads 1 --quiet --out report.json --base-url http://127.0.0.1:PORT (h2.yaml: constant-vus, vus C×S, duration ${DURATION}s, http: {version: \"2\", connections: C, maxStreams: S}, one GET of /)" \
    BENCH_CMD_H2LOAD="taskset -c $GEN_CPU h2load -c C -m S -t 1 -D $DURATION http://127.0.0.1:PORT/ (p99 run: plus --log-file FILE)"
write_meta "$RAW/meta.json"
python3 "$BENCH/sections.py" write h2 --raw "$RAW" --results "$RESULTS"
log "wrote $RESULTS"
