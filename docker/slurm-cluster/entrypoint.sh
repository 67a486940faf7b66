#!/usr/bin/env bash
# The main process of one container of the dockerized test cluster:
#   entrypoint.sh db | ctl | node NAME
# It runs the same start functions as the native mode (lib/daemons.sh), the role's last
# daemon in the foreground. /etc/slurm and the munge key come from the host (the login node).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/daemons.sh
source "$HERE/lib/daemons.sh"
# shellcheck source=lib/cgroups.sh
source "$HERE/lib/cgroups.sh"
# shellcheck source=lib/version.sh
source "$HERE/lib/version.sh"
# The image's version (its ENV); PATH gets that build's commands and daemons.
choose_slurm_version "${HPCLAUNCH_SLURM_VERSION:?the image sets HPCLAUNCH_SLURM_VERSION}"

make_dirs
if [[ $SLURM_AUTH == munge ]]; then
  install -o munge -g munge -m 400 /run/hpclaunch/munge.key /etc/munge/munge.key
  start_munged
fi
export FOREGROUND=1
case ${1:?role: db, ctl or node NAME} in
  db) start_mariadb && start_slurmdbd ;;
  # auth/slurm: sacctmgr here needs a sack socket before slurmctld brings its own.
  ctl) { ! from_source || start_sackd; } && register_cluster && start_slurmctld ;;
  node) start_slurmd "${2:?node name}" ;;
  *) die "unknown role $1" ;;
esac
