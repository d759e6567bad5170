#!/usr/bin/env bash
# `stampede` with its live dashboard open: runs $STAMPEDE_REAL (default target/release/stampede)
# with the arguments given and, for `run`, `--dashboard 127.0.0.1:0` and one page connected (curl
# reads the event stream, as a browser's EventSource does, until the run ends). curl runs in a
# session of its own, orphaned, so /usr/bin/time counts stampede's CPU, not the page's. For the
# same-run A/B of the dashboard's cost:
#
#   STAMPEDE_BIN=bench/with-dashboard.sh STAMPEDE_BASE_BIN=target/release/stampede \
#     TOOLS="stampede stampede-base" CONNS="50 1000" bash bench/run.sh
set -euo pipefail
real=${STAMPEDE_REAL:-$(cd "$(dirname "$0")/.." && pwd)/target/release/stampede}
if [[ "${1:-}" != run ]]; then
    exec "$real" "$@"
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$real" "$@" --dashboard 127.0.0.1:0 2> >(tee "$err" >&2) &
pid=$!
url=""
for _ in $(seq 1 100); do
    url=$(grep -o 'http://[^ ]*?token=[0-9a-f]*' "$err" | head -n1 || true)
    [[ -n "$url" ]] && break
    sleep 0.1
done
[[ -n "$url" ]] || { echo "with-dashboard: no dashboard link on stderr" >&2; kill "$pid"; exit 3; }
( setsid curl -sN "${url/\/?token=/\/events?token=}" >/dev/null 2>&1 & )
wait "$pid"
