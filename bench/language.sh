#!/usr/bin/env bash
# The cost of the scenario language (issue #23), same-run A/B, as CPU-µs per request:
#
#   1. the shop flow with generated values and conditions (bench/language/generated.yaml) vs the
#      same requests with fixed values (bench/language/constants.yaml), one stampede binary;
#   2. the quickstart (examples/quickstart.yaml) with this stampede vs one from before the
#      scenario language (BASE_REV, default 6bb21c2), built from that commit's tree.
#
#   bash bench/language.sh                 # 3 rounds x 10 s per run (~3 min after the builds)
#   QUICK=1 bash bench/language.sh         # 1 round x 3 s, results under bench/out/
#   STAMPEDE_BIN=… BASE_BIN=… bash bench/language.sh   # given binaries instead of builds
#
# The target is the built-in one (`stampede target`, its /shop/ and echo routes) pinned to CPU
# $SERVER_CPU; each run is pinned to CPU $GEN_CPU with one worker thread and 10 VUs, under
# /usr/bin/time: CPU-µs/req = (user + sys) × 10⁶ / the report's total requests. The runs of a
# round are interleaved (order rotated each round); each cell is the median over the rounds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then ROUNDS=${ROUNDS:-1}; DURATION=${DURATION:-3}; else ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-10}; fi
RESULTS=${RESULTS:-$BENCH/RESULTS.md}
[[ "$QUICK" == 1 ]] && RESULTS=$BENCH/out/RESULTS-language-quick.md
BASE_REV=${BASE_REV:-6bb21c2}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
OUT_ROOT=${OUT_ROOT:-$BENCH/out}
BENCH_TAG=language
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

(( $(nproc) >= 2 )) || die "needs at least 2 CPUs"
RAW="$OUT_ROOT/language-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RAW"

select_stampede "$RAW"
if [[ -n "${BASE_BIN:-}" ]]; then
    cp "$BASE_BIN" "$RAW/stampede-base"
    BASE_DESC="binary ${BASE_BIN#"$ROOT"/}"
else
    sha=$(git -C "$ROOT" rev-parse --verify "${BASE_REV}^{commit}") || die "no commit $BASE_REV"
    src="$OUT_ROOT/base-src"
    if [[ "$(cat "$src/.bench-commit" 2>/dev/null)" != "$sha" ]]; then
        rm -rf "$src" && mkdir -p "$src"
        git -C "$ROOT" archive "$sha" | tar -x -m -C "$src"
        echo "$sha" >"$src/.bench-commit"
    fi
    log "cargo build --release -p stampede at ${sha:0:12} (in $src)"
    (cd "$src" && CARGO_TARGET_DIR="$OUT_ROOT/target-base" timeout 3600 cargo build --release -q -p stampede)
    cp "$OUT_ROOT/target-base/release/stampede" "$RAW/stampede-base"
    BASE_DESC="commit ${sha:0:12}"
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c "$SERVER_CPU" "$STAMPEDE" target --port "$PORT" >"$RAW/target.log" 2>&1 &
TARGET_PID=$!
trap 'kill "$TARGET_PID" 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/stats" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$PORT/stats" >/dev/null || die "the target did not start"

# name binary scenario
RUNS=("generated $RAW/stampede $BENCH/language/generated.yaml"
      "constants $RAW/stampede $BENCH/language/constants.yaml"
      "quickstart $RAW/stampede $ROOT/examples/quickstart.yaml"
      "quickstart-base $RAW/stampede-base $ROOT/examples/quickstart.yaml")
LOAD_START=$(cat /proc/loadavg)
for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < ${#RUNS[@]}; k++)); do
        read -r name bin file <<<"${RUNS[(k + round - 1) % ${#RUNS[@]}]}"
        dir="$RAW/$name/round-$round"
        mkdir -p "$dir"
        log "round $round/$ROUNDS: $name"
        taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$dir/time.txt" \
            timeout $((DURATION + 60)) "$bin" run "$file" --threads 1 --vus 10 --duration "${DURATION}s" --quiet \
            --base-url "http://127.0.0.1:$PORT" --out "$dir/report.json" >"$dir/stdout.txt" 2>"$dir/stderr.txt" || true
        sleep 1
    done
done
LOAD_END=$(cat /proc/loadavg)

python3 - "$RAW" "$RESULTS" "$ROUNDS" "$DURATION" "$STAMPEDE_DESC" "$BASE_DESC" "$LOAD_START" "$LOAD_END" <<'PY'
import json, os, re, statistics, sys, datetime
raw, results, rounds, duration, head, base, load_start, load_end = sys.argv[1:]
def cells(name):
    out = []
    for r in sorted(os.listdir(os.path.join(raw, name))):
        d = os.path.join(raw, name, r)
        try:
            rep = json.load(open(os.path.join(d, "report.json")))
            user, sys_, rss = open(os.path.join(d, "time.txt")).read().split()[-3:]
        except (OSError, ValueError):
            continue
        reqs = rep["total"]["requests"]
        out.append({"reqs": reqs, "errors": rep["total"]["errors"], "rps": rep["total"]["rps"],
                    "cpu": (float(user) + float(sys_)) * 1e6 / max(reqs, 1), "rss": int(rss) / 1000})
    return out
names = ["generated", "constants", "quickstart", "quickstart-base"]
data = {n: cells(n) for n in names}
med = lambda n, k: statistics.median(c[k] for c in data[n]) if data[n] else float("nan")
lines = ["<!-- BEGIN bench/language (generated by bench/language.sh; rerun it instead of editing) -->",
         "## The scenario language's cost (issue #23): same-run A/B", "",
         f"- Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs; load at start `{load_start}`, at end `{load_end}`.",
         f"- Command: `bash bench/language.sh` — {rounds} round(s) × {duration} s per run, runs interleaved (order rotated each round), median per cell.",
         f"- Binaries: stampede = {head}; stampede-base = {base} (before the scenario language).",
         "- Target: `stampede target` (built-in: echo routes and the shop) pinned to CPU 0; each run pinned to CPU 1, `--threads 1 --vus 10`, under `/usr/bin/time`; CPU-µs/req = (user + sys) × 10⁶ / `total.requests`.",
         "- `generated`: bench/language/generated.yaml (uuid order id per iteration sent twice, randomString, vu.id, randomItem over an `all: true` list, `repeat` of `randomInt(1, 3)`, an `if` over `size()` and `response.status`, a group); `constants`: the same requests with fixed values (bench/language/constants.yaml).",
         f"- Raw data: `{os.path.relpath(raw, os.path.dirname(results))}/` (gitignored).", "",
         "| run | req/s | CPU-µs/req | CPU-µs/req per round | errors | peak RSS MB |", "|---|---:|---:|---|---:|---:|"]
for n in names:
    per = ", ".join(f"{c['cpu']:.2f}" for c in data[n])
    errs = sum(c["errors"] for c in data[n])
    lines.append(f"| {n} | {med(n, 'rps'):,.0f} | {med(n, 'cpu'):.2f} | {per} | {errs} | {med(n, 'rss'):.1f} |")
def ratio(a, b, target, label):
    if not data[a] or not data[b]:
        return f"| {label} | no data | — |"
    r = med(a, "cpu") / med(b, "cpu")
    per = ", ".join(f"{x['cpu'] / y['cpu']:.2f}" for x, y in zip(data[a], data[b]))
    verdict = "—" if target is None else ("**met**" if r <= target else "**missed**")
    return f"| {label} | {r:.2f}× ({med(a, 'cpu'):.2f} / {med(b, 'cpu'):.2f} µs; per round {per}) | {verdict} |"
lines += ["", "| target | measured | result |", "|---|---|---|",
          ratio("generated", "constants", 1.15, "generated values and conditions / constants ≤ 1.15×"),
          ratio("quickstart", "quickstart-base", None, "quickstart CPU-µs/req, this / before the language (unchanged within noise)"),
          "<!-- END bench/language -->"]
section = "\n".join(lines) + "\n"
text = open(results).read() if os.path.exists(results) else ""
if "<!-- BEGIN bench/language" in text:
    text = re.sub(r"<!-- BEGIN bench/language.*?<!-- END bench/language -->\n", section, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + section
open(results, "w").write(text)
print(section)
PY
