# shellcheck shell=bash
# The test cluster's job images, for specs with a container: (site-configs/local.yaml's
# containers.image_dir is $IMAGES). One Debian 12 root filesystem with python3 and the
# libraries a Python interpreter from the login node needs (the project's venv and its
# interpreter are bind-mounted, as a shared filesystem would provide them), used as
#   $IMAGES/debian-python      a Charliecloud directory image (ch-run)
#   $IMAGES/debian-python.oci  an OCI bundle whose root is that directory, for Slurm's own
#                              srun --container (oci.conf: crun)
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
  local rootfs=$IMAGES/$IMAGE_NAME sum
  sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
  if [[ $(cat "$rootfs/etc/hpclaunch-image" 2>/dev/null) != "$IMAGE_NAME $sum" ]]; then
    apt_install debootstrap
    local t0=$SECONDS tmp
    mkdir -p "$IMAGES"
    tmp=$(mktemp -d "$IMAGES/.build.XXXXXX")
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
    rm -rf "$rootfs" && mv "$tmp" "$rootfs"
    log "built $rootfs in $((SECONDS - t0)) s"
  fi
  # ch-run binds only onto directories the image has: the repository (where the tests and
  # the demo start, and the venv) at its own path. /root, /home and /tmp are there already.
  mkdir -p "$rootfs/$REPO"
  write_oci_bundle "$rootfs" "$IMAGES/$IMAGE_NAME.oci"
}

# The bundle's config.json (OCI runtime spec 1.0): the runtime's defaults as `crun spec`
# writes them, with the node's network, hostname and IPC (host networking, as every job
# here), the root read-only, and no terminal. Slurm replaces process.args, env and cwd with
# the step's (containers.shtml: "the bundle ... must already exist on the requested path").
write_oci_bundle() {
  local rootfs=$1 bundle=$2
  mkdir -p "$bundle"
  # The root as the runtime spec's usual relative "rootfs": Slurm 22.05 makes root.path
  # "rootfs" whatever config.json says (an absolute path failed there); a link to the
  # Charliecloud directory, so both images are one tree.
  ln -sfn "../$(basename "$rootfs")" "$bundle/rootfs"
  (cd "$bundle" && rm -f config.json && crun spec)
  python3 - "$bundle/config.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    config = json.load(f)
config["root"] = {"path": "rootfs", "readonly": True}
config.pop("hostname", None)
config["process"]["terminal"] = False
config["linux"]["namespaces"] = [
    ns for ns in config["linux"]["namespaces"] if ns["type"] in ("pid", "mount")
]
with open(path, "w") as f:
    json.dump(config, f, indent=2)
PY
}
