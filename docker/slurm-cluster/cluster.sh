#!/usr/bin/env bash
# The hpclaunch test cluster: slurmctld, slurmdbd + MariaDB, munge and 4 compute nodes
# (n1..n4, 4 fake GPUs each), from the configs in etc/, and the job images for containers
# (lib/images.sh: Charliecloud and Slurm's OCI/crun; lib/pyxis_stub.sh: a stand-in for
# pyxis' srun options; lib/small_fs.sh: a 16 MiB filesystem for the fault tests). Two ways
# to run the same cluster:
#
#   cluster.sh [--mode docker|native] [--slurm VERSION] up|down|status|smoke|logs|version
#   cluster.sh stop|start slurmdbd|slurmctld     (fault tests; stop slurmctld is a SIGKILL)
#   cluster.sh stop|start n1..n4                 (a node lost: its slurmd and jobs SIGKILLed)
#   cluster.sh [--mode M] [--slurm VERSION] prepare   (what `up` needs from the network, no daemon)
#
#   docker  controller, database and node containers on the host network (the design's test cluster)
#   native  the same daemons as processes on this host, for machines without a Docker engine
#   VERSION 25.11 (default), 24.11, 26.05 (built from source, build-slurm.sh) or 22.05 (Debian 12)
#
# The mode defaults to $HPCLAUNCH_CLUSTER_MODE, else docker; the version to
# $HPCLAUNCH_SLURM_VERSION, else the running cluster's, else 25.11. This host acts as the
# login node in both: it gets /etc/slurm, the cluster's own Slurm client commands on PATH
# (/usr/local/bin for a source build) and its authentication. Debian 12, as root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib/daemons.sh
source "$HERE/lib/daemons.sh"
# shellcheck source=lib/cgroups.sh
source "$HERE/lib/cgroups.sh"
# shellcheck source=lib/host.sh
source "$HERE/lib/host.sh"
# shellcheck source=lib/native.sh
source "$HERE/lib/native.sh"
# shellcheck source=lib/images.sh
source "$HERE/lib/images.sh"
# shellcheck source=lib/small_fs.sh
source "$HERE/lib/small_fs.sh"
# shellcheck source=lib/pyxis_stub.sh
source "$HERE/lib/pyxis_stub.sh"
# shellcheck source=lib/docker.sh
source "$HERE/lib/docker.sh"
# shellcheck source=lib/version.sh
source "$HERE/lib/version.sh"

MODE=${HPCLAUNCH_CLUSTER_MODE:-docker}
asked_version=
while [[ ${1:-} == --* ]]; do
  case $1 in
    --mode) MODE=${2:?--mode takes docker or native}; shift 2 ;;
    --slurm) asked_version=${2:?--slurm takes a version: ${SLURM_VERSIONS[*]}}; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
[[ $MODE == docker || $MODE == native ]] || die "unknown mode '$MODE' (use docker or native)"
[[ $(id -u) == 0 ]] || die "run as root: the cluster installs packages and starts daemons"
# Only `up` and `prepare` choose a version; the other commands act on the cluster that is there.
if [[ ${1:-} != up && ${1:-} != prepare && -n $(recorded_slurm_version) ]]; then
  asked_version=$(recorded_slurm_version)
fi
choose_slurm_version "$asked_version"

cmd_up() {
  local other=native
  [[ $MODE == native ]] && other=docker
  if "${other}_running"; then
    die "the $other cluster is running and uses the same ports: '$0 --mode $other down' first"
  fi
  local running
  running=$(recorded_slurm_version)
  if [[ -n $running && $running != "$SLURM_VERSION" ]] && "${MODE}_running"; then
    die "a Slurm $running cluster is running: '$0 --mode $MODE down' before starting $SLURM_VERSION"
  fi
  local t0=$SECONDS
  cmd_prepare
  host_setup
  install_pyxis_stub
  mount_small_fs
  timed "daemons ($MODE)" "${MODE}_up"
  timed "accounts and nodes" setup_accounting_and_nodes
  log "$MODE cluster (Slurm $SLURM_VERSION) up in $((SECONDS - t0)) s: $(sinfo -h -o '%D nodes %G' | head -1)"
}

# What `up` needs that takes the network or a while, before any daemon: Slurm's build
# dependencies, then Slurm compiles in the background (if not built yet) while the other
# packages (dpkg takes one installer at a time), the job images and the node image's
# packages are made: on a fresh machine those would otherwise wait ~4 min. In docker mode,
# then the node image. side-host.sh's second cluster, which has no network, needs this
# done outside it first (its engine copies the image from this host's engine).
cmd_prepare() {
  make_dirs
  if from_source; then timed "Slurm's build dependencies" "$HERE/build-slurm.sh" "$SLURM_VERSION" --deps; fi
  start_slurm_build
  timed "packages" install_packages
  timed "job images" build_job_images
  [[ $MODE == docker ]] && timed "docker engine and the node image's packages" docker_prepare
  timed "Slurm $SLURM_VERSION build" wait_slurm_build
  [[ $MODE != docker ]] || build_image
}

setup_accounting_and_nodes() {
  setup_accounting
  wait_nodes_idle
}

# timed NAME COMMAND...: run a step of `up`; say how long it took when it took a while.
timed() {
  local name=$1 t=$SECONDS
  shift
  "$@"
  ((SECONDS - t < 2)) || log "$name: $((SECONDS - t)) s"
}

# The Debian packages of this mode and version and of the host's part (container runtimes,
# the pyxis stub's compiler, debootstrap for the job images); build-slurm.sh --deps has
# installed what Slurm's build needs.
install_packages() {
  local packages=(munge charliecloud-runtime crun runc gcc libc6-dev debootstrap)
  if [[ $MODE == native ]]; then
    packages+=(mariadb-server)
    from_source || packages+=(slurmctld slurmd slurm-client slurmdbd libslurm-dev)
  else
    from_source || packages+=(slurm-client libslurm-dev)
    docker_usable || packages+=(docker.io docker-compose)
  fi
  apt_install "${packages[@]}"
}

# Slurm from source, in the background (build-slurm.sh: nothing to do once built).
start_slurm_build() {
  SLURM_BUILD_PID=
  from_source || return 0
  "$HERE/build-slurm.sh" "$SLURM_VERSION" --built 2>/dev/null && return 0
  log "building Slurm $SLURM_VERSION from source in the background (~3.5 min on 2 cores; log: $STATE/log/build-slurm.log)"
  "$HERE/build-slurm.sh" "$SLURM_VERSION" >"$STATE/log/build-slurm.log" 2>&1 &
  SLURM_BUILD_PID=$!
}

wait_slurm_build() {
  [[ -n ${SLURM_BUILD_PID:-} ]] || return 0
  wait "$SLURM_BUILD_PID" || { tail -20 "$STATE/log/build-slurm.log" >&2; die "building Slurm $SLURM_VERSION failed: see $STATE/log/build-slurm.log"; }
  # The build's own time, when it built ("Slurm 25.11 built in /opt/slurm-25.11 in 204 s ...").
  grep -hE ' built in \S+ in [0-9]+ s' "$STATE/log/build-slurm.log" >&2 || true
}

cmd_down() {
  local other=native
  [[ $MODE == native ]] && other=docker
  "${MODE}_down"
  unmount_small_fs
  if [[ -e $STATE/.mode-$other ]]; then
    log "$MODE cluster down; the $other cluster's state stays (stop it with --mode $other down)"
    return 0
  fi
  remove_pyxis_stub
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

# The running cluster's Slurm version (as up recorded it), for scripts; exit 3 if none.
cmd_version() {
  local v
  v=$(recorded_slurm_version)
  [[ -n $v ]] && "${MODE}_running" || return 3
  echo "$v"
}

cmd_logs() { tail -n "${1:-50}" "$STATE"/log/*.log; }

# A slurmctld writes assoc_usage first after 5 minutes (or at a clean shutdown); SIGKILLed
# before, it refuses to start again: "fatal: No Assoc usage file (.../assoc_usage) to
# recover" (25.11, seen with a cluster just brought up). The controller of a real cluster
# saved it long ago: a younger one is shut down cleanly (which saves every state file) and
# started again before the crash a fault test asks for.
ctld_state_saved() {
  local file=/var/lib/hpclaunch-cluster/ctld/assoc_usage  # StateSaveLocation
  if [[ $MODE == docker ]]; then compose exec -T ctl test -e "$file"; else test -e "$file"; fi
}

save_ctld_state() {
  ctld_state_saved && return 0
  scontrol shutdown slurmctld >/dev/null
  local i
  for ((i = 0; i < 60; i++)); do scontrol ping >/dev/null 2>&1 || break; sleep 0.5; done
  rm -f "$STATE/run/slurmctld.pid"
  cmd_start slurmctld >/dev/null
}

# A native node is its slurmd and what runs under it, all in the node's cgroup
# (lib/cgroups.sh enter_node_cgroup): SIGKILL every process there, as a node that dies.
kill_node() {
  local node=$1 pids
  if ! cgroups_usable; then  # no node cgroup: its slurmd only (its steps live on)
    pid_alive "$STATE/run/slurmd-$node.pid" slurmd && kill -KILL "$(cat "$STATE/run/slurmd-$node.pid")"
    rm -f "$STATE/run/slurmd-$node.pid"
    return 0
  fi
  rm -f "$STATE/run/slurmd-$node.pid"
  for _ in 1 2 3; do
    pids=$(find "/sys/fs/cgroup/${CGROUP_CONTROLLERS[0]}/hpclaunch-cluster/$node" \
      -name cgroup.procs -exec cat {} + 2>/dev/null || true)
    [[ -n $pids ]] || break
    # shellcheck disable=SC2086 # one pid a word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
}

# For fault tests: stop (slurmctld: SIGKILL, as a crash) and start one daemon of the
# running cluster. docker: slurmdbd is the db container's main process (MariaDB stops with
# it), slurmctld the ctl container's, a node's slurmd (and its jobs) the node's.
cmd_stop() {
  local daemon=${1:?stop slurmdbd|slurmctld|n1..n4}
  [[ $daemon != slurmctld ]] || save_ctld_state
  case $MODE:$daemon in
    docker:slurmdbd) compose stop -t 5 db >/dev/null 2>&1 ;;
    docker:slurmctld) compose kill -s SIGKILL ctl >/dev/null 2>&1 ;;
    docker:n[1-4]) compose kill -s SIGKILL "$daemon" >/dev/null 2>&1 ;;
    native:n[1-4]) kill_node "$daemon" ;;
    native:slurmdbd) stop_pidfile "$STATE/run/slurmdbd.pid" slurmdbd ;;
    native:slurmctld)
      pid_alive "$STATE/run/slurmctld.pid" slurmctld && kill -KILL "$(cat "$STATE/run/slurmctld.pid")"
      rm -f "$STATE/run/slurmctld.pid" ;;
    *) die "stop: slurmdbd, slurmctld or a node n1..n4, not '$daemon'" ;;
  esac
  log "$daemon stopped"
}

cmd_start() {
  local daemon=${1:?start slurmdbd|slurmctld|n1..n4}
  case $MODE:$daemon in
    docker:slurmdbd) compose start db >/dev/null 2>&1 && wait_for 60 slurmdbd sacctmgr -n list cluster ;;
    docker:slurmctld) compose start ctl >/dev/null 2>&1 && wait_for 60 slurmctld scontrol ping ;;
    docker:n[1-4]) compose start "$daemon" >/dev/null 2>&1 ;;
    native:slurmdbd) start_slurmdbd ;;
    native:slurmctld) start_slurmctld ;;
    native:n[1-4]) start_slurmd "$daemon" ;;
    *) die "start: slurmdbd, slurmctld or a node n1..n4, not '$daemon'" ;;
  esac
  log "$daemon started"
}

case ${1:-} in
  up) cmd_up ;;
  prepare) cmd_prepare ;;
  down) cmd_down ;;
  status) cmd_status ;;
  smoke) cmd_smoke ;;
  logs) shift; cmd_logs "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  start) shift; cmd_start "$@" ;;
  version) cmd_version ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
