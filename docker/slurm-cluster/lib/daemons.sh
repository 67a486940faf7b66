# shellcheck shell=bash
# How each daemon of the test cluster starts. Sourced by cluster.sh (native: on the host) and by
# entrypoint.sh (docker: one role per container), so both ways run the very same commands.
#
# FOREGROUND=1 keeps the last daemon of a role in the foreground (a container's main process).

STATE=${HPCLAUNCH_CLUSTER_STATE:-/var/lib/hpclaunch-cluster}
NODES=(n1 n2 n3 n4)
NODE_GPUS=4
MYSQL_PORT=3307
MYSQL_SOCK=$STATE/run/mysqld/mysqld.sock

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

# pid_alive FILE NAME: the pid in FILE is a live process named NAME (its /proc comm). The
# name matters: a pid file outlives its daemon (a machine restored from a snapshot, a killed
# container), and its pid may since belong to anything; a CI run once took a kernel worker
# for munged, skipped starting it and timed out on every Slurm command. Zombies count as
# dead: this machine's PID 1 reaps late (shared/slurm-notes.md).
pid_alive() {
  local pid
  # The daemon may remove its pid file while we read it.
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]] || return 1
  [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll every 0.1 s until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out waiting for $what"; return 1; }
    sleep 0.1
  done
}

# stop_pidfile FILE NAME [SECONDS]: TERM, wait, then KILL (only a process named NAME).
stop_pidfile() {
  local f=$1 name=$2 pid i
  pid_alive "$f" "$name" || return 0
  pid=$(cat "$f" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < ${3:-100}; i++)); do pid_alive "$f" "$name" || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

make_dirs() {
  mkdir -p "$STATE"/{ctld,spool,run,log,gpus}
  chmod 755 "$STATE"
}

start_munged() {
  pid_alive /run/munge/munged.pid munged && return 0
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  chmod 755 /run/munge
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  wait_for 10 munged test -S /run/munge/munge.socket.2
}

start_mariadb() {
  pid_alive "$STATE/run/mysqld/mysqld.pid" mariadbd && return 0
  mkdir -p "$STATE/run/mysqld"
  chown mysql:mysql "$STATE/run/mysqld"   # the socket dir must belong to the mysql user
  if [[ ! -d $STATE/mysql/mysql ]]; then
    mkdir -p "$STATE/mysql" && chown mysql:mysql "$STATE/mysql"
    mysql_install_db --user=mysql --datadir="$STATE/mysql" --skip-test-db \
      --auth-root-authentication-method=socket >"$STATE/log/mysql-install.log" 2>&1 ||
      die "mysql_install_db failed: see $STATE/log/mysql-install.log"
  fi
  touch "$STATE/log/mysqld.log" && chown mysql:mysql "$STATE/log/mysqld.log"
  # setsid: not in the caller's process group, which may be killed as a whole.
  setsid mariadbd --user=mysql --datadir="$STATE/mysql" --socket="$MYSQL_SOCK" \
    --pid-file="$STATE/run/mysqld/mysqld.pid" --port=$MYSQL_PORT --bind-address=127.0.0.1 \
    --skip-name-resolve --innodb-buffer-pool-size=64M --log-error="$STATE/log/mysqld.log" </dev/null >/dev/null 2>&1 &
  wait_for 60 mariadb mariadb --socket="$MYSQL_SOCK" -e 'select 1'
  mariadb --socket="$MYSQL_SOCK" <<'SQL'
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'hpclaunch-test-only';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'hpclaunch-test-only';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
-- Adaptive sweeps' RDB storage (a spec's sweep: {storage: mysql+pymysql://...}): the study
-- cluster test's own database and user.
CREATE DATABASE IF NOT EXISTS optuna_studies;
CREATE USER IF NOT EXISTS 'optuna'@'127.0.0.1' IDENTIFIED BY 'hpclaunch-test-only';
GRANT ALL ON optuna_studies.* TO 'optuna'@'127.0.0.1';
SQL
}

start_slurmdbd() {
  pid_alive "$STATE/run/slurmdbd.pid" slurmdbd && return 0
  if [[ ${FOREGROUND:-0} == 1 ]]; then exec slurmdbd -D; fi
  slurmdbd
  wait_for 30 slurmdbd sacctmgr -n list cluster
}

# slurmctld needs its cluster known to slurmdbd before it registers (shared/slurm-notes.md).
register_cluster() {
  wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -n -P list cluster format=cluster | grep -qx hpclaunch ||
    sacctmgr -i add cluster hpclaunch >/dev/null
}

# slurmctld insists that its hostname is the SlurmctldHost name ("ctl"): give it a UTS
# namespace of its own with that name.
start_slurmctld() {
  pid_alive "$STATE/run/slurmctld.pid" slurmctld && return 0
  if [[ ${FOREGROUND:-0} == 1 ]]; then exec unshare --uts sh -c 'hostname ctl && exec slurmctld -D'; fi
  unshare --uts sh -c 'hostname ctl && exec slurmctld'
  wait_for 30 slurmctld scontrol ping
}

make_fake_gpus() {
  local i
  for ((i = 0; i < NODE_GPUS; i++)); do
    [[ -c $STATE/gpus/gpu$i ]] || mknod -m 666 "$STATE/gpus/gpu$i" c 1 3
  done
}

# One slurmd per node name (-N), in a UTS namespace named after the node, so that `hostname`
# inside a job prints the node's name and a rendezvous on it resolves (via /etc/hosts); and,
# where the kernel has cgroup v1 memory, in cgroup and mount namespaces of its own, so that
# Slurm's cgroups (memory enforcement, etc/cgroup.conf) are the node's (lib/cgroups.sh).
start_slurmd() {
  local node=$1
  pid_alive "$STATE/run/slurmd-$node.pid" slurmd && return 0
  mkdir -p "$STATE/spool/$node"
  make_fake_gpus
  local namespaces=(--uts) setup="hostname $node && "
  if cgroups_usable; then
    namespaces+=(--cgroup --mount)
    setup+=$(remount_cgroups)
  fi
  if [[ ${FOREGROUND:-0} == 1 ]]; then exec unshare "${namespaces[@]}" sh -c "${setup}exec slurmd -D -N $node"; fi
  (
    enter_node_cgroup "$node"
    exec unshare "${namespaces[@]}" sh -c "${setup}exec slurmd -N $node"
  )
}

# auth/slurm (23.11+): the login node's sackd, which hands the client commands run here
# their credentials over /run/slurm/sack.socket (sackd(8)). No pid file option: we keep one.
# --disable-reconfig: it needs no config pushes from slurmctld (/etc/slurm is local). 24.11's
# sackd has neither the option nor the pushes (src/sackd/sackd.c); 25.11's has both, though
# its --help does not list the option.
start_sackd() {
  pid_alive "$STATE/run/sackd.pid" sackd && return 0
  local flags=()
  ((${SLURM_VERSION/./} >= 2505)) && flags+=(--disable-reconfig)
  setsid sackd -D "${flags[@]}" </dev/null >>"$STATE/log/sackd.log" 2>&1 &
  echo $! >"$STATE/run/sackd.pid"
  wait_for 10 sackd test -S /run/slurm/sack.socket
}

stop_sackd() {
  stop_pidfile "$STATE/run/sackd.pid" sackd
  rm -f "$STATE/run/sackd.pid"
}
