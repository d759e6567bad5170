#!/usr/bin/env bash
# Stops the local control plane started by up.sh: exactly the processes recorded in
# $STATE/pids (never by name), newest first, SIGTERM then SIGKILL after 10 s; then any pod
# process group the node agent recorded and left behind. A PID is only signalled while its
# start time still matches the recorded one, so a reused PID is never touched. For a real node
# (up.sh --node=real) it also removes the pods through the CRI and puts the host back as it was
# (node.sh: mounts, interfaces, iptables, cgroups, sysctls, folders); --verify checks all of it.
#   down.sh                  stop (idempotent; nothing recorded = nothing to do)
#   down.sh --verify         exit 1 if any recorded process is still alive
#   down.sh --check-running  exit 0 only if every recorded process is alive and the API is ready
#   down.sh --quiet          stop without chatter
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state="${STAMPEDE_CLUSTER_DIR:-$here/.run/dev}"
pids="$state/pids"
mode="${1:-stop}"

if [[ "${STAMPEDE_CLUSTER_LOCKED:-}" != 1 && -d "$(dirname "$state")" ]]; then
  exec 9>"$state.lock"   # serialised with up.sh (which sets STAMPEDE_CLUSTER_LOCKED for its calls)
  flock -w 900 9 || { echo "cluster-down: $state.lock is held by another up/down" >&2; exit 1; }
fi

say() { [[ "$mode" == "--quiet" ]] || echo "cluster-down: $*" >&2; }

real=0
if [[ -d "$state/node/before" ]]; then
  real=1
  # shellcheck source=node.sh
  source "$here/node.sh"
  bin="$(sed -n 's/^K8S_BIN=//p' "$state/cluster.env" 2>/dev/null)"
  [[ -n "$bin" ]] || bin="$("$here/build.sh" --node 2>/dev/null | tail -1)"
fi

start_time() { sed "s/.*) //" "/proc/$1/stat" 2>/dev/null | awk "{print \$20}"; }
# Alive and still the process we recorded.
ours() { [[ -n "$1" && "$1" != 0 && "$(start_time "$1")" == "$2" ]]; }

pod_pidfiles() { [[ -d "$state/agent/pods" ]] && find "$state/agent/pods" -name '*.pid' -type f; }

case "$mode" in
  --check-running)
    [[ -f "$pids" && -f "$state/cluster.env" ]] || exit 1
    while read -r name pid start; do ours "$pid" "$start" || exit 1; done < "$pids"
    kubectl="$(sed -n 's/^KUBECTL=//p' "$state/cluster.env")"
    "$kubectl" --kubeconfig="$state/kubeconfig" get --raw=/readyz >/dev/null 2>&1
    exit $?
    ;;
  --verify)
    left=0
    if [[ -f "$pids" ]]; then
      while read -r name pid start; do
        if ours "$pid" "$start"; then echo "cluster-down: $name (pid $pid) is still running" >&2; left=1; fi
      done < "$pids"
    fi
    while read -r f; do
      read -r pid start < "$f" || continue
      if ours "$pid" "$start"; then echo "cluster-down: pod process $pid ($f) is still running" >&2; left=1; fi
    done < <(pod_pidfiles)
    n=$( [[ -f "$pids" ]] && wc -l < "$pids" || echo 0)
    if (( real )); then node_verify || left=1; fi
    (( left == 0 )) && echo "cluster-down: verified: none of the $n recorded control-plane processes nor any pod process is running" >&2
    exit $left
    ;;
esac

# Puts the host back once: a second stop (e.g. a start refused because another real node runs)
# must not touch what that other node made since. --verify still compares with the record.
restore_once() {
  [[ -f "$NODE_DIR/restored" ]] && return 0
  node_restore_host
  touch "$NODE_DIR/restored"
}

if [[ ! -f "$pids" ]]; then
  if (( real )); then restore_once; fi
  say "nothing recorded in $pids; nothing to stop"
  exit 0
fi

stop_one() { # name pid start
  local name=$1 pid=$2 start=$3
  ours "$pid" "$start" || return 0
  say "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do ours "$pid" "$start" || return 0; sleep 0.1; done
  say "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null
  for _ in $(seq 50); do ours "$pid" "$start" || return 0; sleep 0.1; done
}

# A real node: the kubelet first (so that it re-creates nothing), then every pod through the CRI
# while containerd still runs (CNI releases their addresses and namespaces).
if (( real )); then
  while read -r name pid start; do [[ "$name" == kubelet ]] && stop_one "$name" "$pid" "$start"; done < "$pids"
  say "removing the node's pods through the CRI"
  node_remove_pods "$bin/crictl"
fi

# Newest first: the node agent (which stops its pods) or CoreDNS, kube-proxy, containerd; then
# the scheduler, controller-manager, apiserver, etcd.
tac "$pids" | while read -r name pid start; do stop_one "$name" "$pid" "$start"; done

# Pod processes the agent could not stop (e.g. it was killed): their process groups.
while read -r f; do
  read -r pid start < "$f" || continue
  if ours "$pid" "$start"; then
    say "stopping leftover pod process group $pid ($f)"
    kill -KILL -- "-$pid" 2>/dev/null
  fi
done < <(pod_pidfiles)
if (( real )); then
  say "putting the host back as it was before the real node started"
  restore_once
fi
exit 0
