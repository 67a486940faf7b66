# shellcheck shell=bash
# Which Slurm the test cluster runs, and where that Slurm lives. Sourced by cluster.sh and
# entrypoint.sh (and scripts/lib.sh), after daemons.sh (for $STATE and die).
#
# 22.05 is Debian 12's packages (/usr); 24.11, 25.11 and 26.05 are built from source into
# /opt/slurm-<version> by build-slurm.sh, on this host and, copied from it, in the image.

SLURM_VERSIONS=(22.05 24.11 25.11 26.05)
DEFAULT_SLURM_VERSION=25.11

# The version of the cluster whose state is in $STATE (written by `up`), or nothing.
recorded_slurm_version() {
  cat "$STATE/.slurm-version" 2>/dev/null || true
}

# choose_slurm_version [VERSION]: sets SLURM_VERSION from, in order, the argument
# (--slurm), $HPCLAUNCH_SLURM_VERSION, the running cluster's version, the default.
choose_slurm_version() {
  SLURM_VERSION=${1:-${HPCLAUNCH_SLURM_VERSION:-$(recorded_slurm_version)}}
  SLURM_VERSION=${SLURM_VERSION:-$DEFAULT_SLURM_VERSION}
  local v
  for v in "${SLURM_VERSIONS[@]}"; do
    [[ $v == "$SLURM_VERSION" ]] && { slurm_paths; return 0; }
  done
  die "unsupported Slurm version '$SLURM_VERSION' (supported: ${SLURM_VERSIONS[*]})"
}

# slurm_paths: SLURM_PREFIX, SLURM_ETC (this version's config sources), SLURM_AUTH, and
# PATH with this version's commands first.
slurm_paths() {
  if [[ $SLURM_VERSION == 22.05 ]]; then
    SLURM_PREFIX=/usr
    SLURM_ETC=$HERE/etc/22.05
    SLURM_AUTH=munge
  else
    SLURM_PREFIX=/opt/slurm-$SLURM_VERSION
    SLURM_ETC=$HERE/etc/23.11+
    SLURM_AUTH=slurm
    PATH=$SLURM_PREFIX/bin:$SLURM_PREFIX/sbin:$PATH
  fi
  export SLURM_VERSION SLURM_PREFIX SLURM_ETC SLURM_AUTH PATH
}

from_source() { [[ $SLURM_VERSION != 22.05 ]]; }
