#!/usr/bin/env bash
# `make chart`: static checks of charts/stampede with the pinned Helm (built by helm.sh when
# missing): `helm lint --strict` with the default and the CI values, `helm template` with both,
# the committed copies (the chart's CRD, manifests/stampede.yaml) against what they are made
# from, the dashboards glob with no files and with files, and values the chart must refuse.
# The server-side dry run and the install on a real control plane are in
# crates/stampede-operator/tests/e2e/chart.rs (`make e2e`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
chart="$repo/charts/stampede"
t0=$(date +%s.%N)
helm="$("$here/helm.sh" | tail -n1)"
export STAMPEDE_HELM="$helm"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { echo "chart: ok   $*" >&2; passed=$((passed + 1)); }
bad() { echo "chart: FAIL $*" >&2; failed=$((failed + 1)); }
check() { # description command...
  local what=$1; shift
  if "$@" >"$tmp/out" 2>&1; then ok "$what"; else bad "$what"; sed 's/^/    /' "$tmp/out" >&2; fi
}
refuses() { # description expected-message command...
  local what=$1 want=$2; shift 2
  if "$@" >"$tmp/out" 2>&1; then bad "$what (it rendered)"
  elif grep -q -- "$want" "$tmp/out"; then ok "$what"
  else bad "$what (no \"$want\" in the error)"; sed 's/^/    /' "$tmp/out" >&2; fi
}
kinds() { grep -E '^kind: ' "$1" | sort | uniq -c | awk '{print $3 "=" $1}' | paste -sd' '; }

check "helm lint (default values)" "$helm" lint --strict "$chart"
check "helm lint (ci/test-values.yaml)" "$helm" lint --strict "$chart" -f "$chart/ci/test-values.yaml"
check "helm template (default values)" "$helm" template stampede "$chart" -n stampede --output-dir "$tmp/default"
check "helm template (ci/test-values.yaml)" "$helm" template t "$chart" -n ops -f "$chart/ci/test-values.yaml"
"$helm" template t "$chart" -n ops -f "$chart/ci/test-values.yaml" > "$tmp/ci.yaml" 2>/dev/null || true
"$helm" template stampede "$chart" -n stampede > "$tmp/default.yaml" 2>/dev/null || true

want="ClusterRole=1 ClusterRoleBinding=1 CustomResourceDefinition=2 Deployment=1 Role=1 RoleBinding=1 Service=1 ServiceAccount=1"
check "default values render $want" test "$(kinds "$tmp/default.yaml")" = "$want"
ndash=$(shopt -s nullglob; set -- "$chart"/dashboards/*.json; echo $#)
want="ConfigMap=$ndash CustomResourceDefinition=2 Deployment=1 PodMonitor=1 Role=3 RoleBinding=3 Service=1 ServiceAccount=1 ServiceMonitor=1"
want="${want/ConfigMap=0 /}"
check "ci values render $want" test "$(kinds "$tmp/ci.yaml")" = "$want"

for crd in loadtest loadtestschedule; do
  check "charts/stampede/files/crds/$crd.yaml is crds/$crd.yaml (make generate)" \
    cmp "$repo/crds/$crd.yaml" "$chart/files/crds/$crd.yaml"
done
"$here/manifests.sh" > "$tmp/stampede.yaml"
check "manifests/stampede.yaml is up to date (make generate)" \
  diff -u "$repo/manifests/stampede.yaml" "$tmp/stampede.yaml"

# Dashboards: none without files (the glob is empty-safe), one ConfigMap per file otherwise.
cp -r "$chart" "$tmp/chart"
rm -rf "$tmp/chart/dashboards"
"$helm" template t "$tmp/chart" --set dashboards.enabled=true > "$tmp/none.yaml"
check "no dashboards folder: no dashboard ConfigMap" test "$(grep -c '^kind: ConfigMap' "$tmp/none.yaml")" = 0
mkdir -p "$tmp/chart/dashboards"
echo '{"title": "A"}' > "$tmp/chart/dashboards/first_one.json"
echo '{"title": "B"}' > "$tmp/chart/dashboards/second.json"
echo 'not a dashboard' > "$tmp/chart/dashboards/notes.txt"
"$helm" template t "$tmp/chart" --set dashboards.enabled=true,dashboards.label=grafana_dash,dashboards.labelValue=yes \
  > "$tmp/two.yaml"
check "two dashboard files: two ConfigMaps with the sidecar label and the JSON" \
  bash -c "[[ \$(grep -c '^kind: ConfigMap' '$tmp/two.yaml') == 2 ]] && grep -q 'name: t-stampede-dashboard-first-one' '$tmp/two.yaml' \
    && [[ \$(grep -c 'grafana_dash: \"yes\"' '$tmp/two.yaml') == 2 ]] && grep -q 'second.json: |' '$tmp/two.yaml' \
    && grep -q '{\"title\": \"B\"}' '$tmp/two.yaml'"
"$helm" template t "$tmp/chart" > "$tmp/off.yaml"
check "dashboards.enabled=false: no ConfigMap" test "$(grep -c '^kind: ConfigMap' "$tmp/off.yaml")" = 0
check "dashboardApi off by default: no address, no port" \
  bash -c "! grep -q -e STAMPEDE_DASHBOARD_ADDR -e 'name: dashboard$' '$tmp/off.yaml'"
"$helm" template t "$tmp/chart" --set dashboardApi.enabled=true,dashboardApi.port=9090 > "$tmp/api.yaml"
check "dashboardApi.enabled: its address, a container port and a Service port" \
  bash -c "grep -A1 'name: STAMPEDE_DASHBOARD_ADDR' '$tmp/api.yaml' | grep -q '\"0.0.0.0:9090\"' \
    && [[ \$(grep -c 'name: dashboard$' '$tmp/api.yaml') == 2 ]] && grep -q 'targetPort: dashboard' '$tmp/api.yaml'"

refuses "two replicas without leader election" "needs leaderElection.enabled" \
  "$helm" template t "$chart" --set leaderElection.enabled=false
refuses "a misspelt value (values.schema.json)" "additional properties 'replicas' not allowed" \
  "$helm" template t "$chart" --set replicas=3
refuses "a port out of range (values.schema.json)" "http.port" "$helm" template t "$chart" --set http.port=70000
refuses "a ServiceMonitor without the Service" "needs service.enabled" \
  "$helm" template t "$chart" --set serviceMonitor.enabled=true,service.enabled=false

secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "chart: $passed passed, $failed failed ($secs s, $("$helm" version --short))"
[[ $failed == 0 ]]
