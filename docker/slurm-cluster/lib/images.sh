# shellcheck shell=bash
# The test cluster's job images, for specs with a container: (site-configs/local.yaml's
# containers.image_dir is $IMAGES). One Debian 12 root filesystem with python3 and the
# libraries a Python interpreter from the login node needs (the project's venv and its
# interpreter are bind-mounted, as a shared filesystem would provide them), used as
#   $IMAGES/debian-python.oci  an OCI bundle (config.json, rootfs/), for Slurm's own
#                              srun --container (oci.conf: crun in containers, runc natively)
#   $IMAGES/debian-python      a Charliecloud directory image (ch-run): a link to its rootfs
# /etc/hpclaunch-image inside names the image, so a test can tell inside from outside.
# Built with debootstrap (no registry; the native mode has no Docker engine), once, ~40 s;
# rebuilt when this file changes. The node containers mount $IMAGES at the same path. It is
# outside $STATE, which `down` removes: like the Docker engine's image cache, the images
# outlive the cluster.

IMAGES=/var/cache/hpclaunch-cluster/images
IMAGE_NAME=debian-python
IMAGE_PACKAGES=python3,libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,libgomp1,procps

# The Debian mirror this host's apt uses (no other is reachable here).
debian_mirror() {
  local mirror
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || die "no Debian mirror found in /etc/apt"
  echo "$mirror"
}

build_job_images() {
  # The tree is the bundle's rootfs (runc refuses a rootfs that is a link, and Slurm 22.05
  # takes the bundle's "rootfs" whatever config.json says); the Charliecloud image is a
  # link to it (ch-run follows it).
  local bundle=$IMAGES/$IMAGE_NAME.oci sum
  local rootfs=$bundle/rootfs
  sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
  if [[ $(cat "$rootfs/etc/hpclaunch-image" 2>/dev/null) != "$IMAGE_NAME $sum" ]]; then
    apt_install debootstrap
    local t0=$SECONDS tmp
    mkdir -p "$bundle"
    tmp=$(mktemp -d "$bundle/.build.XXXXXX")
    log "building the job image $rootfs (debootstrap, python3)"
    debootstrap --variant=minbase --include="$IMAGE_PACKAGES" bookworm "$tmp" "$(debian_mirror)" \
      >"$STATE/log/image-build.log" 2>&1 ||
      { rm -rf "$tmp"; die "debootstrap failed: see $STATE/log/image-build.log"; }
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
    # ch-run binds the node's /etc/hosts and /etc/resolv.conf onto the image's, only where
    # the image has them (Charliecloud 0.31; ch-convert makes them), and debootstrap makes
    # neither: without them n1..n4 do not resolve inside (torchrun's rendezvous fails).
    touch "$tmp/etc/hosts" "$tmp/etc/resolv.conf"
    echo "$IMAGE_NAME $sum" >"$tmp/etc/hpclaunch-image"
    rm -rf "$rootfs" "${IMAGES:?}/$IMAGE_NAME" && mv "$tmp" "$rootfs"
    log "built $rootfs in $((SECONDS - t0)) s"
  fi
  # Jobs of a cluster already up may be reading these (a second cluster's `up` beside it,
  # side-host.sh): the link is made only when missing, config.json replaced in one rename.
  [[ $(readlink "$IMAGES/$IMAGE_NAME" 2>/dev/null) == "$IMAGE_NAME.oci/rootfs" ]] ||
    ln -sfn "$IMAGE_NAME.oci/rootfs" "$IMAGES/$IMAGE_NAME"
  # ch-run binds only onto directories the image has: the repository (where the tests and
  # the demo start, and the venv) at its own path. /root, /home and /tmp are there already.
  mkdir -p "$rootfs/$REPO"
  write_oci_config "$bundle/config.json"
}

# The bundle's config.json (OCI runtime spec 1.0): the runtime's defaults as `crun spec`
# writes them, with the node's network, hostname and IPC (host networking, as every job
# here), the root read-only, and no terminal. Slurm replaces process.args, env and cwd with
# the step's (containers.shtml: "the bundle ... must already exist on the requested path").
write_oci_config() {
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && crun spec)
  python3 - "$tmp/config.json" "$1" <<'PY'
import json, sys
spec, path = sys.argv[1:]
with open(spec) as f:
    config = json.load(f)
config["root"] = {"path": "rootfs", "readonly": True}
config.pop("hostname", None)
config["process"]["terminal"] = False
config["linux"]["namespaces"] = [
    ns for ns in config["linux"]["namespaces"] if ns["type"] in ("pid", "mount")
]
import os
with open(path + ".new", "w") as f:
    json.dump(config, f, indent=2)
os.replace(path + ".new", path)
PY
  rm -rf "$tmp"
}
