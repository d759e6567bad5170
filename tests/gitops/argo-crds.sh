#!/usr/bin/env bash
# Fetches (or reuses) Argo Rollouts' AnalysisTemplate CustomResourceDefinition at a pinned release,
# for the e2e test of gitops/argo-rollouts/analysistemplate.yaml
# (crates/stampede-operator/tests/e2e/gitops.rs). It comes from the Go module proxy, as the
# project's other Go material does: `go mod download github.com/argoproj/argo-rollouts@VERSION`
# (the checksum-verified module, GOPROXY, GOFLAGS and GOMODCACHE from the environment; no other
# download), file manifests/crds/analysis-template-crd.yaml. Cached under
#   ${STAMPEDE_CACHE:-~/.cache/stampede}/argo-rollouts-<version>/analysis-template-crd.yaml
# and fetched only when missing: a warm run needs neither Go nor the network. Prints the CRD
# file's path on stdout as its last line.
set -euo pipefail
# v1.8.5's go.mod asks for Go 1.23.4; later releases ask for a newer Go than the one the cluster
# build needs, and `go mod download` with GOTOOLCHAIN=local refuses to unpack those.
ARGO_ROLLOUTS_VERSION=v1.8.5
module="github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION"

dest="${STAMPEDE_CACHE:-$HOME/.cache/stampede}/argo-rollouts-$ARGO_ROLLOUTS_VERSION"
crd="$dest/analysis-template-crd.yaml"
if [[ -f "$crd" && -f "$dest/complete" && "$(cat "$dest/complete")" == "$ARGO_ROLLOUTS_VERSION" ]]; then
  echo "argo-rollouts: reusing $crd" >&2
  echo "$crd"
  exit 0
fi
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "argo-rollouts: Go is required to fetch $module from the module proxy" >&2; exit 1; }
export GOTOOLCHAIN=local
mkdir -p "$dest"
echo "argo-rollouts: fetching $module (module proxy)" >&2
# Outside any module (the cache folder), so no go.mod around changes what is downloaded.
json="$(cd "$dest" && go mod download -json "$module")" || {
  echo "argo-rollouts: go mod download $module failed:" >&2
  echo "$json" >&2
  exit 1
}
dir="$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")"
src="$dir/manifests/crds/analysis-template-crd.yaml"
[[ -n "$dir" && -f "$src" ]] || { echo "argo-rollouts: no manifests/crds/analysis-template-crd.yaml in $module ($dir)" >&2; exit 1; }
grep -q '^  name: analysistemplates.argoproj.io$' "$src" \
  || { echo "argo-rollouts: $src is not the AnalysisTemplate CRD" >&2; exit 1; }
# The module cache is read-only: copy with a mode of our own, then stamp.
install -m 0644 "$src" "$crd.tmp"
mv -f "$crd.tmp" "$crd"
echo "$ARGO_ROLLOUTS_VERSION" > "$dest/complete"
echo "$crd"
