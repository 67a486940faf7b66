"""What sacctmgr says the cluster's QOS, accounts and associations are now.

:func:`read_live` reads the accounting state with three ``sacctmgr`` calls (QOS,
associations, accounts) through a :class:`~hpclaunch.transport.base.Runner`, so it works
over SSH too; :func:`parse_live` turns their output into a :class:`LiveState`, which
:func:`hpclaunch.planning.siteplan.plan_site` compares with what a site config asks for.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hpclaunch.errors import CommandFailed
from hpclaunch.slurm.text import is_empty
from hpclaunch.slurm.times import read_time_limit
from hpclaunch.slurm.tres import to_int
from hpclaunch.transport.base import Runner

__all__ = [
    "ACCOUNT_FORMAT",
    "ASSOC_FORMAT",
    "COMMAND_TIMEOUT",
    "QOS_FORMAT",
    "LiveAccount",
    "LiveAssoc",
    "LiveQos",
    "LiveState",
    "parse_live",
    "read_live",
]

#: Seconds a sacctmgr call may take (read here, run by :func:`hpclaunch.planning.siteplan.apply`).
COMMAND_TIMEOUT = 60.0
# Description last: it is free text and might hold a "|".
QOS_FORMAT = (
    "Name,Priority,Preempt,PreemptMode,GraceTime,MaxWall,MaxTRESPU,MaxJobsPU,UsageFactor,"
    "Description"
)
ASSOC_FORMAT = "Cluster,Account,User,Partition,ParentName,QOS,DefaultQOS,GrpTRES"
ACCOUNT_FORMAT = "Account,Description"


@dataclass(frozen=True)
class LiveQos:
    """A QOS as ``sacctmgr show qos`` prints it (times in seconds, ``None``: unset)."""

    name: str
    description: str = ""
    priority: int = 0
    preempt: tuple[str, ...] = ()
    preempt_mode: str = "cluster"
    grace: int = 0
    max_wall: int | None = None
    max_tres_per_user: str = ""
    max_jobs_per_user: int | None = None
    usage_factor: float = 1.0


@dataclass(frozen=True)
class LiveAssoc:
    """An association: ``user`` ``None`` is the account's own one (``parent`` set there)."""

    account: str
    user: str | None = None
    partition: str | None = None
    parent: str | None = None
    qos: tuple[str, ...] = ()
    default_qos: str | None = None
    grp_tres: str = ""


@dataclass(frozen=True)
class LiveAccount:
    """An account and its description (``hpclaunch: ...`` when hpclaunch made it)."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class LiveState:
    """QOS, the associations of one cluster, and accounts, as sacctmgr shows them."""

    cluster: str
    qos: tuple[LiveQos, ...] = ()
    assocs: tuple[LiveAssoc, ...] = ()
    accounts: tuple[LiveAccount, ...] = ()

    def qos_named(self, name: str) -> LiveQos | None:
        """The QOS called ``name``, if it exists."""
        return next((q for q in self.qos if q.name == name), None)

    def account_named(self, name: str) -> LiveAccount | None:
        """The account called ``name``, if it exists."""
        return next((a for a in self.accounts if a.name == name), None)

    def account_assoc(self, account: str) -> LiveAssoc | None:
        """``account``'s own association on this cluster."""
        return next((a for a in self.assocs if a.account == account and a.user is None), None)

    def user_assocs(self, account: str) -> list[LiveAssoc]:
        """The user associations under ``account``."""
        return [a for a in self.assocs if a.account == account and a.user is not None]


def read_live(runner: Runner, cluster: str) -> LiveState:
    """Read QOS, ``cluster``'s associations and the accounts (three sacctmgr calls, at once).

    Raises:
        CommandFailed: sacctmgr failed (no slurmdbd?).
        TransportError: sacctmgr cannot be run.
    """

    show = ("sacctmgr", "-n", "-P", "show")
    commands = {
        "qos": [*show, "qos", f"format={QOS_FORMAT}"],
        "assoc": [*show, "assoc", "where", f"cluster={cluster}", f"format={ASSOC_FORMAT}"],
        "account": [*show, "account", f"format={ACCOUNT_FORMAT}"],
    }
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {
            k: pool.submit(runner.run, argv, timeout=COMMAND_TIMEOUT)
            for k, argv in commands.items()
        }
    out = {}
    for key, future in futures.items():
        res = future.result()
        if not res.ok:
            raise CommandFailed(res, hint="is slurmdbd up? (sacctmgr show cluster)")
        out[key] = res.stdout
    return parse_live(cluster, out["qos"], out["assoc"], out["account"])


def parse_live(cluster: str, qos_text: str, assoc_text: str, account_text: str) -> LiveState:
    """The outputs of :func:`read_live`'s three commands → :class:`LiveState`."""
    qos = []
    for line in qos_text.splitlines():
        cols = line.split("|")
        if len(cols) < 10 or not cols[0]:
            continue
        qos.append(
            LiveQos(
                name=cols[0],
                priority=to_int(cols[1]) or 0,
                preempt=_names(cols[2]),
                preempt_mode=cols[3] or "cluster",
                grace=_seconds(cols[4]) or 0,
                max_wall=_seconds(cols[5]),
                max_tres_per_user=cols[6],
                max_jobs_per_user=to_int(cols[7]),
                usage_factor=_factor(cols[8]),  # sacctmgr prints 1.000000
                description="|".join(cols[9:]),
            )
        )
    assocs = []
    for line in assoc_text.splitlines():
        cols = line.split("|")
        if len(cols) < 8 or not cols[1] or (cluster and cols[0] != cluster):
            continue
        assocs.append(
            LiveAssoc(
                account=cols[1],
                user=cols[2] or None,
                partition=cols[3] or None,
                parent=cols[4] or None,
                qos=_names(cols[5]),
                default_qos=cols[6] or None,
                grp_tres=cols[7],
            )
        )
    accounts = []
    for line in account_text.splitlines():
        name, _, description = line.partition("|")
        if name:
            accounts.append(LiveAccount(name, description))
    return LiveState(cluster, tuple(qos), tuple(assocs), tuple(accounts))


def _factor(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 1.0  # unset: Slurm charges in full


def _names(value: str) -> tuple[str, ...]:
    if is_empty(value):
        return ()
    return tuple(sorted(v.strip() for v in value.split(",") if v.strip()))


def _seconds(value: str) -> int | None:
    """sacctmgr prints GraceTime and MaxWall as ``[D-]HH:MM:SS``; empty: unset."""
    if is_empty(value):
        return None
    return read_time_limit(value.strip())
