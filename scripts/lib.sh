# shellcheck shell=bash
# Shared by scripts/demo and scripts/test: the project's venv and the local test cluster.
# No command hashing: a cluster of another Slurm version changes which sinfo PATH finds
# (/usr/local/bin's links to a source build, or Debian's /usr/bin).
set +h
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$REPO/.venv
CLUSTER=$REPO/docker/slurm-cluster/cluster.sh
# The Slurm of the main test cluster ($HPCLAUNCH_SLURM_VERSION, else 25.11), and of the
# compatibility leg of scripts/test (Debian 12's packages).
DEFAULT_SLURM=${HPCLAUNCH_SLURM_VERSION:-25.11}
COMPAT_SLURM=22.05
# One line per Slurm version the integration tests ran on (run_integration).
SUMMARY=${HPCLAUNCH_TEST_SUMMARY:-$(mktemp /tmp/hpclaunch-test-summary.XXXXXX)}
# torch is not a dependency of hpclaunch; the example trainer and the training tests use it.
# Pinned: this version's CPU build is on our machines' disk (a bare "torch" pulls a CUDA build).
TORCH=torch==2.13.0
# numpy: torch warns at import without it.
TORCH_EXTRAS=numpy
# The extras the tests need; "frameworks" (accelerate, transformers, lightning) requires torch,
# so torch is installed first and pinned again on that command line (never a newer torch).
EXTRAS=dev,ssh,gpu,frameworks,sim,sweeps,tracking
# DeepSpeed (the deepspeed launcher's cluster test) is an sdist whose build imports torch:
# built against the installed torch (--no-build-isolation; an isolated build would fetch a
# CUDA torch) and without its C++/CUDA ops (DS_BUILD_OPS=0). ~15 s.
DEEPSPEED=deepspeed==0.19.8

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# step NAME COMMAND...: run one set-up step, then say how long it took ("<== NAME: 12 s"),
# so that a newcomer waiting on a fresh machine sees where the minutes go.
step() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  printf '<== %s: %d s\n' "$name" "$((SECONDS - t0))"
}

# The venv at .venv with hpclaunch installed editable and torch (CPU): what the demo needs.
# `ensure_venv all` adds what the tests need: dev tools, frameworks and DeepSpeed.
# Either way the package's bytecode is compiled once here, as pip does for an installed
# wheel: an editable install run where PYTHONDONTWRITEBYTECODE is set (CI images, tool
# shells) would otherwise compile every module at every start (~40 ms of each command).
ensure_venv() {
  local level=${1:-demo}
  if [[ ! -x $VENV/bin/python ]]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    say "installing $TORCH (CPU)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "$TORCH" "$TORCH_EXTRAS"
  fi
  local sum
  sum=$( (cat "$REPO/pyproject.toml"; echo "$EXTRAS $TORCH $DEEPSPEED") | sha256sum | cut -c1-16)
  # The full install satisfies the demo too.
  if [[ $(cat "$VENV/.hpclaunch-installed" 2>/dev/null) != "$sum" ]]; then
    if [[ $level == all ]]; then
      say "installing hpclaunch (editable), dev tools, frameworks and $DEEPSPEED"
      "$VENV/bin/pip" install -q --disable-pip-version-check -e "$REPO[$EXTRAS]" "$TORCH"
      DS_BUILD_OPS=0 "$VENV/bin/pip" install -q --disable-pip-version-check \
        --no-build-isolation "$DEEPSPEED" "$TORCH"
      echo "$sum" >"$VENV/.hpclaunch-installed"
    elif [[ $(cat "$VENV/.hpclaunch-installed-demo" 2>/dev/null) != "$sum" ]]; then
      say "installing hpclaunch (editable)"
      "$VENV/bin/pip" install -q --disable-pip-version-check -e "$REPO" "$TORCH"
      echo "$sum" >"$VENV/.hpclaunch-installed-demo"
    fi
  fi
  "$VENV/bin/python" -m compileall -q "$REPO/hpclaunch" >/dev/null
  export PATH=$VENV/bin:$PATH
}

# pyslurm, for the pyslurm backend and its tests, built against the test cluster's own
# Slurm build (/opt/slurm-<version>: headers and libslurm). PyPI has pyslurm only for Slurm
# 25.11; for another version nothing is installed and the tests run the cli backend only.
# About 3.5 min the first time on 2 cores; pip's wheel cache makes later venvs take seconds.
# The test command builds it; the demo does not (it submits with the cli backend, and
# `--backend pyslurm` without it says how to install it).
PYSLURM_SLURM=25.11
PYSLURM=pyslurm==25.11.2
ensure_pyslurm() {
  local release=$1 prefix=/opt/slurm-$1
  [[ $release == "$PYSLURM_SLURM" && -d $prefix/include/slurm ]] || return 0
  "$VENV/bin/python" -c "import pyslurm; assert pyslurm.__version__.startswith('$release.')" \
    2>/dev/null && return 0
  say "installing $PYSLURM for the pyslurm backend (built against $prefix)"
  SLURM_INCLUDE_DIR=$prefix/include SLURM_LIB_DIR=$prefix/lib \
    "$VENV/bin/pip" install -q --disable-pip-version-check "$PYSLURM"
}

# The backends the integration tests run with on the running cluster: pyslurm too when it
# works with it (it needs the cluster's release, so not on the 22.05 leg).
test_backends() {
  if "$VENV/bin/python" -c "import pyslurm, sys; sys.exit(pyslurm.__version__[:5] != '$(slurm_version | cut -c1-5)')" 2>/dev/null; then
    echo "cli pyslurm"
  else
    echo cli
  fi
}

# The mode of the running local cluster, or nothing.
running_cluster_mode() {
  local mode
  for mode in docker native; do
    if "$CLUSTER" --mode "$mode" status >/dev/null 2>&1; then echo "$mode"; return 0; fi
  done
  return 0
}

# Use a running local cluster (either mode) of Slurm $DEFAULT_SLURM; else start one
# ($HPCLAUNCH_CLUSTER_MODE, default docker; a running cluster of another version is taken
# down first). Either way, then make its QOS and accounts match site-configs/local.yaml (the
# cluster comes up with bare QOS; `site apply` sets tiers, quotas, over-quota accounts).
ensure_cluster() {
  ensure_cluster_up
  site_apply
}

ensure_cluster_up() {
  local mode version
  mode=$(running_cluster_mode)
  if [[ -n $mode ]]; then
    version=$("$CLUSTER" --mode "$mode" version || true)
    if [[ $version != "$DEFAULT_SLURM" ]]; then
      say "the running $mode cluster is Slurm ${version:-unknown}, not $DEFAULT_SLURM: replacing it"
      "$CLUSTER" --mode "$mode" down
      "$CLUSTER" --mode "$mode" --slurm "$DEFAULT_SLURM" up
    else
      say "using the running $mode cluster (Slurm $version)"
    fi
  else
    mode=${HPCLAUNCH_CLUSTER_MODE:-docker}
    say "starting the $mode test cluster (Slurm $DEFAULT_SLURM)"
    "$CLUSTER" --mode "$mode" --slurm "$DEFAULT_SLURM" up
  fi
}

site_apply() {
  say "hpclaunch site apply (site local)"
  hpclaunch --site local site apply --yes
}

# The full version of the Slurm commands on PATH ("slurm 25.11.7" / "slurm-wlm 22.05.8").
slurm_version() { sinfo --version | awk '{print $NF}'; }

# pytest_summary LOG: pytest -q's closing line, e.g. "55 passed, 1 skipped in 512.34s (0:08:32)".
pytest_summary() {
  grep -E '(passed|failed|error|skipped|deselected).* in [0-9.]+s' "$1" | tail -1 | tr -d '=' | xargs
}

# run_integration LEG MARKS [PYTEST ARGS...]: smoke-check the running cluster, run the
# integration tests on it (those of the pytest mark expression MARKS; all when empty) and
# add "slurm <version>[ (LEG)] [<backends>]: <pytest's summaries>" to $SUMMARY. Two passes:
# the tests not marked exclusive side by side in $TEST_WORKERS pytest-xdist workers (a
# module and backend per worker: they share its fixtures' jobs), then the exclusive ones
# (preemption, quotas, the whole cluster) one at a time. With $HPCLAUNCH_TEST_JUNIT (a
# directory) each pass also writes its per-test times there (bench/setup_times.py suite).
# $AFTER_SIDE_BY_SIDE, when set, is a command run between the passes (scripts/test starts
# its side host there); $INTEGRATION_PASSES names the passes to run (default both).
TEST_WORKERS=${HPCLAUNCH_TEST_WORKERS:-3}
run_integration() {
  local leg=$1 marks=$2 mode version log rc=0 part summaries=() backends
  shift 2
  mode=$(running_cluster_mode)
  "$CLUSTER" --mode "$mode" smoke
  version=$(slurm_version)
  backends=$(test_backends)
  log=$(mktemp /tmp/hpclaunch-integration.XXXXXX)
  for part in ${INTEGRATION_PASSES:-side-by-side alone}; do
    local select="${marks:+($marks) and }not exclusive" xdist=(-n "$TEST_WORKERS" --dist loadgroup)
    if [[ $part == alone ]]; then select="${marks:+($marks) and }exclusive"; xdist=(); fi
    local junit=()
    if [[ -n ${HPCLAUNCH_TEST_JUNIT:-} ]]; then
      mkdir -p "$HPCLAUNCH_TEST_JUNIT"
      junit=(--junitxml="$HPCLAUNCH_TEST_JUNIT/slurm-$version${leg:+-${leg// /-}}-$part.xml")
    fi
    say "integration tests against the local $mode cluster (Slurm $version)${leg:+ ($leg)}, $part ($select); backends: $backends"
    set +e
    HPCLAUNCH_TEST_BACKENDS=$backends pytest -q -p no:cacheprovider --durations=10 "${xdist[@]}" "${junit[@]}" -m "$select" \
      tests/integration "$@" 2>&1 | tee "$log"
    local part_rc=${PIPESTATUS[0]}
    set -e
    # 5: nothing selected (a -k or a path that leaves no test of this part)
    ((part_rc == 0 || part_rc == 5)) || rc=$part_rc
    local summary
    summary=$(pytest_summary "$log" || true)
    summaries+=("$part: ${summary:-no pytest summary (exit code $part_rc)}")
    if [[ $part == side-by-side && -n ${AFTER_SIDE_BY_SIDE:-} ]]; then "$AFTER_SIDE_BY_SIDE"; fi
  done
  local joined
  joined=$(printf '%s; ' "${summaries[@]}")
  echo "slurm $version${leg:+ ($leg)} [$backends]: ${joined%; }" >>"$SUMMARY"
  rm -f "$log"
  return "$rc"
}

# Debian's OpenSSH server, for the SSH integration tests (tests/integration/sshd.py starts
# private instances; the package's own service is not started: policy-rc.d).
ensure_sshd_package() {
  if [[ ! -x /usr/sbin/sshd ]]; then
    say "installing openssh-server (for the SSH tests)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server >/dev/null
  fi
}

# Debian's faketime (libfaketime), under which scripts/test-dates runs the unit tests at
# awkward dates.
ensure_faketime_package() {
  if ! command -v faketime >/dev/null; then
    say "installing faketime (the unit tests at other dates)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >/dev/null; }
  fi
}

# Debian's chromium, in which the report test renders a job's HTML page headless.
ensure_chromium_package() {
  if ! command -v chromium >/dev/null; then
    say "installing chromium (for the report page test, headless)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null
  fi
}
