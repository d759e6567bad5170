#!/usr/bin/env bash
# Where stampede's resident memory goes (issue #36, item 2): for each VU count, a run against the
# built-in target on 127.0.0.1, and its VmRSS split into anonymous memory (what VUs, connections,
# histograms and buffers hold) and file-backed pages (the binary's code and data it touched), read
# from /proc 4 s into a 5 s run. One thread, as bench/run.sh runs it.
#
#   STAMPEDE_BIN=bench/out/stampede-REV VUS="1 50 1000" bash bench/rss-split.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${STAMPEDE_BIN:-$here/../target/release/stampede}"
port="${PORT:-18089}"
"$bin" target --port "$port" >/dev/null 2>&1 &
target=$!
trap 'kill $target 2>/dev/null || true' EXIT
sleep 0.5
printf '| VUs | VmRSS | anonymous | file-backed |\n|---:|---:|---:|---:|\n'
for vus in ${VUS:-1 50 1000}; do
    "$bin" run "$here/scenario.yaml" --threads 1 --vus "$vus" --duration 5s --quiet \
        --base-url "http://127.0.0.1:$port" >/dev/null 2>&1 &
    run=$!
    sleep 4
    awk -v vus="$vus" '{ kb[$1] = $2 } END {
        printf "| %s | %.1f MiB | %.1f MiB | %.1f MiB |\n", vus, kb["VmRSS:"] / 1024, kb["RssAnon:"] / 1024, kb["RssFile:"] / 1024
    }' "/proc/$run/status"
    wait "$run"
done
