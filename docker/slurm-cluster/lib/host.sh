# shellcheck shell=bash
# The parts of the cluster that live on this host in both modes: it is the login node
# (munge, Slurm client commands, /etc/slurm) and it sets up accounts and QOS.

MARK="# hpclaunch-cluster"
TEST_USER=hpcuser
TEST_UID=2001

# apt_install PKG...: install what is missing, without letting the packages' maintainer
# scripts start daemons with stock configs (policy-rc.d exits 101 = "action forbidden").
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  local policy=/usr/sbin/policy-rc.d had_policy=0
  [[ -e $policy ]] && had_policy=1
  ((had_policy)) || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; }
  { apt-get update -qq || true; } >/dev/null 2>&1
  # confold: a package's config file that this script already wrote is kept, without the
  # prompt that fails without a terminal (Debian's slurm-wlm-basic-plugins ships
  # /etc/slurm/plugstack.conf, which install_pyxis_stub writes: on a fresh machine the 22.05
  # packages come after a 25.11 cluster's first up, "end of file on stdin at conffile prompt").
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null ||
    { ((had_policy)) || rm -f "$policy"; die "apt-get install ${missing[*]} failed"; }
  ((had_policy)) || rm -f "$policy"
}

# The configs of this Slurm version ($SLURM_ETC, lib/version.sh) into /etc/slurm, where
# Debian's 22.05 reads them; a source build's own config directory (its --sysconfdir,
# /opt/slurm-<version>/etc) becomes a link to it, so its commands read them too.
install_configs() {
  mkdir -p /etc/slurm
  if [[ -e /etc/slurm/slurm.conf && ! -e /etc/slurm/.hpclaunch-cluster ]]; then
    die "/etc/slurm/slurm.conf exists and was not written by this script: is this host part of a real cluster? Not touching it."
  fi
  install -m 644 "$SLURM_ETC/slurm.conf" "$HERE/etc/gres.conf" "$HERE/etc/cgroup.conf" /etc/slurm/
  # Memory is enforced with cgroup v1 (etc/cgroup.conf, lib/cgroups.sh); a kernel without
  # it gets the cluster as it was before: no task plugin, no job can end OUT_OF_MEMORY.
  if ! cgroups_usable; then
    log "no cgroup v1 memory and freezer controllers in /sys/fs/cgroup: memory is not enforced (TaskPlugin=task/none)"
    sed -i -e 's|^TaskPlugin=task/cgroup$|TaskPlugin=task/none|' \
      -e 's|^ProctrackType=proctrack/cgroup$|ProctrackType=proctrack/linuxproc|' /etc/slurm/slurm.conf
  fi
  install -m 600 "$SLURM_ETC/slurmdbd.conf" /etc/slurm/
  # Slurm's OCI support (srun --container): crun in the node containers, runc natively.
  install -m 644 "$SLURM_ETC/oci-$MODE.conf" /etc/slurm/oci.conf
  touch /etc/slurm/.hpclaunch-cluster
  if from_source; then
    ensure_slurm_key
    ensure_jwt_key
    if [[ ! -L $SLURM_PREFIX/etc ]]; then
      [[ -e $SLURM_PREFIX/etc ]] && mv "$SLURM_PREFIX/etc" "$SLURM_PREFIX/etc.orig"
      ln -s /etc/slurm "$SLURM_PREFIX/etc"
    fi
  fi
}

# auth/slurm's shared key (slurm.conf's directory, slurm.key; mode 600, SlurmUser root).
ensure_slurm_key() {
  [[ -s /etc/slurm/slurm.key ]] || dd if=/dev/urandom bs=1024 count=1 of=/etc/slurm/slurm.key 2>/dev/null
  chmod 600 /etc/slurm/slurm.key
}

# auth/jwt's HS256 key (AuthAltParameters=jwt_key in slurm.conf and slurmdbd.conf; mode 600).
ensure_jwt_key() {
  [[ -s /etc/slurm/jwt_hs256.key ]] || dd if=/dev/urandom bs=32 count=1 of=/etc/slurm/jwt_hs256.key 2>/dev/null
  chmod 600 /etc/slurm/jwt_hs256.key
}

# The login node's Slurm commands: a source build's client commands are linked into
# /usr/local/bin (first on PATH, before Debian's /usr/bin), so users, hpclaunch and the jobs
# they submit run the cluster's own version. 22.05 removes the links (Debian's /usr/bin).
# Its libraries: /etc/ld.so.conf.d (the build has no rpath).
link_client_commands() {
  local f
  for f in /usr/local/bin/*; do
    [[ -L $f && $(readlink "$f") == /opt/slurm-*/bin/* ]] && rm -f "$f"
  done
  rm -f /etc/ld.so.conf.d/hpclaunch-slurm.conf
  if from_source; then
    for f in "$SLURM_PREFIX"/bin/*; do ln -sf "$f" "/usr/local/bin/${f##*/}"; done
    echo "$SLURM_PREFIX/lib" >/etc/ld.so.conf.d/hpclaunch-slurm.conf
  fi
  ldconfig
}

add_hosts() {
  grep -q "$MARK" /etc/hosts && return 0
  {
    echo "127.0.0.1 ctl $MARK"
    local i
    for i in 1 2 3 4; do echo "127.0.1.$i n$i $MARK"; done
  } >>/etc/hosts
}

add_test_user() {
  id "$TEST_USER" >/dev/null 2>&1 || useradd -m -u $TEST_UID -s /bin/bash "$TEST_USER"
}

ensure_munge_key() {
  if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
}

host_setup() {
  make_dirs
  # The container runtimes the nodes run (native mode: this host; docker: the image has
  # them too): Charliecloud's ch-run, and for Slurm's OCI support (etc/*/oci-<mode>.conf)
  # crun in the node containers, runc natively; crun spec writes the bundle's config.json.
  apt_install charliecloud-runtime crun runc
  echo "$SLURM_VERSION" >"$STATE/.slurm-version"
  install_configs
  link_client_commands
  add_hosts
  add_test_user
  # The containers mount the munge key whatever the version; only 22.05 runs munged.
  ensure_munge_key
  if [[ $SLURM_AUTH == munge ]]; then
    pid_alive /run/munge/munged.pid munged || touch "$STATE/.started-munged"
    start_munged
  fi
}

host_teardown() {
  if [[ -e /etc/slurm/.hpclaunch-cluster ]]; then
    rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/cgroup.conf /etc/slurm/slurmdbd.conf /etc/slurm/slurm.key /etc/slurm/jwt_hs256.key \
      /etc/slurm/oci.conf /etc/slurm/.hpclaunch-cluster
  fi
  if grep -q "$MARK" /etc/hosts 2>/dev/null; then
    # /etc/hosts may be a bind mount (containers): rewrite it in place, never replace it.
    local kept
    kept=$(grep -v "$MARK" /etc/hosts)
    printf '%s\n' "$kept" >/etc/hosts
  fi
  if [[ -e $STATE/.started-munged ]] && pid_alive /run/munge/munged.pid munged; then
    kill "$(cat /run/munge/munged.pid)" || true
  fi
  keep_logs
  rm -rf "$STATE"
}

# The daemons' logs outlive their cluster (the last 6 taken down, in
# $LOG_KEEP/<date>-<time>-<pid>/): a test failure read after the suite took the cluster down
# still finds slurmctld's and slurmd's side. The newest are those with the latest names (the
# time of `down`): a directory's mtime is when its cluster came up, and the suite's main
# cluster, up longest, was the one pruned first when that order was used (run 29).
LOG_KEEP=${HPCLAUNCH_CLUSTER_LOG_KEEP:-/var/tmp/hpclaunch-cluster-logs}
keep_logs() {
  [[ -d $STATE/log ]] || return 0
  mkdir -p "$LOG_KEEP" && mv "$STATE/log" "$LOG_KEEP/$(date +%Y%m%d-%H%M%S)-$$" || return 0
  local old
  for old in $(ls -1d "$LOG_KEEP"/*/ 2>/dev/null | sort -r | tail -n +7); do
    rm -rf "$old"
  done
}

# Accounts, users and the four bare QOS of a "fresh" cluster. Their settings (priorities,
# preemption, grace, quotas, over-quota accounts) are `hpclaunch site apply`'s job
# (scripts/lib.sh ensure_cluster runs it). Runs on every `up`: it only creates what is
# missing and never resets what exists, so a second `up` keeps what site apply set.
setup_accounting() {
  # QOS with GrpTRES=gres/gpu=N fail until the controller registered gres/gpu as a TRES
  # ("no TRES known by type gres/gpu"): wait for it.
  wait_for 30 "gres/gpu TRES" bash -c "sacctmgr -n -P list tres | grep -q '^gres|gpu'"
  local q a u
  for q in low normal high critical; do
    sacctmgr -n -P list qos format=name | grep -qx "$q" || sacctmgr -i add qos "$q" >/dev/null
  done
  for a in research vision; do
    sacctmgr -n -P list account format=account | grep -qx "$a" ||
      sacctmgr -i add account "$a" cluster=hpclaunch description="$a" organization=hpclaunch >/dev/null
  done
  for u in root "$TEST_USER"; do
    for a in research vision; do
      sacctmgr -n -P list assoc where user="$u" account="$a" format=user | grep -qx "$u" && continue
      sacctmgr -i add user "$u" account="$a" cluster=hpclaunch >/dev/null
      # Only this association: a bare "modify user" would also rewrite the user's
      # over-quota associations that site apply made.
      sacctmgr -i modify user where name="$u" account="$a" cluster=hpclaunch \
        set qos=low,normal,high,critical defaultqos=normal >/dev/null
    done
    sacctmgr -n -P list user "$u" format=defaultaccount | grep -qx research ||
      sacctmgr -i modify user "$u" set defaultaccount=research >/dev/null
  done
}

wait_nodes_idle() {
  wait_for 60 "4 idle nodes" bash -c "[[ \$(sinfo -h -N -p gpu -t idle -o %N | sort -u | wc -l) == 4 ]]"
}
