#!/usr/bin/env bash
# The hpclaunch test cluster: slurmctld, slurmdbd + MariaDB, munge and 4 compute nodes
# (n1..n4, 4 fake GPUs each), from the configs in etc/. Two ways to run the same cluster:
#
#   cluster.sh [--mode docker|native] up|down|status|smoke|logs
#
#   docker  controller, database and node containers on the host network (the design's test cluster)
#   native  the same daemons as processes on this host, for machines without a Docker engine
#
# The mode defaults to $HPCLAUNCH_CLUSTER_MODE, else docker. This host acts as the login node
# in both: it gets munge, the Slurm client commands and /etc/slurm. Debian 12, as root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib/daemons.sh
source "$HERE/lib/daemons.sh"
# shellcheck source=lib/host.sh
source "$HERE/lib/host.sh"
# shellcheck source=lib/native.sh
source "$HERE/lib/native.sh"
# shellcheck source=lib/docker.sh
source "$HERE/lib/docker.sh"

MODE=${HPCLAUNCH_CLUSTER_MODE:-docker}
if [[ ${1:-} == --mode ]]; then MODE=${2:?--mode takes docker or native}; shift 2; fi
[[ $MODE == docker || $MODE == native ]] || die "unknown mode '$MODE' (use docker or native)"
[[ $(id -u) == 0 ]] || die "run as root: the cluster installs packages and starts daemons"

cmd_up() {
  local other=native
  [[ $MODE == native ]] && other=docker
  if "${other}_running"; then
    die "the $other cluster is running and uses the same ports: '$0 --mode $other down' first"
  fi
  local t0=$SECONDS
  "${MODE}_install"
  host_setup
  "${MODE}_up"
  setup_accounting
  wait_nodes_idle
  log "$MODE cluster up in $((SECONDS - t0)) s: $(sinfo -h -o '%D nodes %G' | head -1)"
}

cmd_down() {
  local other=native
  [[ $MODE == native ]] && other=docker
  "${MODE}_down"
  if [[ -e $STATE/.mode-$other ]]; then
    log "$MODE cluster down; the $other cluster's state stays (stop it with --mode $other down)"
    return 0
  fi
  host_teardown
  log "$MODE cluster down"
}

cmd_status() {
  if "${MODE}_running"; then
    "${MODE}_status"
    sinfo -N -p gpu -o '%N %T %G %c %m' 2>/dev/null || true
  else
    echo "$MODE cluster: not running"
    return 3
  fi
}

# Multi-node smoke check: 4 distinct node names, each seeing a GPU through CUDA_VISIBLE_DEVICES.
cmd_smoke() {
  local out names
  out=$(srun -N4 --gpus-per-node=1 -t 1 bash -c 'echo "$(hostname) CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"')
  echo "$out"
  names=$(awk '{print $1}' <<<"$out" | sort -u | wc -l)
  [[ $names == 4 ]] || die "smoke: expected 4 distinct node names, got $names"
  if grep -q 'CUDA_VISIBLE_DEVICES=unset' <<<"$out"; then die "smoke: a node saw no GPU"; fi
  log "smoke ok: srun -N4 --gpus-per-node=1 ran on 4 nodes, each with a GPU"
}

cmd_logs() { tail -n "${1:-50}" "$STATE"/log/*.log; }

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  smoke) cmd_smoke ;;
  logs) shift; cmd_logs "$@" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
