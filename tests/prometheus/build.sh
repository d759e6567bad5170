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

. "$(dirname "$0")/../lib/go-tool.sh"
go_tool_begin prometheus "$PROMETHEUS_MODULE" prometheus
GOBIN="$go_tool_tmp" go install -trimpath -ldflags "-s -w" -tags remove_all_sd,enable_kubernetes_sd \
  "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE"
go_tool_end
