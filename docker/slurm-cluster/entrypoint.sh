#!/usr/bin/env bash
# The main process of one container of the dockerized test cluster:
#   entrypoint.sh db | ctl | node NAME
# It runs the same start functions as the native mode (lib/daemons.sh), the role's last
# daemon in the foreground. /etc/slurm and the munge key come from the host (the login node).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/daemons.sh
source "$HERE/lib/daemons.sh"

make_dirs
install -o munge -g munge -m 400 /run/hpclaunch/munge.key /etc/munge/munge.key
start_munged
export FOREGROUND=1
case ${1:?role: db, ctl or node NAME} in
  db) start_mariadb && start_slurmdbd ;;
  ctl) register_cluster && start_slurmctld ;;
  node) start_slurmd "${2:?node name}" ;;
  *) die "unknown role $1" ;;
esac
