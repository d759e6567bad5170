# The real node of the local cluster (up.sh --node=real): a private containerd, the real kubelet,
# kube-proxy and CoreDNS, pods on a bridge this harness makes and removes. Sourced by up.sh
# (node_up) and down.sh (node_stop, node_verify); see README.md "The real node" and
# ../../../shared/research/real-node.md for why each setting is there.
#
# Everything the node changes on the host is recorded before it starts ($NODE_DIR/before/) and
# put back by node_stop; node_verify compares the host with that record: processes, mounts,
# interfaces, iptables (IPv4 and IPv6, every table), cgroups (every hierarchy), sysctls and the
# host folders containerd and the kubelet write to.
# shellcheck shell=bash

NODE_NAME_REAL=localhost                 # a loopback InternalIP is refused; the name resolves to 127.0.0.1
NODE_BRIDGE=stampede0
NODE_POD_CIDR=10.244.77.0/24
NODE_GATEWAY=10.244.77.1                 # the bridge's address: node IP and cluster DNS
NODE_SERVICE_CIDR=10.96.0.0/16
NODE_KUBERNETES_IP=10.96.0.1             # the `kubernetes` Service (first address of the range)
PAUSE_IMAGE=stampede.invalid/pause:1
# Sysctls the kubelet, kube-proxy or the bridge plugin may write (recorded and put back; the
# whole `sysctl -a` is compared as well, less counters that move by themselves).
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.forwarding
  net.ipv4.conf.default.forwarding net.ipv4.conf.all.route_localnet net.ipv6.conf.all.forwarding
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait)
# Host folders containerd, runc, CNI and the kubelet write to whatever their configuration says.
NODE_HOST_PATHS=(/run/containerd /run/netns /var/lib/cni /var/log/containers /var/log/pods
  /var/lib/kubelet /var/lib/containerd /opt/containerd /etc/cni /opt/cni /run/runc /run/mount)
# Sysctls that change by themselves; left out of the whole-table comparison.
NODE_SYSCTL_VOLATILE='^(kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|fs\.(dentry-state|file-nr|inode-nr|inode-state|quota)|net\.netfilter\.nf_conntrack_count|kernel\.sched_domain|kernel\.tainted|vm\.(stat_refresh|drop_caches)|net\.ipv6\.route\.flush|net\.ipv4\.route\.flush|dev\.cdrom|fs\.binfmt_misc)'

NODE_DIR="$state/node"

node_log() { echo "real-node: $*" >&2; }

# Whether GET http://127.0.0.1:PORT/PATH answers with a line matching PATTERN (a health probe).
node_http_ok() ( # port path pattern
  exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET %s HTTP/1.0\r\n\r\n' "$2" >&3 && grep -q "$3" <&3
)

node_require_root() {
  if (( EUID != 0 )); then
    echo "real-node: the real node needs root (containerd, runc, network namespaces, iptables, cgroups);" \
      "run as root, or use the node-agent suite (make e2e), which does not" >&2
    exit 2
  fi
  local tool
  for tool in containerd runc ctr iptables ip6tables iptables-save ip sysctl gcc; do
    command -v "$tool" >/dev/null || { echo "real-node: $tool is missing (make e2e-node installs it)" >&2; exit 2; }
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    { echo "real-node: the CNI plugins (Debian containernetworking-plugins) are missing" >&2; exit 2; }
}

# One real node per machine: it owns the bridge, the iptables chains and the cgroups it makes.
# Checked before anything is recorded, so that stopping this attempt touches nothing of the other.
node_require_free() {
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    echo "real-node: bridge $NODE_BRIDGE exists: another real node runs on this machine (or one was" \
      "left behind: stop it with STAMPEDE_CLUSTER_DIR=<its folder> tests/cluster/down.sh, or" \
      "ip link delete $NODE_BRIDGE)" >&2
    exit 2
  fi
}

# --- the record of the host --------------------------------------------------------------------
node_iptables_dump() { # v4|v6: every table, without counters or comments
  local save=iptables-save
  [[ "$1" == v6 ]] && save=ip6tables-save
  # A table with no rule and only built-in chains that accept is left out: with nftables,
  # adding and removing a rule leaves such an empty table behind, which filters nothing.
  "$save" 2>/dev/null | sed -e '/^#/d' -e 's/ *\[[0-9]*:[0-9]*\]$//' | awk '
    /^\*/ { block = $0 "\n"; keep = 0; next }
    /^COMMIT/ { if (keep) printf "%sCOMMIT\n", block; block = ""; next }
    { block = block $0 "\n"; if ($0 !~ /^:[A-Z]+ ACCEPT$/) keep = 1 }'
}
node_cgroups_dump() { # the top two levels of every hierarchy
  local h
  for h in /sys/fs/cgroup/*/; do
    find "$h" -mindepth 1 -maxdepth 2 -type d 2>/dev/null | sort
  done
}
node_sysctl_dump() { sysctl -a 2>/dev/null | grep -Ev "$NODE_SYSCTL_VOLATILE" | sort; }
node_paths_dump() { local p; for p in "${NODE_HOST_PATHS[@]}"; do [[ -e "$p" ]] && echo "$p"; done; true; }
node_links_dump() { ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }
node_mounts_dump() { awk '{print $5}' /proc/self/mountinfo | sort; }

node_record_host() {
  local b="$NODE_DIR/before"
  mkdir -p "$b"
  node_iptables_dump v4 > "$b/iptables-v4"
  node_iptables_dump v6 > "$b/iptables-v6"
  node_cgroups_dump > "$b/cgroups"
  node_sysctl_dump > "$b/sysctl-all"
  local k
  for k in "${NODE_SYSCTLS[@]}"; do
    [[ -e "/proc/sys/${k//.//}" ]] && echo "$k=$(sysctl -n "$k")"
  done > "$b/sysctl"
  node_paths_dump > "$b/paths"
  node_links_dump > "$b/links"
  node_mounts_dump > "$b/mounts"
}

# --- start ---------------------------------------------------------------------------------------
node_pki() { # called inside up.sh's PKI subshell (cwd = pki, cert() defined)
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME_REAL" "$client"
  cert kube-proxy "/CN=system:kube-proxy" "$client"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
}

node_apiserver_flags() {
  echo "--kubelet-client-certificate=$pki/apiserver-kubelet-client.crt"
  echo "--kubelet-client-key=$pki/apiserver-kubelet-client.key"
  echo "--kubelet-preferred-address-types=Hostname"
}

node_pause_image() { # builds the sandbox image (a static C program) into $NODE_DIR/pause.oci.tar
  local d="$NODE_DIR/pause"
  mkdir -p "$d"
  gcc -static -O2 -s -o "$d/pause" "$here/node/pause.c"
  python3 "$repo/image/oci.py" --out "$NODE_DIR/pause.oci.tar" --name "$PAUSE_IMAGE" --created 0 \
    --entrypoint /pause --user 65535:65535 --file "/pause=$d/pause:0755" >/dev/null
}

node_network() {
  # The pod network must not shadow a route of this machine.
  if ip route show | grep -q "^${NODE_POD_CIDR%.*}\."; then
    fail "a route for ${NODE_POD_CIDR} exists already; the real node needs that range for its bridge"
  fi
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_GATEWAY/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Pods in their own network namespace reach the API server (127.0.0.1 only) through the
  # `kubernetes` Service address: DNAT from the bridge, which needs route_localnet on it.
  sysctl -qw "net.ipv4.conf.$NODE_BRIDGE.route_localnet=1"
  iptables -t nat -N STAMPEDE-NODE
  iptables -t nat -A STAMPEDE-NODE -i "$NODE_BRIDGE" -d "$NODE_KUBERNETES_IP/32" -p tcp --dport 443 \
    -j DNAT --to-destination "127.0.0.1:$api_port"
  iptables -t nat -I PREROUTING 1 -j STAMPEDE-NODE
  # Forwarding off the bridge goes nowhere: pod traffic stays on the bridge (or the host). In
  # the mangle table, whose FORWARD chain runs before filter's, where kube-proxy and the kubelet
  # put their ACCEPT rules: nothing they add can come before it.
  local ipt
  for ipt in iptables ip6tables; do
    "$ipt" -t mangle -N STAMPEDE-NODE-FORWARD
    "$ipt" -t mangle -A STAMPEDE-NODE-FORWARD -i "$NODE_BRIDGE" ! -o "$NODE_BRIDGE" -j DROP
    "$ipt" -t mangle -I FORWARD 1 -j STAMPEDE-NODE-FORWARD
  done
  mkdir -p "$NODE_DIR/cni" "$NODE_DIR/cni-ipam"
  cat > "$NODE_DIR/cni/10-stampede.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "stampede",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$NODE_DIR/cni-ipam"
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

node_containerd() {
  local c="$NODE_DIR/containerd"
  mkdir -p "$c"/{root,state,opt} "$NODE_DIR/runc"
  NODE_SOCK="$c/containerd.sock"
  cat > "$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$NODE_SOCK"
[ttrpc]
  address = "$NODE_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "$NODE_DIR/runc-v1"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc create.
  restrict_oom_score_adj = true
  disable_apparmor = true
  tolerate_missing_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$NODE_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
    max_conf_num = 1
EOF
  start containerd containerd --config "$c/config.toml" --log-level warn
  wait_until "containerd" 30 "$containerd_pid" ctr -a "$NODE_SOCK" version
}

node_import() { # archive...
  local a
  for a in "$@"; do
    ctr -a "$NODE_SOCK" -n k8s.io images import "$a" >>"$state/logs/images.log" 2>&1 ||
      fail "importing $a into containerd (see $state/logs/images.log)"
  done
}

node_kubelet() {
  local k="$NODE_DIR/kubelet" kubelet_port healthz_port
  mkdir -p "$k" "$NODE_DIR/pod-logs" "$NODE_DIR/kubelet-pki"
  pick_port kubelet_port; pick_port healthz_port
  echo "# the cluster DNS is in clusterDNS; pods get no resolver of the host" > "$NODE_DIR/resolv.conf"
  cat > "$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$NODE_SOCK
podLogsDir: $NODE_DIR/pod-logs
clusterDNS: [$NODE_GATEWAY]
clusterDomain: cluster.local
resolvConf: $NODE_DIR/resolv.conf
evictionHard: {memory.available: 1%, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
shutdownGracePeriod: 0s
maxPods: 110
EOF
  start kubelet "$bin/kubelet" --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$state/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME_REAL" --node-ip="$NODE_GATEWAY" --root-dir="$k" \
    --cert-dir="$NODE_DIR/kubelet-pki" --v=1
  wait_until "kubelet /healthz" 60 "$kubelet_pid" node_http_ok "$healthz_port" /healthz '^ok'
}

node_kube_proxy() {
  local healthz metrics
  pick_port healthz; pick_port metrics
  cat > "$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME_REAL
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$healthz
metricsBindAddress: 127.0.0.1:$metrics
mode: iptables
clusterCIDR: $NODE_POD_CIDR
detectLocalMode: ClusterCIDR
nodePortAddresses: [$NODE_GATEWAY/32]
iptables: {localhostNodePorts: false, masqueradeAll: false, syncPeriod: 10s, minSyncPeriod: 0s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start kube-proxy "$bin/kube-proxy" --config="$NODE_DIR/kube-proxy.yaml" --v=1
  wait_until "kube-proxy /healthz (rules synced)" 60 "$kube_proxy_pid" node_http_ok "$healthz" /healthz '200 OK'
}

node_coredns() {
  local health ready
  pick_port health; pick_port ready
  cat > "$NODE_DIR/Corefile" <<EOF
.:53 {
    bind $NODE_GATEWAY
    errors
    health 127.0.0.1:$health
    ready 127.0.0.1:$ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $state/kubeconfig stampede-local
        pods insecure
        ttl 5
    }
    cache 5
}
EOF
  start coredns "$bin/coredns" -conf "$NODE_DIR/Corefile"
  wait_until "CoreDNS /ready" 60 "$coredns_pid" node_http_ok "$ready" /ready '200 OK'
}

# --- stop ----------------------------------------------------------------------------------------
# Removes every pod sandbox through the CRI (so CNI tears down their network namespaces and
# addresses), while containerd still runs and after the kubelet stopped (so it re-creates none).
node_remove_pods() {
  local crictl="$1" sock="$NODE_DIR/containerd/containerd.sock"
  [[ -S "$sock" && -x "$crictl" ]] || return 0
  "$crictl" --runtime-endpoint "unix://$sock" --timeout 30s rmp --all --force >/dev/null 2>&1 || true
  "$crictl" --runtime-endpoint "unix://$sock" --timeout 30s rmi --prune >/dev/null 2>&1 || true
}

# Leftover shims and containers of this node (their command lines name its containerd socket or state).
node_leftover_pids() {
  local p
  for p in /proc/[0-9]*; do
    grep -qaF "$NODE_DIR/" "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
  done
  true
}

node_restore_host() {
  local b="$NODE_DIR/before" ipt m k v p h
  [[ -d "$b" ]] || return 0
  # Processes that outlived containerd (shims, container processes): killed.
  for p in $(node_leftover_pids); do kill -KILL "$p" 2>/dev/null || true; done
  # Mounts under the node's folders (the kubelet's bind mount of its root, pod volumes, container
  # root file systems, sandbox /dev/shm, CNI network namespaces), deepest first.
  for _ in 1 2 3; do
    while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
      awk '{print $5}' /proc/self/mountinfo | grep -E "^$NODE_DIR/|^/run/netns/cni-|^/run/containerd/" | sort -r)
  done
  # kube-proxy's own clean-up of its chains, then the kubelet's chains and the harness's.
  if [[ -x "${bin:-}/kube-proxy" ]]; then "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  for ipt in iptables ip6tables; do
    "$ipt" -t nat -D PREROUTING -j STAMPEDE-NODE 2>/dev/null || true
    "$ipt" -t mangle -D FORWARD -j STAMPEDE-NODE-FORWARD 2>/dev/null || true
    local t chain
    for t in filter nat mangle raw; do
      # Rules in the built-in chains that jump to a KUBE- chain, then the chains themselves.
      "$ipt-save" -t "$t" 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE-|STAMPEDE-NODE)' | sed 's/^-A/-D/' |
        while read -r rule; do eval "$ipt -t $t $rule" 2>/dev/null || true; done
      for chain in $("$ipt-save" -t "$t" 2>/dev/null | sed -n 's/^:\(\(KUBE-\|STAMPEDE-NODE\)[^ ]*\) .*/\1/p'); do
        "$ipt" -t "$t" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$ipt-save" -t "$t" 2>/dev/null | sed -n 's/^:\(\(KUBE-\|STAMPEDE-NODE\)[^ ]*\) .*/\1/p'); do
        "$ipt" -t "$t" -X "$chain" 2>/dev/null || true
      done
    done
  done
  # Interfaces the node made (the bridge; veths go with their namespaces).
  while read -r l; do
    grep -qxF "$l" "$b/links" || ip link delete "$l" 2>/dev/null || true
  done < <(node_links_dump)
  # Cgroups the kubelet and containerd made, in every hierarchy, deepest first; a container
  # process that outlived its shim (it no longer names the node's folder) is still in one of
  # them: killed first.
  local new_cgroups
  new_cgroups="$(for h in /sys/fs/cgroup/*/; do find "$h" -mindepth 1 -maxdepth 1 -type d; done |
    grep -vxF -f "$b/cgroups" || true)"
  for d in $new_cgroups; do
    for p in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  [[ -z "$new_cgroups" ]] || sleep 0.2
  for d in $new_cgroups; do find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
  # Sysctls, as they were.
  while IFS='=' read -r k v; do
    [[ "$(sysctl -n "$k" 2>/dev/null)" == "$v" ]] || sysctl -qw "$k=$v" 2>/dev/null || true
  done < "$b/sysctl"
  # Host folders that did not exist before (e.g. /run/containerd for the shims' sockets).
  for p in "${NODE_HOST_PATHS[@]}"; do
    [[ -e "$p" ]] && ! grep -qxF "$p" "$b/paths" && rm -rf "$p"
  done
  true
}

# Exit status 1 and a line per difference when the host is not as recorded.
node_verify() {
  local b="$NODE_DIR/before" left=0 what
  [[ -d "$b" ]] || return 0
  local pids
  pids="$(node_leftover_pids | tr '\n' ' ')"
  [[ -z "${pids// }" ]] || { echo "real-node: processes of the node still run: $pids" >&2; left=1; }
  local mounts
  mounts="$(awk '{print $5}' /proc/self/mountinfo | grep -E "^$NODE_DIR/|^/run/netns/cni-|^/run/containerd/" || true)"
  [[ -z "$mounts" ]] || { echo "real-node: mounts left: $mounts" >&2; left=1; }
  for what in "iptables-v4:node_iptables_dump v4" "iptables-v6:node_iptables_dump v6" "cgroups:node_cgroups_dump" \
              "sysctl-all:node_sysctl_dump" "paths:node_paths_dump" "links:node_links_dump" "mounts:node_mounts_dump"; do
    local diff
    diff="$(diff <(${what#*:}) "$b/${what%%:*}" || true)"
    [[ -z "$diff" ]] || { echo "real-node: ${what%%:*} differ from before the node started (< now, > before):" >&2; echo "$diff" | head -20 >&2; left=1; }
  done
  (( left == 0 )) && echo "real-node: verified: no process, mount, interface, iptables rule, cgroup, sysctl or host folder of the node is left" >&2
  return $left
}
