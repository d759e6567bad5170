#!/usr/bin/env bash
# Builds (or reuses) the local control-plane binaries: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl, all from Go modules (no Docker, no
# downloads of prebuilt binaries). Binaries are cached per version under
#   ${STAMPEDE_CACHE:-~/.cache/stampede}/k8s-<version>/bin
# and the build is skipped when that folder is complete. A cold build takes 15-30 minutes on two
# cores; see README.md. Prints the bin folder on stdout as its last line.
#   build.sh          the control plane (and kubectl)
#   build.sh --node   also the real node's binaries: kubelet and kube-proxy (same module as the
#                     control plane, so they share its Go build cache), CoreDNS (its own module,
#                     coredns/) and crictl (to remove pods through the CRI when the node stops);
#                     a separate stamp, so the control plane's cache stays valid.
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
node_binaries=(kubelet kube-proxy coredns crictl)
node_stamp="$dest/complete-node"
# CoreDNS's plugin list is in coredns/main.go: a change to it rebuilds.
coredns_main="$(sha256sum "$here/coredns/main.go" | cut -c1-12)"
node_want="k8s=$K8S_VERSION coredns=$COREDNS_VERSION/$coredns_main crictl=$CRICTL_VERSION"
node=0
[[ "${1:-}" == --node ]] && node=1

complete() { # stamp want binaries...
  local stamp=$1 want=$2 b; shift 2
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
  for b in "$@"; do [[ -x "$bin/$b" ]] || return 1; done
}
cp_done=0; node_done=1
complete "$stamp" "$want" "${binaries[@]}" && cp_done=1
(( node == 0 )) || { complete "$node_stamp" "$node_want" "${node_binaries[@]}" || node_done=0; }

if (( cp_done && node_done )); then
  echo "k8s-bins: reusing $bin ($want$( (( node )) && echo " $node_want"))" >&2
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

mkdir -p "$bin"
if (( ! cp_done )); then
  echo "k8s-bins: building etcd $ETCD_VERSION into $bin (cold builds take a few minutes)" >&2
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
  echo "k8s-bins: building Kubernetes $K8S_VERSION (cold builds take 15-30 minutes on 2 cores)" >&2
  (cd "$here/k8s" && go build -trimpath -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl)
  for b in "${binaries[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done
  echo "$want" > "$stamp"
  echo "k8s-bins: control plane built in $(( $(date +%s) - start )) s" >&2
fi
if (( ! node_done )); then
  t_node=$(date +%s)
  echo "k8s-bins: building kubelet and kube-proxy $K8S_VERSION (cold: about 10 minutes on 2 cores)" >&2
  (cd "$here/k8s" && go build -trimpath -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy)
  echo "k8s-bins: building CoreDNS $COREDNS_VERSION" >&2
  (cd "$here/coredns" && go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .)
  echo "k8s-bins: building crictl $CRICTL_VERSION" >&2
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS="${GOFLAGS_BUILD:--p=2}" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION")
  for b in "${node_binaries[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done
  echo "$node_want" > "$node_stamp"
  echo "k8s-bins: node binaries built in $(( $(date +%s) - t_node )) s" >&2
fi
echo "$bin"
