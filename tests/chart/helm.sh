#!/usr/bin/env bash
# Builds (or reuses) the pinned Helm used by the chart tests and `make generate`, from Go
# modules (`go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION`; no prebuilt downloads). Cached
# like the control-plane binaries under
#   ${STAMPEDE_CACHE:-~/.cache/stampede}/helm-<version>/bin/helm
# and built only when missing. Prints the helm path on stdout as its last line.
set -euo pipefail
HELM_VERSION=v3.22.0

. "$(dirname "$0")/../lib/go-tool.sh"
go_tool_begin helm "$HELM_VERSION" helm
# The -X flags are those of Helm's own Makefile: `helm version` reports the real version, and
# `helm template` / `helm lint` assume the Kubernetes minor of the client-go Helm is built with
# (without them: v1.20, which fails the chart's kubeVersion).
gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
k8s_minor="$(sed -n 's|^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$gomod")"
[[ -n "$k8s_minor" ]] || { echo "helm: cannot find the client-go version in $gomod" >&2; exit 1; }
ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ld+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
GOBIN="$go_tool_tmp" go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
go_tool_end
