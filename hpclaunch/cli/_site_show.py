"""The tables of ``hpclaunch site show`` (rich is imported only here)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpclaunch.slurm.capabilities import Capabilities, Gres


def _gres(items: tuple[Gres, ...]) -> str:
    return ",".join(
        f"{g.name}:{g.type}:{g.count}" if g.type else f"{g.name}:{g.count}" for g in items
    )


def print_capabilities(caps: Capabilities) -> None:
    """Print ``caps`` as a few tables."""
    from rich.console import Console  # noqa: PLC0415 (rich)
    from rich.table import Table  # noqa: PLC0415 (rich)

    console = Console()
    age = max(0.0, time.time() - caps.discovered_at)
    console.print(
        f"cluster [bold]{caps.cluster}[/] Slurm {caps.slurm_version} (read {age:.0f} s ago), "
        f"user {caps.user}"
    )
    console.print(
        f"MaxArraySize {caps.max_array_size}  MinJobAge {caps.min_job_age} s  "
        f"PreemptType {caps.preempt_type}  PreemptMode {caps.preempt_mode}  "
        f"JobRequeue {int(caps.job_requeue)}"
    )
    console.print(f"SlurmctldParameters {','.join(caps.slurmctld_parameters) or '-'}")
    console.print(f"SchedulerParameters {','.join(caps.scheduler_parameters) or '-'}")

    parts = Table("PARTITION", "STATE", "NODES", "MAXNODES", "MAXTIME", "GRES", box=None)
    for p in caps.partitions:
        gres = sorted({_gres(n.gres) for n in caps.nodes_of(p.name)})
        parts.add_row(
            p.name + ("*" if p.default else ""),
            p.state,
            f"{p.total_nodes} ({p.nodes})",
            "UNLIMITED" if p.max_nodes is None else str(p.max_nodes),
            p.max_time_text,
            " ".join(gres) or "-",
        )
    console.print(parts)
    if caps.qos is None:
        console.print(f"[yellow]{caps.accounting_problem}[/]")
        return
    qos = Table("QOS", "PRIORITY", "PREEMPTS", "MODE", "GRACE", "MAXWALL", "GRPTRES", box=None)
    for q in sorted(caps.qos, key=lambda q: -q.priority):
        qos.add_row(
            q.name,
            str(q.priority),
            ",".join(q.preempt) or "-",
            q.preempt_mode,
            f"{q.grace_time or 0} s",
            q.max_wall_text,
            q.grp_tres or "-",
        )
    console.print(qos)
    assoc = Table("ACCOUNT", "PARTITION", "QOS", box=None)
    for a in caps.associations or ():
        default = "*" if a.account == caps.default_account else ""
        assoc.add_row(a.account + default, a.partition or "(all)", ",".join(a.qos or ("?",)))
    console.print(assoc)
