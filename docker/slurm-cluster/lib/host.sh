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
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { ((had_policy)) || rm -f "$policy"; die "apt-get install ${missing[*]} failed"; }
  ((had_policy)) || rm -f "$policy"
}

install_configs() {
  mkdir -p /etc/slurm
  if [[ -e /etc/slurm/slurm.conf && ! -e /etc/slurm/.hpclaunch-cluster ]]; then
    die "/etc/slurm/slurm.conf exists and was not written by this script: is this host part of a real cluster? Not touching it."
  fi
  install -m 644 "$HERE/etc/slurm.conf" "$HERE/etc/gres.conf" /etc/slurm/
  install -m 600 "$HERE/etc/slurmdbd.conf" /etc/slurm/
  touch /etc/slurm/.hpclaunch-cluster
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
  install_configs
  add_hosts
  add_test_user
  ensure_munge_key
  pid_alive /run/munge/munged.pid || touch "$STATE/.started-munged"
  start_munged
}

host_teardown() {
  if [[ -e /etc/slurm/.hpclaunch-cluster ]]; then
    rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/slurmdbd.conf /etc/slurm/.hpclaunch-cluster
  fi
  if grep -q "$MARK" /etc/hosts 2>/dev/null; then
    # /etc/hosts may be a bind mount (containers): rewrite it in place, never replace it.
    local kept
    kept=$(grep -v "$MARK" /etc/hosts)
    printf '%s\n' "$kept" >/etc/hosts
  fi
  if [[ -e $STATE/.started-munged ]] && pid_alive /run/munge/munged.pid; then
    kill "$(cat /run/munge/munged.pid)" || true
  fi
  rm -rf "$STATE"
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
