#!/usr/bin/env bash
# Starts the local Kubernetes control plane for the e2e tests, on 127.0.0.1 only:
#   etcd -> kube-apiserver (own CA, service-account keys, RBAC, admin identity) -> /readyz ->
#   kube-controller-manager, kube-scheduler -> the Node that runs pods, one of:
#   --node=agent (default)  stampede-node-agent: pods as local processes; no root needed
#   --node=real             a real node (node.sh): containerd + runc, the kubelet, kube-proxy and
#                           CoreDNS, pods in containers on a bridge of their own; needs root.
#                           Imports the pause image and Stampede's image (STAMPEDE_IMAGE_ARCHIVE,
#                           default target/image/stampede.oci.tar, built by image/build.sh when missing).
# Every process is recorded in $STATE/pids ("name pid start-time") and down.sh stops exactly those.
# Idempotent: when the recorded cluster is up and ready it does nothing; leftovers of a cluster
# that is not are stopped and wiped first. Writes $STATE/kubeconfig (cluster-admin) and
# $STATE/cluster.env (read by stampede_testcluster::TestCluster).
#
# Environment: STAMPEDE_CLUSTER_DIR (state folder, default tests/cluster/.run/dev; make e2e uses .run/e2e),
# STAMPEDE_NODE_AGENT (agent binary; default: built here with cargo), STAMPEDE_AGENT_IMAGES
# (extra image-table entries for the agent), STAMPEDE_RUNNER_BIN (the `stampede` binary runner
# pods run; default: the debug build of CARGO_TARGET_DIR), CARGO_TARGET_DIR.
set -Eeuo pipefail   # -E: the ERR trap (stop what started, show logs) also fires inside functions
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
state="${STAMPEDE_CLUSTER_DIR:-$here/.run/dev}"
node_name="stampede-node"
t_start=$(date +%s.%N)
node_kind="${STAMPEDE_NODE:-agent}"
for arg in "$@"; do
  case "$arg" in
    --node=agent|--node=real) node_kind="${arg#--node=}" ;;
    *) echo "cluster-up: unknown argument $arg (expected --node=agent or --node=real)" >&2; exit 2 ;;
  esac
done
real=0
if [[ "$node_kind" == real ]]; then
  real=1
  # shellcheck source=node.sh
  source "$here/node.sh"
  node_require_root   # before anything else: without root, say so and stop
  node_name="$NODE_NAME_REAL"
fi

log() { echo "cluster-up: $*" >&2; }

# One up/down at a time per state folder: two concurrent starts would wipe each other's records
# and orphan processes. The started daemons must not inherit the lock's descriptor (see start).
mkdir -p "$(dirname "$state")"
exec 9>"$state.lock"
flock -w 900 9 || { log "$state.lock is held by another up/down for 15 min; giving up"; exit 1; }
export STAMPEDE_CLUSTER_LOCKED=1

if "$here/down.sh" --check-running 2>/dev/null; then
  log "already running (state in $state)"
  exit 0
fi
"$here/down.sh" --quiet || true
(( real == 0 )) || node_require_free   # after our own leftovers are gone, before anything is recorded

if (( real )); then bin="$("$here/build.sh" --node)"; else bin="$("$here/build.sh")"; fi
kubectl="$bin/kubectl"
if (( real )); then
  image_archive="${STAMPEDE_IMAGE_ARCHIVE:-$repo/target/image/stampede.oci.tar}"
  if [[ ! -f "$image_archive" ]]; then
    log "building Stampede's image ($image_archive)"
    IMAGE_OUT="$image_archive" "$repo/image/build.sh" >/dev/null
  fi
  [[ -f "$image_archive.name" ]] || { log "$image_archive.name (the image's reference) is missing; rebuild the image"; exit 1; }
  stampede_image="$(cat "$image_archive.name")"
elif [[ -z "${STAMPEDE_NODE_AGENT:-}" ]]; then
  log "building the node agent"
  (cd "$repo" && cargo build --quiet -p stampede-testcluster --bin stampede-node-agent)
  STAMPEDE_NODE_AGENT="${CARGO_TARGET_DIR:-$repo/target}/debug/stampede-node-agent"
fi
(( real )) || [[ -x "$STAMPEDE_NODE_AGENT" ]] || { log "node agent $STAMPEDE_NODE_AGENT not found"; exit 1; }

t_ready_to_start=$(date +%s.%N)
rm -rf "$state"
mkdir -p "$state"/{pki,logs,etcd,agent}
chmod 700 "$state"
state="$(cd "$state" && pwd)"
pki="$state/pki"
if (( real )); then
  NODE_DIR="$state/node"
  node_record_host   # before the node changes anything; down.sh puts the host back to this
fi

fail() {
  trap - ERR
  log "FAILED: $*"
  for f in "$state"/logs/*.log; do
    [[ -f "$f" ]] || continue
    echo "----- last lines of $f" >&2
    tail -n 25 "$f" >&2
  done
  "$here/down.sh" --quiet || true
  log "FAILED: $*   (the logs' last lines are above)"   # again, last: CI shows the output's tail
  exit 1
}
trap 'fail "unexpected error at line $LINENO"' ERR

# --- free ports on 127.0.0.1 --------------------------------------------------------------------
# Below the kernel's ephemeral range, so that no outgoing connection can take a port between the
# check and the listen; each port once (pick_port sets the variable in this shell, which keeps
# the list of ports taken).
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
(( ephemeral_low > 12000 )) || ephemeral_low=60000
taken=" "
pick_port() { # variable
  local p
  for _ in $(seq 500); do
    p=$((10000 + RANDOM % (ephemeral_low - 10000)))
    [[ "$taken" == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      taken+="$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
  fail "no free port found on 127.0.0.1 between 10000 and $ephemeral_low"
}
pick_port etcd_port; pick_port etcd_peer_port; pick_port api_port
pick_port kcm_port; pick_port sched_port
api="https://127.0.0.1:$api_port"

# --- PKI: a CA, the API server's serving cert, client certs, service-account keys ----------------
(
  cd "$pki"
  exec 2>>"$state/logs/pki.log" >&2
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -keyout ca.key -out ca.crt -subj "/CN=stampede-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
  cert() { # name subject extensions
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
    printf '%b' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt"
    rm -f "$1.csr" "$1.ext"
  }
  client="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
  cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
  cert admin "/O=system:masters/CN=stampede-admin" "$client"
  cert node-agent "/O=system:masters/CN=stampede-node-agent" "$client"
  cert controller-manager "/CN=system:kube-controller-manager" "$client"
  cert scheduler "/CN=system:kube-scheduler" "$client"
  (( real == 0 )) || node_pki
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key
  openssl pkey -in sa.key -pubout -out sa.pub
  chmod 600 ./*.key
)

kubeconfig() { # file user
  local ca crt key
  ca=$(base64 -w0 < "$pki/ca.crt"); crt=$(base64 -w0 < "$pki/$2.crt"); key=$(base64 -w0 < "$pki/$2.key")
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: stampede-local
  cluster:
    server: $api
    certificate-authority-data: $ca
users:
- name: $2
  user:
    client-certificate-data: $crt
    client-key-data: $key
contexts:
- name: stampede-local
  context:
    cluster: stampede-local
    user: $2
current-context: stampede-local
EOF
  chmod 600 "$1"
}
kubeconfigs() { # again when the API server's port changes
  kubeconfig "$state/kubeconfig" admin
  kubeconfig "$state/node-agent.kubeconfig" node-agent
  kubeconfig "$state/controller-manager.kubeconfig" controller-manager
  kubeconfig "$state/scheduler.kubeconfig" scheduler
  if (( real )); then
    kubeconfig "$state/kubelet.kubeconfig" kubelet
    kubeconfig "$state/kube-proxy.kubeconfig" kube-proxy
  fi
}
kubeconfigs

# --- processes ----------------------------------------------------------------------------------
start() { # name command...
  local name=$1; shift
  setsid "$@" >"$state/logs/$name.log" 2>&1 < /dev/null 9>&- &
  local pid=$!
  local start_time
  start_time=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $20}') || true
  [[ -n "$start_time" ]] || fail "$name exited as soon as it started"
  echo "$name $pid $start_time" >> "$state/pids"
  eval "${name//-/_}_pid=$pid"
}
alive() { kill -0 "$1" 2>/dev/null; }
# A port found free can still be taken by someone else before the process listens on it. A
# process started with `clash_log=NAME wait_until ...` that exits saying so makes wait_until
# return 1 (the caller picks new ports and starts it again) instead of failing.
wait_until() { # what seconds pid command...
  local what=$1 secs=$2 pid=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$pid"; then
      if [[ -n "${clash_log:-}" ]] && grep -q "address already in use" "$state/logs/$clash_log.log" 2>/dev/null; then
        log "$what: its port was taken before it listened ($(grep -m1 -o '[^ ]*address already in use' "$state/logs/$clash_log.log")); new ports"
        sed -i "/^$clash_log /d" "$state/pids"
        return 1
      fi
      fail "$what: the process exited"
    fi
    (( SECONDS < deadline )) || fail "$what: not ready after ${secs}s"
    sleep 0.2
  done
}
k() { "$kubectl" --kubeconfig="$state/kubeconfig" "$@"; }

start_etcd() {
  rm -rf "$state/etcd"; mkdir -p "$state/etcd"
  start etcd "$bin/etcd" --name=stampede --data-dir="$state/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="stampede=http://127.0.0.1:$etcd_peer_port" --unsafe-no-fsync --log-level=warn
}
etcd_health() ( exec 3<>"/dev/tcp/127.0.0.1/$etcd_port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && grep -q '"health":"true"' <&3 )
for attempt in 1 2 3; do
  start_etcd
  clash_log=etcd wait_until "etcd" 30 "$etcd_pid" etcd_health && break
  (( attempt < 3 )) || fail "etcd: its ports were taken by others three times"
  pick_port etcd_port; pick_port etcd_peer_port
done

extra_api_flags=()
(( real == 0 )) || mapfile -t extra_api_flags < <(node_apiserver_flags)
# An audit of writes by service accounts (operators and runners run as such): who wrote what,
# when. The leader-election test reads it to show that two operator replicas never both write.
cat >"$state/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
POLICY
start_apiserver() {
  start kube-apiserver "$bin/kube-apiserver" "${extra_api_flags[@]}" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --cert-dir="$pki/apiserver-generated" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
    --endpoint-reconciler-type=none --profiling=false --v=1 \
    --audit-policy-file="$state/audit-policy.yaml" --audit-log-path="$state/logs/audit.jsonl" \
    --audit-log-format=json --audit-log-maxsize=100 --audit-log-maxbackup=1
}
for attempt in 1 2 3; do
  start_apiserver
  clash_log=kube-apiserver wait_until "kube-apiserver /readyz" 120 "$kube_apiserver_pid" k get --raw=/readyz && break
  (( attempt < 3 )) || fail "kube-apiserver: its port was taken by others three times"
  pick_port api_port; api="https://127.0.0.1:$api_port"; kubeconfigs
done
t_api=$(date +%s.%N)

start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$state/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$state/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$state/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" --cert-dir="$pki/controller-manager-generated" \
  --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --controllers='*' --profiling=false --v=1
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$state/scheduler.kubeconfig" \
  --authentication-kubeconfig="$state/scheduler.kubeconfig" \
  --authorization-kubeconfig="$state/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$sched_port" --cert-dir="$pki/scheduler-generated" \
  --leader-elect=false --profiling=false --v=1
if (( real )); then
  node_network
  node_pause_image
  node_containerd
  node_import "$NODE_DIR/pause.oci.tar" "$image_archive"
  node_kubelet
  node_kube_proxy
  node_coredns
  node_pid_for_wait="$kubelet_pid"
else
# Stampede's own image runs the stampede binary built in this workspace (runner pods); the
# workspace's debug folder is on the pods' PATH so that a container `command: [stampede-operator]`
# (the chart's operator Deployment) finds the other binary of that image. STAMPEDE_RUNNER_BIN:
# another build of it (`make bench-scale` runs release builds, as the image holds).
stampede_bin="${STAMPEDE_RUNNER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/stampede}"
images="busybox=/bin/sh alpine=/bin/sh registry.k8s.io/kubectl=$kubectl bitnami/kubectl=$kubectl ghcr.io/stampede-dev/stampede=$stampede_bin ${STAMPEDE_AGENT_IMAGES:-}"
start node-agent "$STAMPEDE_NODE_AGENT" --extra-images="$images" \
  --kubeconfig="$state/node-agent.kubeconfig" --node-name="$node_name" --work-dir="$state/agent" \
  --pod-path="$bin:$(dirname "$stampede_bin"):/usr/local/bin:/usr/bin:/bin"
node_pid_for_wait="$node_agent_pid"
fi

kcm_healthy() { k get --raw=/api/v1/namespaces/default/serviceaccounts/default; }
node_schedulable() {
  [[ "$(k get node "$node_name" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints}')" == "True " ]]
}
scheduler_healthy() ( exec 3<>"/dev/tcp/127.0.0.1/$sched_port" )
wait_until "kube-controller-manager (default ServiceAccount)" 90 "$kube_controller_manager_pid" kcm_healthy
wait_until "kube-scheduler" 60 "$kube_scheduler_pid" scheduler_healthy
wait_until "node $node_name Ready and untainted" 60 "$node_pid_for_wait" node_schedulable
t_end=$(date +%s.%N)

# The project rule: the control plane listens on 127.0.0.1 only. Check every listening socket of
# every recorded process.
while read -r name pid _; do
  # (CoreDNS answers pods on the bridge's own address: that is the node's cluster DNS.)
  exposed=$(ss -Hltnp 2>/dev/null | grep "pid=$pid," | awk '{print $4}' | grep -v '^127\.0\.0\.1:' |
    { if (( real )); then grep -vxF "$NODE_GATEWAY:53"; else cat; fi; } || true)
  [[ -z "$exposed" ]] || fail "$name (pid $pid) listens beyond 127.0.0.1: $exposed"
done < "$state/pids"

cat > "$state/cluster.env" <<EOF
# Written by tests/cluster/up.sh; read by stampede_testcluster::TestCluster.
K8S_VERSION=$K8S_VERSION
KUBECONFIG=$state/kubeconfig
KUBECTL=$kubectl
K8S_BIN=$bin
API_SERVER=$api
NODE_NAME=$node_name
AGENT_DIR=$state/agent
APISERVER_PID=$kube_apiserver_pid
ETCD_URL=http://127.0.0.1:$etcd_port
NODE_KIND=$node_kind
EOF
if (( real )); then
  cat >> "$state/cluster.env" <<EOF
CONTAINERD_SOCK=$NODE_SOCK
CRICTL=$bin/crictl
POD_CIDR=$NODE_POD_CIDR
STAMPEDE_IMAGE=$stampede_image
EOF
fi
trap - ERR
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
log "Kubernetes $K8S_VERSION up at $api: apiserver ready in $(secs "$t_ready_to_start" "$t_api") s," \
  "whole control plane + node in $(secs "$t_ready_to_start" "$t_end") s (script total $(secs "$t_start" "$t_end") s)"
log "export KUBECONFIG=$state/kubeconfig   # kubectl: $kubectl"
