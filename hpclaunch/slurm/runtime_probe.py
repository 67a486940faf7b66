"""Are a site's container runtimes really on its compute nodes? (``hpclaunch site check``)

One short ``srun`` on one node of the default partition runs a POSIX shell probe that looks
for each runtime's program there: ``apptainer``/``singularity``, ``ch-run``
(Charliecloud), ``enroot`` (pyxis), and for Slurm's own OCI support the node's ``oci.conf``
beside its ``slurm.conf`` and the OCI runtime its ``RunTimeRun`` (or ``RunTimeCreate``)
calls. pyxis is a SPANK plugin of srun itself: its options must show in the login node's
``srun --help``.

``--immediate``: on a busy cluster the probe gives up after a few seconds instead of
waiting in the queue (reported as "not checked", never as a missing runtime).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpclaunch.errors import TransportError
from hpclaunch.transport.base import Runner

__all__ = ["RuntimeFinding", "RuntimeProbe", "probe_runtimes"]

# $1: the runtimes. Prints "RUNTIME ok|missing NODE DETAIL" per runtime.
_PROBE = r"""
node=$(hostname)
conf=${SLURM_CONF:-$(scontrol show config 2>/dev/null | awk '$1 == "SLURM_CONF" {print $3}')}
conf=${conf:-/etc/slurm/slurm.conf}
say() { echo "$rt $1 $node $2"; }
for rt in "$@"; do
  case $rt in
    apptainer|singularity) prog=$rt ;;
    charliecloud) prog=ch-run ;;
    pyxis) prog=enroot ;;
    oci)
      oci=$(dirname "$conf")/oci.conf
      if [ ! -r "$oci" ]; then
        say missing "no $oci (srun --container is ignored without it)"; continue
      fi
      prog=$(awk -F= 'tolower($1) ~ /^runtime(run|create)$/ {
        sub(/^"/, "", $2); split($2, w, " "); print w[1]; exit }' "$oci")
      if [ -z "$prog" ]; then
        say missing "$oci sets no RunTimeRun or RunTimeCreate"; continue
      fi ;;
    *) say missing "unknown runtime"; continue ;;
  esac
  if found=$(command -v "$prog"); then say ok "$found"; else say missing "no $prog on PATH"; fi
done
"""


@dataclass(frozen=True)
class RuntimeFinding:
    """One runtime on the probed node.

    Attributes:
        runtime: The site's name for it (``charliecloud``, ``oci``, ...).
        ok: Its program (and configuration) is there.
        node: The node probed (``login`` for pyxis' srun plugin).
        detail: The program's path, or what is missing.
    """

    runtime: str
    ok: bool
    node: str
    detail: str


@dataclass(frozen=True)
class RuntimeProbe:
    """What the probe found; ``not_checked`` says why there are no findings."""

    findings: tuple[RuntimeFinding, ...] = ()
    not_checked: str | None = None


def probe_runtimes(
    runner: Runner,
    runtimes: Sequence[str],
    *,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    wait: int = 20,
) -> RuntimeProbe:
    """Look for ``runtimes`` on one compute node (and pyxis on the login node).

    Args:
        runner: Where Slurm's commands run.
        runtimes: The site's ``containers.runtimes``.
        partition, account, qos: Where the probe's one-task job may run.
        wait: Seconds the probe may wait for a node (``srun --immediate``).
    """
    argv = ["srun", f"--immediate={wait}", "--nodes=1", "--ntasks=1", "--time=1"]
    argv += ["--mem=16M", "--job-name=hpclaunch-site-check", "--quiet"]
    argv += [f"--{flag}={value}" for flag, value in _where(partition, account, qos)]
    argv += ["sh", "-c", _PROBE, "sh", *runtimes]
    try:
        result = runner.run(argv, timeout=wait + 60)
    except TransportError as exc:
        return RuntimeProbe(not_checked=exc.message.splitlines()[0])
    findings = [_finding(line) for line in result.stdout.splitlines()]
    found = [f for f in findings if f is not None]
    if result.returncode != 0 or not found:
        why = (result.stderr.strip().splitlines() or [f"srun exited {result.returncode}"])[-1]
        return RuntimeProbe(not_checked=f"srun on a compute node failed: {why}")
    if "pyxis" in runtimes:
        found.append(_pyxis_on_login(runner))
    return RuntimeProbe(tuple(found))


def _where(partition: str | None, account: str | None, qos: str | None) -> list[tuple[str, str]]:
    pairs = [("partition", partition), ("account", account), ("qos", qos)]
    return [(flag, value) for flag, value in pairs if value]


def _finding(line: str) -> RuntimeFinding | None:
    parts = line.split(" ", 3)
    if len(parts) != 4 or parts[1] not in ("ok", "missing"):
        return None
    return RuntimeFinding(parts[0], parts[1] == "ok", parts[2], parts[3])


def _pyxis_on_login(runner: Runner) -> RuntimeFinding:
    """pyxis adds ``--container-image`` to srun through plugstack.conf (SPANK)."""
    try:
        result = runner.run(["srun", "--help"], timeout=30)
    except TransportError as exc:
        return RuntimeFinding("pyxis", False, "login", exc.message.splitlines()[0])
    if "--container-image" in result.stdout:
        return RuntimeFinding("pyxis", True, "login", "srun --help lists --container-image")
    return RuntimeFinding(
        "pyxis",
        False,
        "login",
        "srun --help has no --container-image (pyxis not in plugstack.conf)",
    )
