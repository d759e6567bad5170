#!/usr/bin/env bash
# Import speed and memory (issue #33): `stampede import` of generated 5 MB and 50 MB JMeter plans
# and HAR recordings, and of the largest corpus artifacts (GitHub's 13 MB OpenAPI description),
# measured here and not asserted in tests. Linear time shows as a 50 MB / 5 MB ratio near 10.
#
#   har-N     a recording of login + N API calls, each sending the token and ids the responses
#             before it returned (so the correlation has thousands of values to look for)
#   jmx-N     a plan of N HTTP samplers with header managers, arguments, extractors, assertions
#
#   STAMPEDE_BIN=path bash bench/import.sh     # that binary (default: a release build of the tree)
#   ROUNDS=3 bash bench/import.sh
#
# Writes the `import` section of bench/RESULTS.md (between its BEGIN/END markers).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
ROUNDS=${ROUNDS:-3}
RESULTS=${RESULTS:-$here/RESULTS.md}
if [[ -z "${STAMPEDE_BIN:-}" ]]; then
  (cd "$repo" && cargo build -q --release -p stampede)
  STAMPEDE_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/stampede"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'EOF'
import json, os, sys
d = sys.argv[1]

def har(path, size):
    entries = [{
        "startedDateTime": "2026-12-04T10:00:00.000Z", "time": 1,
        "request": {"method": "POST", "url": "http://127.0.0.1:8080/api/login", "httpVersion": "HTTP/1.1",
                    "headers": [{"name": "Content-Type", "value": "application/json"}],
                    "postData": {"mimeType": "application/json", "text": "{\"user\":\"ann\"}"}},
        "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json",
                     "text": json.dumps({"token": "tok-0123456789abcdef0123456789"})}}}]
    n = 0
    while True:
        n += 1
        item = "item-%012d" % (n - 1)
        body = {"item": item, "qty": n % 7, "note": "x" * 200, "tags": ["t%d" % (n % 13)] * 4}
        entries.append({
            "startedDateTime": "2026-12-04T10:00:00.000Z", "time": 1,
            "request": {"method": "POST", "url": "http://127.0.0.1:8080/api/orders/%s?page=%d" % (item, n),
                        "httpVersion": "HTTP/1.1",
                        "headers": [{"name": "Authorization", "value": "Bearer tok-0123456789abcdef0123456789"},
                                    {"name": "Content-Type", "value": "application/json"},
                                    {"name": "X-Request-Id", "value": "req-%d" % n}],
                        "postData": {"mimeType": "application/json", "text": json.dumps(body)}},
            "response": {"status": 201, "headers": [{"name": "Location", "value": "/api/orders/o-%012d" % n}],
                         "content": {"mimeType": "application/json",
                                     "text": json.dumps({"order": "o-%012d" % n, "next": "item-%012d" % n,
                                                         "lines": [{"sku": "sku-%010d" % (n * 10 + i)} for i in range(5)]})}}})
        if n % 500 == 0 and len(json.dumps(entries)) > size:
            break
    json.dump({"log": {"version": "1.2", "creator": {"name": "bench/import.sh", "version": "1"}, "entries": entries}},
              open(path, "w"))

def jmx(path, size):
    sampler = """      <HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="HTTP Request" enabled="true">
        <elementProp name="HTTPsampler.Arguments" elementType="Arguments">
          <collectionProp name="Arguments.arguments">
            <elementProp name="q" elementType="HTTPArgument"><stringProp name="Argument.name">q</stringProp><stringProp name="Argument.value">${__Random(1,${max})}-%(n)d</stringProp></elementProp>
          </collectionProp>
        </elementProp>
        <stringProp name="HTTPSampler.domain">${host}</stringProp>
        <stringProp name="HTTPSampler.port">8080</stringProp>
        <stringProp name="HTTPSampler.path">/api/items/%(n)d?token=${token}&amp;x=&lt;%(n)d&gt;</stringProp>
        <stringProp name="HTTPSampler.method">GET</stringProp>
      </HTTPSamplerProxy>
      <hashTree>
        <HeaderManager guiclass="HeaderPanel" testclass="HeaderManager" testname="HTTP Header Manager" enabled="true">
          <collectionProp name="HeaderManager.headers">
            <elementProp name="" elementType="Header"><stringProp name="Header.name">X-Item</stringProp><stringProp name="Header.value">item-%(n)d</stringProp></elementProp>
          </collectionProp>
        </HeaderManager>
        <hashTree/>
        <ResponseAssertion guiclass="AssertionGui" testclass="ResponseAssertion" testname="Response Assertion" enabled="true">
          <collectionProp name="Asserion.test_strings"><stringProp name="49586">200</stringProp></collectionProp>
          <stringProp name="Assertion.test_field">Assertion.response_code</stringProp>
          <intProp name="Assertion.test_type">8</intProp>
        </ResponseAssertion>
        <hashTree/>
      </hashTree>
"""
    head = """<?xml version="1.0" encoding="UTF-8"?>
<jmeterTestPlan version="1.2" properties="5.0" jmeter="5.6.3">
  <hashTree>
    <TestPlan guiclass="TestPlanGui" testclass="TestPlan" testname="bench" enabled="true">
      <elementProp name="TestPlan.user_defined_variables" elementType="Arguments">
        <collectionProp name="Arguments.arguments">
          <elementProp name="host" elementType="Argument"><stringProp name="Argument.name">host</stringProp><stringProp name="Argument.value">127.0.0.1</stringProp></elementProp>
          <elementProp name="max" elementType="Argument"><stringProp name="Argument.name">max</stringProp><stringProp name="Argument.value">9</stringProp></elementProp>
          <elementProp name="token" elementType="Argument"><stringProp name="Argument.name">token</stringProp><stringProp name="Argument.value">t-1</stringProp></elementProp>
        </collectionProp>
      </elementProp>
    </TestPlan>
    <hashTree>
      <ThreadGroup guiclass="ThreadGroupGui" testclass="ThreadGroup" testname="Thread Group" enabled="true">
        <stringProp name="ThreadGroup.num_threads">${__P(threads,2)}</stringProp>
        <elementProp name="ThreadGroup.main_controller" elementType="LoopController"><stringProp name="LoopController.loops">1</stringProp></elementProp>
      </ThreadGroup>
      <hashTree>
"""
    tail = "      </hashTree>\n    </hashTree>\n  </hashTree>\n</jmeterTestPlan>\n"
    with open(path, "w") as f:
        f.write(head)
        n, written = 0, len(head)
        while written < size:
            s = sampler % {"n": n}
            f.write(s)
            written += len(s)
            n += 1
        f.write(tail)

for mb in (5, 50):
    har(os.path.join(d, "har-%dmb.har" % mb), mb << 20)
    jmx(os.path.join(d, "jmx-%dmb.jmx" % mb), mb << 20)
EOF

corpus="$(bash "$repo/tests/corpus/fetch.sh")"
inputs=("har $work/har-5mb.har" "har $work/har-50mb.har" "jmx $work/jmx-5mb.jmx" "jmx $work/jmx-50mb.jmx"
        "openapi $corpus/openapi/octokit-api.github.com.json" "har $corpus/har/mitmproxy2swagger-sklep.lisek.app.har")
rows=()
for input in "${inputs[@]}"; do
  read -r kind file <<<"$input"
  [[ -f "$file" ]] || { echo "bench/import.sh: no $file" >&2; continue; }
  rss=() secs=()
  for _ in $(seq "$ROUNDS"); do
    code=0
    /usr/bin/time -f '%M %e' -o "$work/time" "$STAMPEDE_BIN" import "$kind" "$file" -o "$work/out.yaml" \
      >/dev/null 2>"$work/err" || code=$?
    read -r m s <"$work/time"
    rss+=("$m") secs+=("$s")
  done
  size="$(du -k "$file" | cut -f1)"
  steps="$(grep -c '^      - name:\|^  - name:' "$work/out.yaml" || true)"
  rows+=("$(basename "$file")|$kind|$((size / 1024)).$(( (size % 1024) * 10 / 1024 ))|$code|$steps|$(printf '%s\n' "${rss[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]/1024}')|$(printf '%s\n' "${secs[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f|%.2f", a[int((NR+1)/2)], a[NR]}')")
done

section="$work/section.md"
{
  echo "<!-- BEGIN bench/import -->"
  echo "## Import speed and memory (issue #33): \`stampede import\` of 5 and 50 MB inputs"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs; binary: \`$STAMPEDE_BIN\` ($("$STAMPEDE_BIN" --version 2>/dev/null | head -n1))"
  echo "- Command: \`STAMPEDE_BIN=$STAMPEDE_BIN ROUNDS=$ROUNDS bash bench/import.sh\`; each input imported $ROUNDS times under \`/usr/bin/time -f '%M %e'\` (peak RSS, wall seconds; the import validates what it wrote, included). Inputs generated by the script (HAR: login + N calls correlated with what earlier responses returned; JMX: N samplers with header managers, nested functions, assertions) and the corpus's largest."
  echo "- Load on the machine at the end (\`/proc/loadavg\`): $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| input | kind | MB | exit | steps | peak RSS MB (median) | seconds (median) | seconds (max) |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
  for row in "${rows[@]}"; do
    IFS='|' read -r f kind mb code steps m s1 s2 <<<"$row"
    echo "| $f | $kind | $mb | $code | $steps | $m | $s1 | $s2 |"
  done
  echo "<!-- END bench/import -->"
} >"$section"
cat "$section"
python3 - "$RESULTS" "$section" <<'EOF'
import re, sys
results, section = sys.argv[1], open(sys.argv[2]).read()
text = open(results).read()
pattern = re.compile(r"<!-- BEGIN bench/import -->.*?<!-- END bench/import -->\n?", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
open(results, "w").write(text)
EOF
