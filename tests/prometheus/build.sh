#!/usr/bin/env bash
# Builds (or reuses) the pinned Prometheus the real-node suite scrapes with, from its Go module
# (`go install github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE`; no prebuilt
# downloads), with only the Kubernetes service discovery (build tags `remove_all_sd` and
# `enable_kubernetes_sd`). Debian's package is built without Kubernetes discovery, which is how
# the chart's PodMonitor and ServiceMonitor find their targets. Cached under
#   ${STAMPEDE_CACHE:-~/.cache/stampede}/prometheus-<version>/bin/prometheus
# and built only when missing. Prints the binary's path on stdout as its last line.
set -euo pipefail
# The module's v0.316.0 is Prometheus 3.16.0 (its Go module versions are v0.<minor>...).
PROMETHEUS_MODULE=v0.316.0

cache_root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
dest="$cache_root/prometheus-$PROMETHEUS_MODULE"
prometheus="$dest/bin/prometheus"
stamp="$dest/complete"

if [[ -x "$prometheus" && -f "$stamp" && "$(cat "$stamp")" == "$PROMETHEUS_MODULE" ]]; then
  echo "prometheus: reusing $prometheus" >&2
  echo "$prometheus"
  exit 0
fi

command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "prometheus: Go is required to build Prometheus $PROMETHEUS_MODULE" >&2; exit 1; }
start=$(date +%s)
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "prometheus: building Prometheus ($PROMETHEUS_MODULE) into $dest/bin (a cold build takes a few minutes)" >&2
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS_BUILD:--p=2} -buildvcs=false"
GOBIN="$tmp" go install -trimpath -ldflags "-s -w" -tags remove_all_sd,enable_kubernetes_sd \
  "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE"
mkdir -p "$dest/bin"
mv -f "$tmp/prometheus" "$prometheus"
echo "$PROMETHEUS_MODULE" > "$stamp"
echo "prometheus: built in $(( $(date +%s) - start )) s" >&2
echo "$prometheus"
