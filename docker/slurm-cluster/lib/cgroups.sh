# shellcheck shell=bash
# Memory enforced by Slurm's cgroups on a test cluster whose four slurmd share one kernel
# (issue 48). Slurm's cgroup/v1 plugin puts every job under <mountpoint>/<controller>/slurm:
# four slurmd would share (and clean up) one tree. So each slurmd runs in a cgroup namespace
# of its own, with the controllers remounted inside a private mount namespace: there the
# mount's root is the node's own cgroup, and Slurm's /slurm lands beneath it.
#   docker mode: the node's container already has its own cgroup (/docker/<id>), but Docker
#     mounts the controllers read-only; the remount in the new namespace is read-write
#     (the containers have CAP_SYS_ADMIN for `unshare --uts` already).
#   native mode: the daemons share this host's cgroups: each slurmd first moves into
#     /hpclaunch-cluster/<node> of every controller, then unshares.
# A Slurm built with --enable-multiple-slurmd would name its tree slurm_<node> instead, but
# Debian's 22.05 is not built so, and this works for every version alike.

# The v1 controllers Slurm's task/cgroup uses here (etc/cgroup.conf: only RAM is
# constrained) plus freezer, which its cgroup/v1 plugin sets up for every step.
CGROUP_CONTROLLERS=(memory freezer)

# cgroups_usable: this kernel mounts the cgroup v1 memory controller (Slurm's cgroup/v1).
cgroups_usable() {
  [[ -e /sys/fs/cgroup/memory/cgroup.procs && -e /sys/fs/cgroup/freezer/cgroup.procs ]]
}

# enter_node_cgroup NODE (native mode): move this shell into NODE's own cgroups.
enter_node_cgroup() {
  local controller dir
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    dir=/sys/fs/cgroup/$controller/hpclaunch-cluster/$1
    mkdir -p "$dir"
    echo "$BASHPID" >"$dir/cgroup.procs"
  done
}

# remount_cgroups: the commands that, run in a new cgroup and mount namespace, remount each
# controller read-write with the namespace's root as its own. The source name is the
# controller's own: mount(8) refuses "cgroup" again ("already mounted on .../cpu").
remount_cgroups() {
  local controller cmds=
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    cmds+="umount /sys/fs/cgroup/$controller && "
    cmds+="mount -t cgroup -o rw,nosuid,nodev,noexec,$controller hpclaunch-$controller /sys/fs/cgroup/$controller && "
  done
  echo "$cmds"
}

# remove_node_cgroups (native mode, after the daemons stopped): the nodes' cgroup trees,
# deepest first (a cgroup is removed with rmdir once it holds no process and no child).
remove_node_cgroups() {
  local controller
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    [[ -d /sys/fs/cgroup/$controller/hpclaunch-cluster ]] || continue
    find "/sys/fs/cgroup/$controller/hpclaunch-cluster" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}
