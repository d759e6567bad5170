#!/usr/bin/env bash
# Builds (or reuses) the local control-plane binaries: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl, all from Go modules (no Docker, no
# downloads of prebuilt binaries). Binaries are cached per version under
#   ${STAMPEDE_CACHE:-~/.cache/stampede}/k8s-<version>/bin
# and the build is skipped when that folder is complete. A cold build takes 15-30 minutes on two
# cores; see README.md. Prints the bin folder on stdout as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache_root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
dest="$cache_root/k8s-$K8S_VERSION"
bin="$dest/bin"
stamp="$dest/complete"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
want="k8s=$K8S_VERSION etcd=$ETCD_VERSION"

complete() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if complete; then
  echo "k8s-bins: reusing $bin ($want)" >&2
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "k8s-bins: Go >= 1.24 is required to build the control plane" >&2; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS_BUILD:--p=2} -mod=readonly -buildvcs=false"
start=$(date +%s)
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
done

echo "k8s-bins: building etcd $ETCD_VERSION into $bin (cold builds take a few minutes)" >&2
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
echo "k8s-bins: building Kubernetes $K8S_VERSION (cold builds take 15-30 minutes on 2 cores)" >&2
(cd "$here/k8s" && go build -trimpath -ldflags "$ld" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)

mkdir -p "$bin"
for b in "${binaries[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done
echo "$want" > "$stamp"
echo "k8s-bins: built in $(( $(date +%s) - start )) s" >&2
echo "$bin"
