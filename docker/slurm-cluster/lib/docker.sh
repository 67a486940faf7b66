# shellcheck shell=bash
# docker mode: the daemons run in containers (db, ctl, n1..n4) on the host network.
# A Docker engine is used if one answers; otherwise one is started by hand (no service
# manager here) with host networking only, and stopped again by `down`.

# The engine's data (image cache) survives `down`. A second cluster beside this one
# (side-host.sh) has an engine of its own, with its own root.
DOCKER_ROOT=${HPCLAUNCH_DOCKER_ROOT:-/var/lib/hpclaunch-docker}
PROJECT=hpclaunch-cluster
image() { echo "hpclaunch/slurm-cluster:$SLURM_VERSION"; }

compose() {
  HPCLAUNCH_REPO=$REPO HPCLAUNCH_CLUSTER_IMAGE=$(image) HPCLAUNCH_CLUSTER_LOG=$STATE/log \
    HPCLAUNCH_JOB_IMAGES=$IMAGES HPCLAUNCH_SMALL_FS=$SMALL_FS \
    docker-compose -p "$PROJECT" -f "$HERE/docker-compose.yml" "$@"
}

# Docker's commands are here (Debian's docker.io and docker-compose, or another install).
docker_usable() {
  command -v docker >/dev/null && command -v docker-compose >/dev/null
}

# What the node image needs that does not wait for Slurm's build: the engine, the base image
# and the image's first stage (its packages), which the full build then takes from the cache.
docker_prepare() {
  engine_up
  image_current || [[ -n ${HPCLAUNCH_IMAGE_FROM:-} ]] || build_image runtime
}

# The hpclaunch.dockerfile label this version's image must have: the Dockerfile's and, for
# a source build, the host build's stamp (build-slurm.sh).
image_sum() {
  local stamp=
  # No stamp while Slurm still compiles (docker_prepare): then no image is current.
  from_source && stamp=$(cat "$SLURM_PREFIX/.hpclaunch-build" 2>/dev/null)
  (cat "$HERE/Dockerfile"; echo "$SLURM_VERSION $stamp") | sha256sum | cut -c1-16
}

image_current() {
  local have
  have=$(docker image inspect -f '{{ index .Config.Labels "hpclaunch.dockerfile" }}' "$(image)" 2>/dev/null || true)
  [[ $have == "$(image_sum)" ]]
}

# A side host (side-host.sh) has no network to build with: its engine loads the image from
# the first engine, whose socket is $HPCLAUNCH_IMAGE_FROM (`cluster.sh prepare` made it
# current there).
copy_image() {
  local t0=$SECONDS
  log "copying $(image) from the engine at $HPCLAUNCH_IMAGE_FROM"
  docker -H "unix://$HPCLAUNCH_IMAGE_FROM" save "$(image)" | docker load >/dev/null ||
    die "copying $(image) from $HPCLAUNCH_IMAGE_FROM failed"
  image_current ||
    die "the $(image) copied is not current: run 'cluster.sh --slurm $SLURM_VERSION prepare' outside the side host first"
  log "copied $(image) in $((SECONDS - t0)) s"
}

engine_up() {
  docker info >/dev/null 2>&1 && return 0
  mkdir -p "$DOCKER_ROOT"
  # A pid file left by an engine that died (or is a zombie not yet reaped) blocks dockerd.
  pid_alive "$DOCKER_ROOT/dockerd.pid" dockerd || rm -f "$DOCKER_ROOT/dockerd.pid"
  log "starting a Docker engine (host networking only, data in $DOCKER_ROOT)"
  # Containers left by an engine that was killed hold the cluster's ports: end them first.
  kill_orphaned_containers
  # No bridge, no iptables: containers use the host network (shared/slurm-notes.md).
  # setsid: the engine must outlive its caller's process group (a CI step or a tool that
  # stops "the job and its children" would otherwise kill it and orphan its containers).
  setsid dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --data-root "$DOCKER_ROOT/data" --exec-root "$DOCKER_ROOT/exec" \
    --pidfile "$DOCKER_ROOT/dockerd.pid" </dev/null >"$DOCKER_ROOT/dockerd.log" 2>&1 &
  touch "$DOCKER_ROOT/.started-by-cluster-sh"
  wait_for 30 "the Docker engine" docker info
}

# The base image: the public Debian image if the engine has it, else one built from Debian's
# packages with debootstrap (no image registry is reachable here).
base_image() {
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then echo debian:bookworm-slim; return; fi
  if ! docker image inspect local/bookworm:base >/dev/null 2>&1; then
    local mirror rootfs
    mirror=$(debian_mirror)
    rootfs=$(mktemp -d)
    log "building local/bookworm:base with debootstrap from $mirror"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$STATE/log/debootstrap.log" 2>&1 ||
      die "debootstrap failed: see $STATE/log/debootstrap.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - local/bookworm:base >/dev/null
    rm -rf "$rootfs"
  fi
  echo local/bookworm:base
}

# build_image [runtime]: the image of this version, rebuilt when the Dockerfile or the
# host's build changed (its stamp, build-slurm.sh). The context: the Dockerfile and
# slurm.tar (the host's /opt/slurm-<version>, empty for 22.05). With "runtime", only the
# Dockerfile's first stage (packages; no Slurm build needed), for the layer cache.
build_image() {
  local target=${1:-}
  if [[ -z $target ]]; then
    image_current && return 0
    [[ -z ${HPCLAUNCH_IMAGE_FROM:-} ]] || { copy_image; return 0; }
  fi
  local base context t0=$SECONDS
  base=$(base_image)
  context=$(mktemp -d)
  cp "$HERE/Dockerfile" "$context/"
  if from_source && [[ -z $target ]]; then
    tar -C /opt -cf "$context/slurm.tar" "slurm-$SLURM_VERSION"
  else
    tar -cf "$context/slurm.tar" -T /dev/null
  fi
  local args=(--network host --build-arg "BASE=$base" --build-arg "SLURM_VERSION=$SLURM_VERSION")
  if [[ -n $target ]]; then
    log "building the packages of $(image) from $base${SLURM_BUILD_PID:+ (while Slurm compiles)}"
    args+=(--target "$target" -t "$(image)-$target")
  else
    log "building $(image) from $base"
    args+=(--label "hpclaunch.dockerfile=$(image_sum)" -t "$(image)")
  fi
  DOCKER_BUILDKIT=0 docker build "${args[@]}" "$context" >>"$STATE/log/docker-build.log" 2>&1 ||
    { rm -rf "$context"; die "docker build failed: see $STATE/log/docker-build.log"; }
  rm -rf "$context"
  log "built $(image)${target:+ ($target stage)} in $((SECONDS - t0)) s"
}

docker_running() {
  docker info >/dev/null 2>&1 || return 1
  [[ -n $(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null) ]]
}

docker_up() {
  touch "$STATE/.mode-docker"
  engine_up  # the node image: cmd_prepare made it current
  compose up -d >"$STATE/log/compose.log" 2>&1 || { cat "$STATE/log/compose.log" >&2; die "docker-compose up failed"; }
  # auth/slurm: the login node's commands get their credentials from sackd's socket
  # (slurmctld's and slurmd's are inside the containers).
  from_source && start_sackd
  wait_for 60 slurmctld scontrol ping ||
    { compose logs --tail=30 >&2; die "slurmctld did not answer"; }
}

docker_status() {
  compose ps
}

# An engine that died without stopping its containers (SIGKILL) leaves them running under
# their containerd shims. Killing each container's init (PID 1 of its PID namespace, the
# shim's child) ends every process in it; the shim, with no engine to report to, stays, so
# it goes too.
kill_orphaned_containers() {
  local shim
  for shim in $(pgrep -f "containerd-shim-runc-v2 .*-address $DOCKER_ROOT/exec/" || true); do
    pkill -KILL -P "$shim" || true
    kill -KILL "$shim" 2>/dev/null || true
  done
}

docker_down() {
  rm -f "$STATE/.mode-docker"
  stop_sackd
  if docker info >/dev/null 2>&1; then
    compose down --remove-orphans --timeout 5 >/dev/null 2>&1 || true
  else
    kill_orphaned_containers
  fi
  if [[ -e $DOCKER_ROOT/.started-by-cluster-sh ]]; then
    stop_pidfile "$DOCKER_ROOT/dockerd.pid" dockerd 200
    rm -f "$DOCKER_ROOT/dockerd.pid" "$DOCKER_ROOT/.started-by-cluster-sh"
  fi
}
