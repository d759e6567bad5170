#!/usr/bin/env bash
# Hostile scenario files (issue #32): the memory and time `stampede validate` takes to refuse
# each one, measured here and not asserted in tests. Each file is made by this script:
#
#   exp-vars      ten variables, each repeating the one before ten times (743 bytes)
#   expr-2000     a left-deep expression of 2,000 terms
#   expr-5000     a left-deep expression of 5,000 terms
#   foreach-10m   a forEach with max: 10,000,000
#   body-bomb     a body of three copies of a 7 MB folded variable (past template.bytes)
#   per-iteration the exponential graph of per-iteration variables (past expansion)
#   valid         examples/quickstart.yaml, for comparison
#
#   STAMPEDE_BIN=path bash bench/hostile.sh     # that binary (default: a release build of the tree)
#   ROUNDS=5 bash bench/hostile.sh
#
# Writes the `hostile` section of bench/RESULTS.md (between its BEGIN/END markers): per file,
# the exit code, the budget named, and the median and max over the rounds of peak RSS (`%M`)
# and wall time (`%e`) from /usr/bin/time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
ROUNDS=${ROUNDS:-5}
RESULTS=${RESULTS:-$here/RESULTS.md}
if [[ -z "${STAMPEDE_BIN:-}" ]]; then
  (cd "$repo" && cargo build -q --release -p stampede)
  STAMPEDE_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/stampede"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'EOF'
import sys, os
d = sys.argv[1]
head = "name: hostile\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 1, iterations: 1}\n"
step = "scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"%s\"}\n"
def chain(prev_first, scope=None):
    out = ["vars:"]
    out.append('  a: "abcdefg"' if scope is None else '  a: {value: "{{ uuid() }}", scope: %s}' % scope)
    names = "abcdefghij"
    for p, n in zip(names, names[1:]):
        v = ("{{%s}}" % p) * 10
        out.append('  %s: "%s"' % (n, v) if scope is None else '  %s: {value: "%s", scope: %s}' % (n, v, scope))
    return "\n".join(out) + "\n"
files = {
    "exp-vars": head + chain("a") + step % "{{baseUrl}}/get?x={{j}}",
    "expr-2000": head + step % ("{{baseUrl}}/get?x={{ 1" + " + 1" * 1999 + " }}"),
    "expr-5000": head + step % ("{{baseUrl}}/get?x={{ 1" + " + 1" * 4999 + " }}"),
    "foreach-10m": head + "scenarios:\n  - name: s\n    steps:\n      - repeat: {forEach: \"[1, 2, 3]\", max: 10000000}\n        steps:\n          - name: get\n            request: {url: \"{{baseUrl}}/get\"}\n",
    "body-bomb": head + chain("a").split("  h:")[0] + "scenarios:\n  - name: s\n    steps:\n      - name: post\n        request: {method: POST, url: \"{{baseUrl}}/post\", body: \"{{g}}{{g}}{{g}}\"}\n",
    "per-iteration": head + chain("a", "iteration") + step % "{{baseUrl}}/get?x={{j}}",
}
for name, text in files.items():
    open(os.path.join(d, name + ".yaml"), "w").write(text)
EOF
cp "$repo/examples/quickstart.yaml" "$work/valid.yaml"

rows=()
for f in exp-vars expr-2000 expr-5000 foreach-10m body-bomb per-iteration valid; do
  rss=(); secs=(); code=0; budget=""
  for ((r = 0; r < ROUNDS; r++)); do
    set +e
    /usr/bin/time -f '%M %e' -o "$work/$f.time" "$STAMPEDE_BIN" validate "$work/$f.yaml" >"$work/$f.out" 2>"$work/$f.err"
    code=$?
    set -e
    read -r kb s < <(tail -n1 "$work/$f.time")
    rss+=("$kb"); secs+=("$s")
  done
  budget="$(grep -o '`[a-z.]*` budget' "$work/$f.err" | head -n1 || true)"
  rows+=("$f|$code|${budget:-—}|$(printf '%s\n' "${rss[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f|%.1f", a[int((NR+1)/2)]/1024, a[NR]/1024}')|$(printf '%s\n' "${secs[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f|%.2f", a[int((NR+1)/2)], a[NR]}')")
done

section="$work/section.md"
{
  echo "<!-- BEGIN bench/hostile -->"
  echo "## Hostile scenario files (issue #32): what \`stampede validate\` takes to refuse them"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs; binary: \`$STAMPEDE_BIN\` ($("$STAMPEDE_BIN" --version 2>/dev/null | head -n1))"
  echo "- Command: \`STAMPEDE_BIN=$STAMPEDE_BIN ROUNDS=$ROUNDS bash bench/hostile.sh\`; each file validated $ROUNDS times under \`/usr/bin/time -f '%M %e'\` (peak RSS, wall seconds); medians and maxima over the rounds. Goal: each under 100 MB and 1 s."
  echo "- Load on the machine at the end (\`/proc/loadavg\`): $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| file | exit | refused by | RSS MB (median) | RSS MB (max) | seconds (median) | seconds (max) |"
  echo "|---|---:|---|---:|---:|---:|---:|"
  for row in "${rows[@]}"; do
    IFS='|' read -r f code budget m1 m2 s1 s2 <<<"$row"
    echo "| $f | $code | $budget | $m1 | $m2 | $s1 | $s2 |"
  done
  echo "<!-- END bench/hostile -->"
} >"$section"
cat "$section"
python3 - "$RESULTS" "$section" <<'EOF'
import re, sys
results, section = sys.argv[1], open(sys.argv[2]).read()
text = open(results).read()
pattern = re.compile(r"<!-- BEGIN bench/hostile -->.*?<!-- END bench/hostile -->\n?", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
open(results, "w").write(text)
EOF
