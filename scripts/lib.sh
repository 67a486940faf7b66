# shellcheck shell=bash
# Shared by scripts/demo and scripts/test: the project's venv and the local test cluster.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$REPO/.venv
CLUSTER=$REPO/docker/slurm-cluster/cluster.sh
# torch is not a dependency of hpclaunch; the example trainer and the training tests use it.
# Pinned: this version's CPU build is on our machines' disk (a bare "torch" pulls a CUDA build).
TORCH=torch==2.13.0
# numpy: torch warns at import without it.
TORCH_EXTRAS=numpy

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# The venv at .venv, with hpclaunch installed editable, dev tools and torch (CPU).
ensure_venv() {
  if [[ ! -x $VENV/bin/python ]]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp=$VENV/.hpclaunch-installed sum
  sum=$( (cat "$REPO/pyproject.toml"; echo dev,ssh,gpu) | sha256sum | cut -c1-16)
  if [[ ! -e $stamp || $(<"$stamp") != "$sum" ]]; then
    say "installing hpclaunch (editable) and dev tools"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e "$REPO[dev,ssh,gpu]"
    echo "$sum" >"$stamp"
  fi
  if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    say "installing $TORCH (CPU)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "$TORCH" "$TORCH_EXTRAS"
  fi
  export PATH=$VENV/bin:$PATH
}

# The mode of the running local cluster, or nothing.
running_cluster_mode() {
  local mode
  for mode in docker native; do
    if "$CLUSTER" --mode "$mode" status >/dev/null 2>&1; then echo "$mode"; return 0; fi
  done
  return 0
}

# Use a running local cluster (either mode); else start one ($HPCLAUNCH_CLUSTER_MODE, default docker).
ensure_cluster() {
  local mode
  mode=$(running_cluster_mode)
  if [[ -n $mode ]]; then
    say "using the running $mode cluster"
    return 0
  fi
  mode=${HPCLAUNCH_CLUSTER_MODE:-docker}
  say "starting the $mode test cluster"
  "$CLUSTER" --mode "$mode" up
}

# Debian's OpenSSH server, for the SSH integration tests (tests/integration/sshd.py starts
# private instances; the package's own service is not started: policy-rc.d).
ensure_sshd_package() {
  if [[ ! -x /usr/sbin/sshd ]]; then
    say "installing openssh-server (for the SSH tests)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server >/dev/null
  fi
}
