"""Capability discovery through pyslurm: the same
:class:`~hpclaunch.slurm.capabilities.Capabilities` as the six commands of
:func:`hpclaunch.slurm.capabilities.discover`, from three RPCs and two accounting queries in
this process.

* slurmctld's config (``Config.load``) is put back into ``scontrol show config``'s names and
  text, so :func:`hpclaunch.slurm.capabilities.assemble` reads its values by the one rule for both;
* partitions (``Partitions.load``) and nodes (``Nodes.load``) as ``scontrol show
  partition`` and ``sinfo -N`` report them;
* the user's associations from slurmdbd (``db.Associations``);
* every QOS through ``sacctmgr`` (the cli step): pyslurm 25.11.2's ``db.QualityOfService``
  has only a QOS's name, id and description, none of the priority, preemption, grace time,
  wall-time and TRES limits that ``site check`` and ``tier`` read.

Values pyslurm gives as Python types (checked against the commands' answers on 25.11.7):
``SchedulerParameters`` and ``PreemptParameters`` are dicts (``{"bf_interval": 1}``,
``{"send_user_signal": True}``), ``AccountingStorageEnforce`` upper case, ``MaxTime``
minutes (seconds here, as parsed from scontrol) or ``"UNLIMITED"``, unset allow/deny
lists ``["ALL"]``, node states upper case (``IDLE``, ``MIXED+DRAIN``; sinfo's ``%T`` says
``idle``, ``draining``: the state is shown, never decided on).
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from hpclaunch.errors import TransportError
from hpclaunch.slurm.capabilities import (
    Accounting,
    Association,
    Capabilities,
    Gres,
    NodeInfo,
    PartitionInfo,
    assemble,
    read_qos,
)
from hpclaunch.transport.base import Runner

__all__ = ["discover_with_pyslurm"]


def discover_with_pyslurm(
    pyslurm: ModuleType, runner: Runner, client: str, *, now: Callable[[], float] = time.time
) -> Capabilities:
    """What :func:`hpclaunch.slurm.capabilities.discover` reads, through pyslurm (and sacctmgr for
    the QOS). ``client``: the release of the Slurm commands here (the backend still runs
    some: sacctmgr, ``sacct -D``, ``scontrol uhold``; ``site check`` compares it with the
    controller's).

    Raises:
        pyslurm.RPCError: slurmctld could not be asked (the backend turns it into its error).
    """
    config = pyslurm.slurmctld.Config.load()
    user = pwd.getpwuid(os.getuid()).pw_name
    return assemble(
        config_text(config),
        partitions=tuple(_partition(p) for p in pyslurm.Partitions.load().values()),
        nodes=tuple(_node(n) for n in pyslurm.Nodes.load().values()),
        user=user,
        accounting=_accounting(pyslurm, runner, user, str(config.cluster_name or "")),
        discovered_at=now(),
        client=client,
    )


def config_text(config: Any) -> dict[str, str]:
    """The values :func:`hpclaunch.slurm.capabilities.assemble` reads, as ``scontrol show config``
    prints them."""
    return {
        "ClusterName": str(config.cluster_name or ""),
        "SLURM_VERSION": str(config.version),
        "MaxArraySize": _text(config.max_array_size),
        "MaxJobCount": _text(getattr(config, "max_job_count", None)),
        "MinJobAge": _text(config.min_job_age),
        "PreemptType": _text(config.preempt_type) or "preempt/none",
        "PreemptMode": _text(config.preempt_mode) or "OFF",
        "JobRequeue": "1" if config.job_requeue else "0",
        "SchedulerParameters": _text(config.scheduler_parameters),
        "SlurmctldParameters": _text(config.slurmctld_parameters),
        "PreemptParameters": _text(config.preempt_parameters),
        "PriorityType": _text(config.priority_type) or "priority/basic",
        "PriorityWeightQOS": _text(config.priority_weight_qos),
        # scontrol prints these lower case ("associations,limits,qos,safe"); pyslurm upper.
        "AccountingStorageEnforce": _text(config.accounting_storage_enforce).lower(),
        "AccountingStorageTRES": _text(config.accounting_storage_tres),
    }


def _text(value: Any) -> str:
    """A config value as scontrol prints it: ``{"bf_interval": 1, "x": True}`` is
    ``bf_interval=1,x``; a list is comma-separated; ``None`` is empty."""
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return ",".join(k if v is True else f"{k}={v}" for k, v in value.items() if v is not False)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _partition(part: Any) -> PartitionInfo:
    return PartitionInfo(
        name=part.name,
        default=bool(part.is_default),
        state=str(part.state).upper(),
        max_time=None if _limit(part.max_time) is None else 60 * part.max_time,  # seconds
        max_nodes=_limit(part.max_nodes),
        total_nodes=int(part.total_nodes or 0),
        nodes=part.nodes or "",
        allow_qos=_allowed(part.allowed_qos),
        deny_qos=_denied(part.denied_qos),
        allow_accounts=_allowed(part.allowed_accounts),
        deny_accounts=_denied(part.denied_accounts),
    )


def _limit(value: Any) -> int | None:
    """Minutes or nodes; ``"UNLIMITED"`` (or nothing) is no limit."""
    return int(value) if isinstance(value, int) else None


def _allowed(names: Iterable[str] | None) -> tuple[str, ...] | None:
    found = tuple(names or ())
    return None if not found or "ALL" in found else found


def _denied(names: Iterable[str] | None) -> tuple[str, ...]:
    # pyslurm 25.11.2 reads an unset deny list as ["ALL"]; scontrol prints none.
    found = tuple(names or ())
    return () if "ALL" in found else found


def _node(node: Any) -> NodeInfo:
    return NodeInfo(
        name=node.name,
        partitions=tuple(node.partitions or ()),
        gres=_gres(node.configured_gres or {}),
        cpus=node.total_cpus,
        state=str(node.state).lower(),
    )


def _gres(configured: Mapping[str, int]) -> tuple[Gres, ...]:
    """``{"gpu": 4}`` / ``{"gpu:a100": 2}`` → GRES, as sinfo's ``gpu:4``, ``gpu:a100:2``."""
    out = []
    for key, count in configured.items():
        name, _, kind = key.partition(":")
        out.append(Gres(name, kind or None, int(count)))
    return tuple(out)


def _accounting(pyslurm: ModuleType, runner: Runner, user: str, cluster: str) -> Accounting:
    """QOS (sacctmgr) and the user's associations on ``cluster`` (slurmdbd, through
    pyslurm), or ``None``s and why, as without accounting."""
    try:
        wanted = pyslurm.db.AssociationFilter(users=[user])
        records = list(pyslurm.db.Associations.load(wanted).values())
    except pyslurm.RPCError as exc:
        return None, None, None, f"accounting unknown: pyslurm: {exc}"
    try:
        qos = read_qos(runner)
    except TransportError as exc:
        return None, None, None, f"accounting unknown: {exc.message.splitlines()[0]}"
    default = None
    assocs = []
    for record in records:
        if record.user != user:
            continue  # the account's own association (no user)
        if record.is_default:
            default = record.account
        if cluster and record.cluster and record.cluster != cluster:
            continue
        names = tuple(sorted(record.qos or ()))  # sacctmgr lists them by name
        assocs.append(Association(record.account, record.partition or None, names or None))
    return qos, default, tuple(assocs), None
