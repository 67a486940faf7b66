#!/usr/bin/env bash
# side-host.sh NAME COMMAND [ARG...]: run COMMAND as on a second machine made from this one,
# so that a second test cluster (scripts/test's Slurm 22.05 leg) runs beside the first.
#
# Linux namespaces give COMMAND its own network (its cluster's daemons take the same
# loopback addresses and ports as the first one's: 127.0.1.1-4, 6817-6824, 3307), its own
# mounts and its own processes; when COMMAND ends, whatever it left running ends with it.
# What cluster.sh writes on the login node is private here:
#
#   /etc                    a copy, fresh each time (slurm.conf, hosts, ld.so.cache, munge key)
#   /usr/local/bin          an overlay (cluster.sh removes the other Slurm's client links here only)
#   /run                    empty (the Docker engine's socket, munged's); this host's is
#                           at $SIDE/host-run (the side engine copies the node image from
#                           this host's engine: it has no network to build one)
#   the cluster's state     $SIDE/state  ($HPCLAUNCH_CLUSTER_STATE)
#   its Docker engine       $SIDE/docker ($HPCLAUNCH_DOCKER_ROOT: its own image cache, kept
#                           between runs; its path differs from the first engine's, whose
#                           orphan clean-up matches its shims by that path)
#   hpclaunch's own files   $SIDE/xdg-* (XDG_*_HOME: capability caches, history)
#
# with SIDE=/var/lib/hpclaunch-side/NAME. Shared, as on two login nodes of one cluster:
# /root and /home (job directories), /tmp (the tests' lock file and pytest's temporary
# directories are named apart: HPCLAUNCH_CLUSTER_LOCK, PYTEST_DEBUG_TEMPROOT), the job
# images and the Debian packages. What takes the network is done outside first
# (`cluster.sh --slurm VERSION prepare`: packages, job images, this host's engine's node image).
#
# The first cluster must run in docker mode: native mode's `down` ends its slurmd processes
# by name, and it sees this machine's processes too.
#
#   side-host.sh --check   exit 0 when this machine lets it make its namespaces
set -euo pipefail

# --fork --pid --mount-proc: COMMAND's processes are this namespace's; its first one
# ending ends them all (a Docker engine, containers or a munged left by a failed run).
# --kill-child: so does this process being killed (SIGKILL: with --fork, unshare
# ignores SIGTERM and SIGINT; scripts/test's exit trap).
UNSHARE=(unshare --net --mount --pid --fork --kill-child --mount-proc --propagation private)

if [[ ${1:-} == --check ]]; then
  exec "${UNSHARE[@]}" true 2>/dev/null
fi
if [[ ${1:-} != --inside ]]; then
  name=${1:?usage: side-host.sh NAME COMMAND [ARG...]}
  shift
  (($#)) || { echo "side-host.sh: no command" >&2; exit 2; }
  [[ $(id -u) == 0 ]] || { echo "side-host.sh: run as root (namespaces, mounts)" >&2; exit 1; }
  exec "${UNSHARE[@]}" -- "$0" --inside "$name" "$@"
fi

name=$2
shift 2
SIDE=/var/lib/hpclaunch-side/$name
ip link set lo up
# Slurm binds its ports with getaddrinfo(NULL, port, AF_INET, AI_PASSIVE | AI_ADDRCONFIG),
# which finds nothing ("Unable to resolve \"(null)\"") where the only IPv4 addresses are
# loopback ones: one address of the documentation range (RFC 5737), never routed anywhere.
ip addr add 192.0.2.1/32 dev lo

rm -rf "$SIDE/etc" "$SIDE/bin.upper" "$SIDE/bin.work" "$SIDE/state"
mkdir -p "$SIDE"/{etc,bin.upper,bin.work,state,docker,xdg-cache,xdg-data,xdg-state}
cp -a /etc/. "$SIDE/etc/"
mount --bind "$SIDE/etc" /etc
mount -t overlay hpclaunch-side-bin \
  -o "lowerdir=/usr/local/bin,upperdir=$SIDE/bin.upper,workdir=$SIDE/bin.work" /usr/local/bin
# This host's /run stays reachable at $SIDE/host-run: its Docker engine's socket, from
# which the side host's engine copies the node image (it has no network to build one).
mkdir -p "$SIDE/host-run"
mount --bind /run "$SIDE/host-run"
mount -t tmpfs -o mode=755 hpclaunch-side-run /run
mkdir -p /run/lock /run/sshd /run/user
export HPCLAUNCH_IMAGE_FROM=$SIDE/host-run/docker.sock
# The first cluster's mounts that this one makes for itself: its small filesystem for the
# fault tests (lib/small_fs.sh) would otherwise be shared.
small_fs=/var/cache/hpclaunch-cluster/small-fs
! mountpoint -q "$small_fs" || umount -l "$small_fs"

export HPCLAUNCH_CLUSTER_STATE=$SIDE/state HPCLAUNCH_DOCKER_ROOT=$SIDE/docker
export XDG_CACHE_HOME=$SIDE/xdg-cache XDG_DATA_HOME=$SIDE/xdg-data XDG_STATE_HOME=$SIDE/xdg-state
export HPCLAUNCH_CLUSTER_LOCK=/tmp/hpclaunch-cluster-$name.lock
mkdir -p "/tmp/hpclaunch-side-$name-pytest"
export PYTEST_DEBUG_TEMPROOT=/tmp/hpclaunch-side-$name-pytest
exec "$@"
