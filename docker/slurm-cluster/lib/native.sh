# shellcheck shell=bash
# native mode: every daemon is a process on this host, tracked by its pid file.

native_running() {
  pid_alive "$STATE/run/slurmctld.pid" slurmctld && [[ -e $STATE/.mode-native ]]
}

native_up() {
  touch "$STATE/.mode-native"
  start_mariadb
  start_slurmdbd
  register_cluster
  start_slurmctld
  local n
  for n in "${NODES[@]}"; do start_slurmd "$n"; done
}

native_status() {
  local f name
  for f in slurmctld slurmdbd slurmd-n1 slurmd-n2 slurmd-n3 slurmd-n4 mysqld/mysqld; do
    name=${f##*/} name=${name%-n?}
    [[ $name == mysqld ]] && name=mariadbd
    if pid_alive "$STATE/run/$f.pid" "$name"; then echo "${f##*/}: running (pid $(<"$STATE/run/$f.pid"))"; else echo "${f##*/}: stopped"; fi
  done
}

native_down() {
  [[ -e $STATE/.mode-native ]] || { remove_node_cgroups; log "no native cluster state in $STATE"; return 0; }
  local n
  for n in "${NODES[@]}"; do stop_pidfile "$STATE/run/slurmd-$n.pid" slurmd; done
  stop_pidfile "$STATE/run/slurmctld.pid" slurmctld
  stop_pidfile "$STATE/run/slurmdbd.pid" slurmdbd
  stop_pidfile "$STATE/run/mysqld/mysqld.pid" mariadbd 300
  # Daemons whose pid file is gone (an interrupted run), and job processes that outlived
  # their slurmd (proctrack/linuxproc cannot always find them). Only ours: the patterns
  # name this cluster's state directory or node names.
  pkill -f -- "--datadir=$STATE/mysql" 2>/dev/null || true
  pkill -f -- '^slurmd (-D )?-N n[1-4]$' 2>/dev/null || true
  pkill -f -- 'slurmstepd' 2>/dev/null || true
  remove_node_cgroups
  rm -f "$STATE/.mode-native"
}
