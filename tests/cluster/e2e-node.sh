#!/usr/bin/env bash
# `make e2e-node`: the real-node suite. Builds (or reuses) the control plane and the node's
# binaries, Stampede's image (image/build.sh) and the test binary; starts the local cluster with a
# real node (up.sh --node=real: containerd, kubelet, kube-proxy, CoreDNS); runs the `realnode`
# tests of the operator crate with `-- --ignored`; then stops the cluster, puts the host back and
# checks that nothing of the node is left (down.sh --verify), whether the tests passed or not.
# Needs root: without it, it stops at once and says so. Extra arguments go to the test binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
if (( EUID != 0 )); then
  echo "e2e-node: the real-node suite needs root (containerd, runc, network namespaces, iptables," \
    "cgroups); it did not run. The node-agent suite (make e2e) runs without root." >&2
  exit 2
fi
export STAMPEDE_CLUSTER_DIR="${STAMPEDE_CLUSTER_DIR:-$here/.run/e2e-node}"
CARGO="${CARGO:-cargo}"
t0=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# The node's Debian packages: containerd and runc, the CNI plugins, iptables.
missing=()
for pkg in containerd runc containernetworking-plugins iptables; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  echo "e2e-node: installing ${missing[*]} (Debian)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
fi
t_pkgs=$(secs "$t0")

t1=$(date +%s.%N)
"$here/build.sh" --node >/dev/null
"$repo/tests/chart/helm.sh" >/dev/null
# The Prometheus the suite scrapes runners and the operator with (Kubernetes discovery).
STAMPEDE_PROMETHEUS="$("$repo/tests/prometheus/build.sh" | tail -n 1)"
export STAMPEDE_PROMETHEUS
t_bins=$(secs "$t1")
t1=$(date +%s.%N)
export STAMPEDE_IMAGE_ARCHIVE="${STAMPEDE_IMAGE_ARCHIVE:-${CARGO_TARGET_DIR:-$repo/target}/image/stampede.oci.tar}"
IMAGE_OUT="$STAMPEDE_IMAGE_ARCHIVE" "$repo/image/build.sh" >/dev/null
t_image=$(secs "$t1")
t1=$(date +%s.%N)
# Workspace-wide, as `make unit` builds it: `-p stampede-operator` would resolve other features
# and rebuild part of the workspace (123 s on a fresh clone).
"$CARGO" test --quiet --workspace --test realnode --no-run
t_compile=$(secs "$t1")

cleanup() {
  local rc=$?
  [[ -n "${t_up:-}" && -z "${t_tests:-}" ]] && t_tests="$(secs "$t1") (failed)"
  "$here/down.sh" || rc=1
  "$here/down.sh" --verify || rc=1
  # The pods' logs stay for a failed run (look there first); a passing run leaves none.
  (( rc != 0 )) || rm -rf "$STAMPEDE_CLUSTER_DIR/node/pod-logs"
  echo "e2e-node: packages ${t_pkgs} s; binaries ${t_bins} s; image ${t_image} s; test build ${t_compile} s;" \
    "node up ${t_up:-?} s; tests ${t_tests:-?} s; total $(secs "$t0") s" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$here/down.sh" --quiet   # a previous run's leftovers, if any
t1=$(date +%s.%N)
"$here/up.sh" --node=real
t_up=$(secs "$t1")
t1=$(date +%s.%N)
"$CARGO" test --workspace --test realnode -- --ignored --test-threads=1 "$@"
t_tests=$(secs "$t1")
