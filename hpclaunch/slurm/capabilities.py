"""Capability discovery: what the live cluster really offers, read once and cached.

Six commands, all through a :class:`~hpclaunch.transport.base.Runner` (so they work over SSH
too), none of them parsing JSON:

* ``scontrol show config``: Slurm version, ``MaxArraySize``, ``MinJobAge``, ``PreemptType``,
  ``PreemptMode``, ``PreemptParameters``, ``JobRequeue``, ``SchedulerParameters``,
  ``SlurmctldParameters``,
  ``PriorityType``, ``PriorityWeightQOS``, ``AccountingStorageEnforce``/``TRES``;
* ``scontrol show partition --oneliner``: one ``Key=Value`` line per partition (the same
  keys since Slurm 2.x; new keys are ignored);
* ``sinfo -h -N -o '%N|%R|%G|%c|%T'``: one line per node and partition, with its GRES;
* ``id -un``: who we are where Slurm runs;
* ``sacctmgr -n -P show qos ...`` and ``sacctmgr -n -P show user NAME withassoc ...``: QOS and
  the user's associations. Without ``sacctmgr`` or slurmdbd these are ``None`` ("accounting
  unknown"), not an error.

Why not ``sinfo --json``: it exists in 22.05 (OpenAPI v0.0.38) but its shape changed in 23.02
and again in 24.11 (torchx's parser broke on 24.11), and ``scontrol`` has no ``--json`` before
23.02. The fixed ``-o`` formats and ``Key=Value`` lines above have been stable for many years.

The pyslurm backend reads the same through the library
(:mod:`hpclaunch.backends.pyslurm.discover`); both end in :func:`assemble`.

The result is cached by :mod:`hpclaunch.store.capabilities`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import CommandFailed, TransportError
from hpclaunch.slurm.text import is_empty, key_values
from hpclaunch.slurm.times import format_time, read_time_limit
from hpclaunch.transport.base import CommandResult, Runner

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = [
    "Accounting",
    "Association",
    "Capabilities",
    "Gres",
    "NodeInfo",
    "PartitionInfo",
    "QosInfo",
    "assemble",
    "discover",
    "parse_config",
    "parse_gres",
    "parse_nodes",
    "parse_partitions",
    "parse_qos",
    "parse_user_assocs",
    "read_qos",
]

#: The first release with ``--requeue=expedite`` (sbatch(1), 25.11).
EXPEDITED_REQUEUE_SINCE = (25, 11)
#: Seconds a cached discovery stays fresh.
#: Bumped when the cached JSON changes shape; older caches are rediscovered.
CACHE_FORMAT = 4
COMMAND_TIMEOUT = 30.0

SINFO_FORMAT = "%N|%R|%G|%c|%T"
QOS_FORMAT = "Name,Priority,Preempt,PreemptMode,GraceTime,MaxWall,GrpTRES"
ASSOC_FORMAT = "User,DefaultAccount,Cluster,Account,Partition,QOS"


@dataclass(frozen=True)
class Gres:
    """One generic resource on a node: ``gpu:a100:4`` is ``Gres("gpu", "a100", 4)``."""

    name: str
    type: str | None
    count: int


@dataclass(frozen=True)
class NodeInfo:
    """A node as sinfo reports it (all its partitions merged)."""

    name: str
    partitions: tuple[str, ...]
    gres: tuple[Gres, ...]
    cpus: int | None
    state: str

    def gpus(self, gres_name: str = "gpu", gpu_type: str | None = None) -> int:
        """How many GRES ``gres_name`` (of ``gpu_type``, if given) this node has."""
        return sum(
            g.count
            for g in self.gres
            if g.name == gres_name and (gpu_type is None or g.type == gpu_type)
        )


@dataclass(frozen=True)
class PartitionInfo:
    """A partition as ``scontrol show partition`` reports it.

    ``max_time``/``max_nodes`` ``None`` mean UNLIMITED; ``allow_qos``/``allow_accounts``
    ``None`` mean ALL.
    """

    name: str
    default: bool
    state: str
    max_time: int | None
    max_nodes: int | None
    total_nodes: int
    nodes: str
    allow_qos: tuple[str, ...] | None = None
    deny_qos: tuple[str, ...] = ()
    allow_accounts: tuple[str, ...] | None = None
    deny_accounts: tuple[str, ...] = ()

    @property
    def max_time_text(self) -> str:
        """MaxTime as scontrol prints it: ``D-HH:MM:SS``, or ``UNLIMITED``."""
        return _limit_text(self.max_time)

    @property
    def node_limit(self) -> int:
        """The most nodes one job can get here: MaxNodes, else the partition's size."""
        return self.total_nodes if self.max_nodes is None else min(self.max_nodes, self.total_nodes)


@dataclass(frozen=True)
class QosInfo:
    """A QOS from ``sacctmgr show qos``; ``preempt``: the QOS it may preempt."""

    name: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    grace_time: int | None
    max_wall: int | None
    grp_tres: str

    @property
    def max_wall_text(self) -> str:
        """MaxWall as a time limit: ``D-HH:MM:SS``, or ``UNLIMITED``."""
        return _limit_text(self.max_wall)


def _limit_text(seconds: int | None) -> str:
    return "UNLIMITED" if seconds is None else format_time(seconds)


@dataclass(frozen=True)
class Association:
    """One of the user's associations: an account, maybe one partition, the QOS allowed.

    ``partition`` ``None``: every partition. ``qos`` ``None``: not shown (inherited).
    """

    account: str
    partition: str | None
    qos: tuple[str, ...] | None


@dataclass(frozen=True)
class Capabilities:
    """What the cluster offers, as discovered by :func:`discover`.

    ``qos``, ``associations`` and ``default_account`` are ``None`` when accounting could not be
    read; ``accounting_problem`` then says why.
    """

    cluster: str
    slurm_version: str
    max_array_size: int | None
    min_job_age: int | None
    preempt_type: str
    preempt_mode: str
    job_requeue: bool
    scheduler_parameters: tuple[str, ...]
    slurmctld_parameters: tuple[str, ...]
    partitions: tuple[PartitionInfo, ...]
    nodes: tuple[NodeInfo, ...]
    user: str
    qos: tuple[QosInfo, ...] | None
    default_account: str | None
    associations: tuple[Association, ...] | None
    accounting_problem: str | None = None
    discovered_at: float = field(default=0.0, compare=False)
    priority_type: str = "priority/basic"
    priority_weight_qos: int = 0
    accounting_storage_enforce: tuple[str, ...] = ()
    accounting_storage_tres: tuple[str, ...] = ()
    preempt_parameters: tuple[str, ...] = ()
    client_version: str = "unknown"
    #: slurm.conf's MaxJobCount: the jobs slurmctld holds at once, all users together; each
    #: array task counts (job_mgr.c, 25.11.7: ``bit_set_count(job_desc->array_bitmap)``).
    max_job_count: int | None = None

    @property
    def version(self) -> tuple[int, int]:
        """Slurm's major and minor release, ``(25, 11)`` (``(0, 0)`` if unknown)."""
        return slurm_release(self.slurm_version)

    @property
    def signals_at_preemption(self) -> bool:
        """Whether the batch shell gets its ``--signal`` at once when the job is preempted.

        22.05 spells it ``SlurmctldParameters=preempt_send_user_signal``; slurm.conf(5) of
        24.11 and later documents ``PreemptParameters=send_user_signal`` (25.11's slurmctld
        still reads both: src/slurmctld/node_scheduler.c).
        """
        return (
            "preempt_send_user_signal" in self.slurmctld_parameters
            or "send_user_signal" in self.preempt_parameters
        )

    @property
    def expedited_requeue(self) -> bool:
        """Whether jobs may ask ``--requeue=expedite``: Slurm 25.11 added it, and slurmctld
        refuses such a job unless ``SlurmctldParameters`` has ``enable_expedited_requeue``
        ("Expedited requeue requested but not enabled", src/slurmctld/job_mgr.c, 25.11.7)."""
        return self.version >= EXPEDITED_REQUEUE_SINCE and (
            "enable_expedited_requeue" in self.slurmctld_parameters
        )

    @property
    def send_user_signal_setting(self) -> str:
        """The slurm.conf line that makes :attr:`signals_at_preemption` true on this version."""
        if self.version >= (24, 11):
            return "PreemptParameters=send_user_signal"
        return "SlurmctldParameters=preempt_send_user_signal"

    def partition(self, name: str) -> PartitionInfo | None:
        """The partition called ``name``, if the cluster has it."""
        return next((p for p in self.partitions if p.name == name), None)

    def qos_named(self, name: str) -> QosInfo | None:
        """The QOS called ``name`` (``None`` if absent or accounting is unknown)."""
        return next((q for q in self.qos or () if q.name == name), None)

    def nodes_of(self, partition: str) -> list[NodeInfo]:
        """The nodes in ``partition``."""
        return [n for n in self.nodes if partition in n.partitions]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return {"format": CACHE_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capabilities:
        """Rebuild from :meth:`to_dict`'s output (``KeyError``/``TypeError`` if malformed)."""
        if data.get("format") != CACHE_FORMAT:
            raise KeyError("format")
        d = dict(data)
        d.pop("format")
        for key in (
            "scheduler_parameters",
            "slurmctld_parameters",
            "accounting_storage_enforce",
            "accounting_storage_tres",
            "preempt_parameters",
        ):
            d[key] = tuple(d[key])
        d["partitions"] = tuple(PartitionInfo(**_tuples(p)) for p in d["partitions"])
        d["nodes"] = tuple(
            NodeInfo(**{**_tuples(n), "gres": tuple(Gres(**g) for g in n["gres"])})
            for n in d["nodes"]
        )
        if d["qos"] is not None:
            d["qos"] = tuple(QosInfo(**_tuples(q)) for q in d["qos"])
        if d["associations"] is not None:
            d["associations"] = tuple(Association(**_tuples(a)) for a in d["associations"])
        return cls(**d)


def _tuples(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


# -- parsing ----------------------------------------------------------------------------


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` → ``{key: value}`` (first occurrence wins; other sections,
    e.g. the cgroup or MPI plugin settings printed after the main block, are ignored)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        # "(null)": an unset plugin (25.11 prints "PreemptType = (null)"; 22.05
        # "preempt/none"): left out, so the caller's default names it.
        if sep and key and " " not in key and value.strip() != "(null)":
            values.setdefault(key, value.strip())
    return values


#: slurm.conf(5): requeue_delay defaults to AuthInfo's cred_expire, which defaults to 120 s.
DEFAULT_CRED_EXPIRE = 120


def requeue_delay(config: Mapping[str, str]) -> int:
    """Seconds a requeued job waits before it is eligible again, from ``scontrol show
    config`` (:func:`parse_config`): ``SchedulerParameters=requeue_delay=N`` (25.11 doc), else
    ``AuthInfo=cred_expire=N``, else 120; slurmctld adds one second (job_mgr.c)."""
    for key, name in (("SchedulerParameters", "requeue_delay"), ("AuthInfo", "cred_expire")):
        for item in config.get(key, "").split(","):
            option, _, value = item.strip().partition("=")
            if option == name and value.strip().isdigit():
                return int(value) + 1
    return DEFAULT_CRED_EXPIRE + 1


def parse_partitions(text: str) -> tuple[PartitionInfo, ...]:
    """``scontrol show partition --oneliner`` → partitions."""
    parts = []
    for line in text.splitlines():
        kv = key_values(line)
        if "PartitionName" not in kv:
            continue
        parts.append(
            PartitionInfo(
                name=kv["PartitionName"],
                default=kv.get("Default", "NO").upper() == "YES",
                state=kv.get("State", "UNKNOWN").upper(),
                max_time=_time_or_none(kv.get("MaxTime")),
                max_nodes=_int_or_none(kv.get("MaxNodes")),
                total_nodes=_int_or_none(kv.get("TotalNodes")) or 0,
                nodes=kv.get("Nodes", ""),
                allow_qos=_allow_list(kv.get("AllowQos")),
                deny_qos=_list(kv.get("DenyQos")),
                allow_accounts=_allow_list(kv.get("AllowAccounts")),
                deny_accounts=_list(kv.get("DenyAccounts")),
            )
        )
    return tuple(parts)


_GRES = re.compile(
    r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))??(?::(?P<count>\d+)[KMG]?)?(?:\(.*\))?$"
)


def parse_gres(text: str) -> tuple[Gres, ...]:
    """sinfo ``%G`` → GRES: ``gpu:4``, ``gpu:a100:4(S:0-1)``, ``gpu:a100:2,gpu:v100:2``,
    ``(null)``. Socket annotations ``(S:...)`` (shown since 20.11) are dropped."""
    if is_empty(text):
        return ()
    items = []
    for token in _split_outside_parens(text):
        match = _GRES.match(token.strip())
        if not match:
            continue
        items.append(
            Gres(match["name"], match["type"], int(match["count"]) if match["count"] else 1)
        )
    return tuple(items)


def _split_outside_parens(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += char
    return [*out, current]


def parse_nodes(text: str) -> tuple[NodeInfo, ...]:
    """``sinfo -h -N -o '%N|%R|%G|%c|%T'`` → nodes (a node in two partitions is listed
    twice by sinfo; merged here)."""
    merged: dict[str, NodeInfo] = {}
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 5:
            continue
        name, part, gres, cpus, state = (c.strip() for c in cols[:5])
        old = merged.get(name)
        parts = (*old.partitions, part) if old else (part,)
        merged[name] = NodeInfo(name, parts, parse_gres(gres), _int_or_none(cpus), state)
    return tuple(merged.values())


def parse_qos(text: str) -> tuple[QosInfo, ...]:
    """``sacctmgr -n -P show qos format=`` :data:`QOS_FORMAT` → QOS."""
    out = []
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 7 or not cols[0]:
            continue
        name, prio, preempt, mode, grace, wall, grp = cols[:7]
        out.append(
            QosInfo(
                name=name,
                priority=_int_or_none(prio) or 0,
                preempt=_list(preempt),
                preempt_mode=mode or "cluster",
                grace_time=_time_or_none(grace, bare="seconds"),
                max_wall=_time_or_none(wall),
                grp_tres=grp,
            )
        )
    return tuple(out)


def parse_user_assocs(
    text: str, user: str, cluster: str
) -> tuple[str | None, tuple[Association, ...]]:
    """``sacctmgr -n -P show user NAME withassoc format=`` :data:`ASSOC_FORMAT` →
    (default account, associations on ``cluster``)."""
    default, assocs = None, []
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 6 or cols[0] != user:
            continue
        default = cols[1] or default
        if cols[2] and cluster and cols[2] != cluster:
            continue
        qos = _list(cols[5])
        assocs.append(Association(cols[3], cols[4] or None, qos or None))
    return default, tuple(assocs)


def slurm_release(version: str) -> tuple[int, int]:
    """``"25.11.7"`` -> ``(25, 11)``: the release that decides formats and config names.

    Slurm's protocol and command formats change only between releases (YY.MM); the
    maintenance number never changes them. ``(0, 0)`` for what is not a version.
    """
    match = re.match(r"^\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def version_said(stdout: str) -> str:
    """The version a Slurm command's ``--version`` printed: ``slurm 25.11.7`` (SchedMD's
    build), ``slurm-wlm 22.05.8`` (Debian's package); ``unknown`` for anything else."""
    words = stdout.split()
    if len(words) == 2 and words[0].startswith("slurm") and slurm_release(words[1]) != (0, 0):
        return words[1]
    return "unknown"


def _list(value: str | None) -> tuple[str, ...]:
    if value is None or is_empty(value):
        return ()
    return tuple(v for v in (x.strip() for x in value.split(",")) if v)


def _allow_list(value: str | None) -> tuple[str, ...] | None:
    return None if value is None or value.upper() == "ALL" else _list(value)


def _int_or_none(value: str | None) -> int | None:
    match = re.match(r"^\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def _time_or_none(value: str | None, *, bare: str = "minutes") -> int | None:
    """A Slurm time (``UNLIMITED``/empty → ``None``). sacctmgr prints GraceTime as
    ``HH:MM:SS``; a bare number there would be seconds, as sacctmgr takes it."""
    if value is None or is_empty(value):
        return None
    value = value.strip()
    if bare == "seconds" and value.isdigit():
        return int(value)
    return read_time_limit(value)


# -- discovery --------------------------------------------------------------------------


def discover(runner: Runner, *, now: Callable[[], float] = time.time) -> Capabilities:
    """Read the cluster's capabilities (six commands, see the module docstring).

    After ``id -un``, the other five run at once from threads: each ``sacctmgr`` takes
    ~0.3 s on the local cluster (a slurmdbd round trip), ``scontrol``/``sinfo`` ~10 ms, so
    discovery costs about one ``sacctmgr`` (~0.4 s) instead of their sum (~0.7 s). The runner
    must accept concurrent :meth:`~hpclaunch.transport.base.Runner.run` calls.

    Raises:
        TransportError: ``scontrol``, ``sinfo`` or ``id`` is missing or failed (a missing
            ``sacctmgr`` only makes accounting unknown).
    """

    user = _run(runner, ["id", "-un"]).stdout.strip()
    commands = {
        "config": ["scontrol", "show", "config"],
        "partitions": ["scontrol", "show", "partition", "--oneliner"],
        "nodes": ["sinfo", "-h", "-N", "-o", SINFO_FORMAT],
        "qos": qos_argv(),
        "assoc": [
            *("sacctmgr", "-n", "-P", "show", "user", user, "withassoc"),
            f"format={ASSOC_FORMAT}",
        ],
        # The client commands' own version (no RPC): a login node whose commands are
        # another release than the controller fails in obscure ways (sitecheck says so).
        "client": ["sinfo", "--version"],
    }
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {key: pool.submit(_run, runner, argv) for key, argv in commands.items()}
    client = _client_version(futures["client"])
    try:
        config = parse_config(futures["config"].result().stdout)
    except CommandFailed as exc:
        raise _with_version_hint(exc, client) from None
    cluster = config.get("ClusterName", "")
    return assemble(
        config,
        partitions=parse_partitions(futures["partitions"].result().stdout),
        nodes=parse_nodes(futures["nodes"].result().stdout),
        user=user,
        accounting=_accounting(futures["qos"], futures["assoc"], user, cluster),
        discovered_at=now(),
        client=client,
    )


#: QOS, the user's default account and associations, and why they are unknown (``None``s).
Accounting = tuple[
    tuple["QosInfo", ...] | None, str | None, tuple["Association", ...] | None, str | None
]


def assemble(
    config: Mapping[str, str],
    *,
    partitions: tuple[PartitionInfo, ...],
    nodes: tuple[NodeInfo, ...],
    user: str,
    accounting: Accounting,
    discovered_at: float,
    client: str,
) -> Capabilities:
    """Capabilities from slurmctld's config as ``scontrol show config`` names and prints it
    (:func:`parse_config`) and the rest already read (the pyslurm backend builds the same
    ``config`` from its RPC: one reading of the values for both)."""
    qos, default_account, assocs, problem = accounting
    return Capabilities(
        cluster=config.get("ClusterName", ""),
        slurm_version=config.get("SLURM_VERSION", "unknown"),
        max_array_size=_int_or_none(config.get("MaxArraySize")),
        max_job_count=_int_or_none(config.get("MaxJobCount")),
        min_job_age=_int_or_none(config.get("MinJobAge")),  # "300 sec" in 22.05
        preempt_type=config.get("PreemptType", "preempt/none"),
        preempt_mode=config.get("PreemptMode", "OFF"),
        job_requeue=config.get("JobRequeue", "1").strip() == "1",
        scheduler_parameters=_list(config.get("SchedulerParameters")),
        slurmctld_parameters=_list(config.get("SlurmctldParameters")),
        # 22.05 does not print PreemptParameters; 24.11+ print "(null)" when unset.
        preempt_parameters=_list(config.get("PreemptParameters")),
        priority_type=config.get("PriorityType", "priority/basic"),
        priority_weight_qos=_int_or_none(config.get("PriorityWeightQOS")) or 0,
        accounting_storage_enforce=_list(config.get("AccountingStorageEnforce")),
        accounting_storage_tres=_list(config.get("AccountingStorageTRES")),
        partitions=partitions,
        nodes=_in_partition_order(nodes, partitions),
        user=user,
        qos=qos,
        default_account=default_account,
        associations=assocs,
        accounting_problem=problem,
        discovered_at=discovered_at,
        client_version=client,
    )


def _in_partition_order(
    nodes: tuple[NodeInfo, ...], partitions: tuple[PartitionInfo, ...]
) -> tuple[NodeInfo, ...]:
    """Each node's partitions in slurm.conf's order of partitions. Neither source keeps one:
    ``sinfo -N`` lists a node's lines in whichever order it merged them (seen to change from
    one call to the next on 25.11.7), and pyslurm's node record in its own."""
    rank = {p.name: i for i, p in enumerate(partitions)}
    return tuple(
        replace(
            n, partitions=tuple(sorted(n.partitions, key=lambda p: (rank.get(p, len(rank)), p)))
        )
        for n in nodes
    )


def qos_argv() -> list[str]:
    """The one ``sacctmgr`` call for every QOS (:data:`QOS_FORMAT`)."""
    return ["sacctmgr", "-n", "-P", "show", "qos", f"format={QOS_FORMAT}"]


def read_qos(runner: Runner) -> tuple[QosInfo, ...]:
    """Every QOS, from one ``sacctmgr``.

    Raises:
        TransportError: sacctmgr is missing or failed (:class:`CommandFailed`).
    """
    return parse_qos(_run(runner, qos_argv()).stdout)


def _run(runner: Runner, argv: list[str]) -> CommandResult:
    result = runner.run(argv, timeout=COMMAND_TIMEOUT)
    if not result.ok:
        raise CommandFailed(result, hint="is the Slurm controller up? (scontrol ping)")
    return result


def _client_version(future: Future[CommandResult]) -> str:
    """What ``sinfo --version`` said (:func:`version_said`)."""
    try:
        return version_said(future.result().stdout)
    except (CommandFailed, TransportError):
        return "unknown"


def _with_version_hint(exc: CommandFailed, client: str) -> CommandFailed:
    """``scontrol show config`` failed: name the client's version when that may be why.

    A client outside the controller's protocol range is refused: slurmctld logs
    "Incompatible versions of client and server code" and the client only says "Zero Bytes
    were transmitted or received" (a 25.11.7 scontrol against a 22.05.8 slurmctld, seen on
    the test cluster).
    """
    said = f"{exc.result.stderr} {exc.result.stdout}".lower()
    if not any(w in said for w in ("version", "protocol", "zero bytes were transmitted")):
        return exc
    return CommandFailed(
        exc.result,
        hint=(
            f"the Slurm commands here are {client}; the controller may run another release: "
            "use the cluster's own client commands (first on PATH, or the site config's "
            "slurm_bin)"
        ),
    )


def _accounting(
    qos: Future[CommandResult], assoc: Future[CommandResult], user: str, cluster: str
) -> Accounting:
    """QOS and associations, or (None, None, None, why) without usable accounting."""
    try:
        qos_out, assoc_out = qos.result().stdout, assoc.result().stdout
    except CommandFailed as exc:
        said = (exc.result.stderr.strip() or exc.result.stdout.strip()).splitlines()
        why = said[0] if said else f"exit code {exc.result.returncode}"
        return None, None, None, f"accounting unknown: {exc.result.argv[0]}: {why}"
    except TransportError as exc:
        return None, None, None, f"accounting unknown: {exc.message.splitlines()[0]}"
    default, assocs = parse_user_assocs(assoc_out, user, cluster)
    return parse_qos(qos_out), default, assocs, None


# -- cache ------------------------------------------------------------------------------


def names(items: Iterable[Any]) -> list[str]:
    """The ``.name`` of each item, sorted (for messages)."""
    return sorted(item.name for item in items)
