"""The site config: what one Slurm cluster offers and how hpclaunch should use it.

A site is a YAML file, normally ``site-configs/NAME.yaml`` (shipped with hpclaunch), or any
path. It is validated into :class:`SiteConfig` (pydantic, frozen, unknown keys forbidden).
See ``site-configs/local.yaml`` for the local test cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpclaunch.config.site_path import resolve_site_path, site_search_dirs
from hpclaunch.errors import ConfigError
from hpclaunch.jobspec.container import Mounts, RuntimeName
from hpclaunch.jobspec.idle import Idle
from hpclaunch.jobspec.tiers import Tier
from hpclaunch.jobspec.tracking import Tracking
from hpclaunch.slurm.times import format_time, parse_time_limit

__all__ = [
    "PREEMPTIBLE_USAGE_FACTOR",
    "OverQuota",
    "Partition",
    "Prices",
    "SiteConfig",
    "SiteDefaults",
    "TierPolicy",
    "load_site",
    "resolve_site_path",
    "site_search_dirs",
]

_NAME = r"^[A-Za-z0-9_.-]+$"


def _time_limit(value: object) -> object:
    """A Slurm time limit as ``HH:MM:SS`` (a bare number is minutes); ``UNLIMITED``: None.
    Anything else is left for pydantic to refuse."""
    if value is None or not isinstance(value, (str, int)):
        return value
    seconds = parse_time_limit(value)
    return None if seconds is None else format_time(seconds)


_Number = TypeVar("_Number", int, float)


def _none_negative(value: dict[str, _Number], message: str) -> dict[str, _Number]:
    """``value`` if none of its numbers is negative; else ValueError(``message`` with the
    names of those that are)."""
    bad = [name for name, number in value.items() if number < 0]
    if bad:
        raise ValueError(message.format(", ".join(bad)))
    return value


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Partition(_Model):
    """One Slurm partition, as far as hpclaunch needs to know it.

    Attributes:
        name: The partition name (``--partition``).
        gpu_type: The GRES type of its GPUs (``gpu:a100``); ``None`` when GRES has no type.
        gpus_per_node: GPUs on each node (0: a CPU partition).
        cpus_per_node: CPUs on each node.
        mem_per_node: slurm.conf ``RealMemory`` of its nodes, in MB (what ``--mem`` may ask
            for at most); ``None``: not checked.
        max_time: slurm.conf ``MaxTime`` (Slurm time format; a bare number is minutes;
            ``UNLIMITED``/absent: no limit), normalised to ``HH:MM:SS``.
        max_nodes: slurm.conf ``MaxNodes``, or the node count; ``None``: no limit.
        default: Whether this is the site's default partition.
        constraint: Node features every job here must ask for (``--constraint``), e.g.
            ``gpu`` on NERSC Perlmutter; a spec's own constraint is added with ``&``.
        select_by: ``partition`` submits with ``--partition=<name>``; ``constraint`` leaves
            ``--partition`` out and relies on ``constraint`` (sites that route jobs by
            feature and QOS, such as Perlmutter, where users do not name partitions).
    """

    name: str = Field(pattern=_NAME)
    gpu_type: str | None = Field(None, pattern=_NAME)
    gpus_per_node: int = Field(0, ge=0)
    cpus_per_node: int = Field(ge=1)
    mem_per_node: int | None = Field(None, ge=1)
    max_time: str | None = None
    max_nodes: int | None = Field(None, ge=1)
    default: bool = False
    constraint: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:&|\[\]*()!-]+$")
    select_by: Literal["partition", "constraint"] = "partition"

    @model_validator(mode="after")
    def _constraint_to_select(self) -> Partition:
        if self.select_by == "constraint" and not self.constraint:
            raise ValueError(f"partition {self.name}: select_by constraint needs a constraint")
        return self

    @field_validator("max_time", mode="before")
    @classmethod
    def _normalise_time(cls, value: object) -> object:
        return _time_limit(value)

    @property
    def max_time_seconds(self) -> int | None:
        """``max_time`` in seconds, or ``None`` for no limit."""
        return parse_time_limit(self.max_time)


#: The QOS ``UsageFactor`` of preemptible work (preemptible tiers, over-quota work) unless
#: the site says otherwise: it runs on GPUs nobody else asked for and may lose its last
#: minutes at each preemption, so it costs its project half the fair share of
#: guaranteed work. Not 0: free use would let one project hold every idle GPU at no
#: cost to its standing, and a factor of 0 adds no usage to limits such as
#: ``GrpTRESMins`` either (sacctmgr(1), UsageFactor).
PREEMPTIBLE_USAGE_FACTOR = 0.5


class TierPolicy(_Model):
    """How one priority tier maps onto Slurm.

    The fields after ``grace`` describe the QOS as ``hpclaunch site plan`` makes it; ``None``
    leaves that QOS setting as the admins set it.

    Attributes:
        qos: The QOS to submit with (``--qos``).
        partition: Force this partition for the tier; ``None``: choose by resources.
        preemptible: Whether jobs of this tier can be preempted (and so are requeued).
        grace: The QOS ``GraceTime`` in seconds: how long a preempted job has to stop.
        priority: The QOS ``Priority``: with ``PriorityWeightQOS`` it orders the queue.
        preempts: Whether this tier's QOS may preempt the preemptible tiers and over-quota
            work (QOS ``Preempt``); default: every tier that is not preemptible itself.
        max_wall: The QOS ``MaxWall`` (Slurm time format; a bare number is minutes).
        max_gpus_per_user: The QOS ``MaxTRESPerUser=gres/gpu=N``.
        max_jobs_per_user: The QOS ``MaxJobsPerUser``.
        usage_factor: The QOS ``UsageFactor``: how much of its jobs' use is charged to
            their association's fair share (and ``hpclaunch cost``'s charged GPU-hours):
            1 in full, 0.5 half, 0 free. Default: :data:`PREEMPTIBLE_USAGE_FACTOR` for a
            preemptible tier, else left as the admins set it (Slurm's default is 1).
    """

    qos: str = Field(pattern=_NAME)
    partition: str | None = Field(None, pattern=_NAME)
    preemptible: bool = False
    grace: int = Field(0, ge=0)
    priority: int | None = Field(None, ge=0)
    preempts: bool | None = None
    max_wall: str | None = None
    max_gpus_per_user: int | None = Field(None, ge=0)
    max_jobs_per_user: int | None = Field(None, ge=0)
    usage_factor: float | None = Field(None, ge=0)

    @field_validator("max_wall", mode="before")
    @classmethod
    def _normalise_wall(cls, value: object) -> object:
        return _time_limit(value)

    @model_validator(mode="after")
    def _preempting_tiers_are_not_preemptible(self) -> TierPolicy:
        if self.preemptible and self.preempts:
            raise ValueError(
                "a preemptible tier may not preempt others (preempts: true); Slurm's "
                "preempt/qos would let its jobs take each other's GPUs in turn"
            )
        return self

    @property
    def charged_factor(self) -> float | None:
        """The ``UsageFactor`` the tier's QOS gets (``None``: whatever it has)."""
        if self.usage_factor is None and self.preemptible:
            return PREEMPTIBLE_USAGE_FACTOR
        return self.usage_factor

    @property
    def may_preempt(self) -> bool:
        """Whether the tier's QOS lists the preemptible QOS in its ``Preempt``."""
        return (not self.preemptible) if self.preempts is None else self.preempts


class OverQuota(_Model):
    """Where a project's work beyond its guaranteed GPUs runs (Run:AI's "over quota").

    On a site with ``quotas``, each project ``P`` has two Slurm accounts: ``P`` itself,
    capped at its guarantee by the association limit ``GrpTRES=gres/gpu=<quota>`` and
    allowed the non-preemptible tiers' QOS, and a sibling ``account`` (``P-oq``), with no cap
    and only the preemptible QOS: ``qos`` below and the preemptible tiers'. A job of a
    non-preemptible tier that fits in what is left of the guarantee runs in ``P``; one that
    does not, and every job of a preemptible tier, runs in ``P-oq``, where any in-quota job
    of any project may preempt it. The sibling account keeps a project's own best-effort
    work from counting against its guarantee (Slurm counts every job of an association
    and its children towards its ``GrpTRES``, whatever the QOS).

    Attributes:
        qos: The QOS of over-quota work: preemptible, requeued at preemption.
        priority: Its QOS ``Priority`` (between the preemptible tiers' and the others').
        grace: Its QOS ``GraceTime`` in seconds.
        account: The over-quota account of project ``{project}``.
        nice_step: ``--nice`` added per tier below critical, so over-quota jobs keep their
            tiers' order among themselves (critical 0, high 1 step, medium 2 steps).
        usage_factor: Its QOS ``UsageFactor`` (:data:`PREEMPTIBLE_USAGE_FACTOR`).
    """

    qos: str = Field("overquota", pattern=_NAME)
    priority: int = Field(50, ge=0)
    grace: int = Field(10, ge=0)
    account: str = Field("{project}-oq", pattern=r"^[A-Za-z0-9_.{}-]+$")
    nice_step: int = Field(1000, ge=0)
    usage_factor: float = Field(PREEMPTIBLE_USAGE_FACTOR, ge=0)

    @field_validator("account")
    @classmethod
    def _has_project(cls, value: str) -> str:
        if "{project}" not in value:
            raise ValueError("must contain {project}, e.g. '{project}-oq'")
        return value

    def account_for(self, project: str) -> str:
        """The over-quota account of ``project``."""
        return self.account.replace("{project}", project)


class Prices(_Model):
    """What GPU time costs, for ``hpclaunch cost`` (no ``prices``: GPU-hours only).

    Attributes:
        gpu_hour: The price of one GPU-hour, for GPUs without a price of their own.
        gpu_types: The price of one GPU-hour per GPU type (the GRES type, ``a100``), used
            where sacct's ``AllocTRES`` names the type (``gres/gpu:a100=2``).
        currency: Shown with the amounts (``EUR``, ``USD``, ``credits``).
    """

    gpu_hour: float = Field(ge=0)
    gpu_types: dict[str, float] = Field(default_factory=dict)
    currency: str = Field("EUR", pattern=r"^[A-Za-z$€£_-]{1,16}$")

    @field_validator("gpu_types")
    @classmethod
    def _valid_types(cls, value: dict[str, float]) -> dict[str, float]:
        return _none_negative(value, "prices must be >= 0 (GPU types: {})")

    def cost(self, gpus: int, typed: Mapping[str, int], hours: float) -> float:
        """The price of ``gpus`` GPUs (``typed``: how many of each type) for ``hours``."""
        priced = {t: n for t, n in typed.items() if t in self.gpu_types}
        rest = max(gpus - sum(priced.values()), 0)
        return (
            sum(n * self.gpu_types[t] for t, n in priced.items()) + rest * self.gpu_hour
        ) * hours


class Containers(_Model):
    """The container runtimes a cluster offers (site config ``containers:``).

    Attributes:
        runtimes: The runtimes jobs may use (on every compute node).
        default: The one ``runtime: auto`` takes (default: the first of ``runtimes``).
        image_dir: Where relative image paths start (``~`` is the user's home).
        mounts: Mounts every container gets (the shared filesystems), ``SRC[:DST[:ro]]``.
        flags: Extra arguments per runtime (e.g. ``{apptainer: [--writable-tmpfs]}``),
            placed before the image (or, for pyxis and oci, on the srun line). Not flags that
            empty the environment (``--cleanenv``, ``--containall``): the command inside
            needs the job's ``HPCLAUNCH_*`` variables.
        hpclaunch_path: A directory on a filesystem the nodes share holding the
            ``hpclaunch`` package (e.g. the site ``python``'s site-packages): mounted
            read-only at the same path and put on ``PYTHONPATH`` inside, so that
            ``hpclaunch.runtime`` imports in images that do not install hpclaunch.
    """

    runtimes: tuple[RuntimeName, ...] = Field(min_length=1)
    default: RuntimeName | None = None
    image_dir: str | None = Field(None, pattern=r"^(/|~/)")
    mounts: Mounts = ()
    flags: dict[RuntimeName, tuple[str, ...]] = Field(default_factory=dict)
    hpclaunch_path: str | None = Field(None, pattern=r"^(/|~/)[^:,\x00]*$")

    @model_validator(mode="after")
    def _default_is_offered(self) -> Containers:
        if self.default is not None and self.default not in self.runtimes:
            raise ValueError(
                f"default: {self.default!r} is not among runtimes ({', '.join(self.runtimes)})"
            )
        return self

    @property
    def default_runtime(self) -> RuntimeName:
        """``default``, else the first of ``runtimes``."""
        return self.default or self.runtimes[0]


class SiteDefaults(_Model):
    """Settings a site suggests; the user's config, env and flags override them."""

    backend: str | None = None
    remote: str | None = None
    quota: Literal["allow", "strict"] | None = None


class SiteConfig(_Model):
    """Everything hpclaunch knows about one cluster.

    Attributes:
        name: The site's name (for messages; usually the Slurm ``ClusterName``).
        partitions: The partitions jobs may use.
        gres_style: How to ask for GPUs: ``gres`` gives ``--gres=gpu[:type]:N``,
            ``gpus_per_node`` gives ``--gpus-per-node=[type:]N``.
        gres_name: The GRES name of GPUs (slurm.conf ``GresTypes``), normally ``gpu``.
        tiers: Tier name to QOS/partition/preemption policy.
        default_account: The account when the spec names no project.
        quotas: Project (Slurm account) to guaranteed GPUs. Empty: no quotas, every job runs
            in its project's account with its tier's QOS. Otherwise every project a job may
            use must be listed (0: all its work is over-quota); see :class:`OverQuota`.
        overquota: Where work beyond a project's quota runs (used only with ``quotas``).
        expedited_requeue: Ask Slurm's expedited requeue (``--requeue=expedite``, Slurm
            25.11+ with ``SlurmctldParameters=enable_expedited_requeue``) for jobs whose
            sidecar requeues them: after a node failure such a job is eligible again at
            once, ahead of every other job, instead of after ``cred_expire`` + 1 s (121 s
            by default). ``site check`` says whether the cluster offers it.
        preemption: Who carries out the tiers' preemption: ``slurm`` (preempt/qos: each
            preempting tier's QOS lists the preemptible ones in ``Preempt``) or ``arbiter``
            (``hpclaunch arbiter`` picks the victims that lose least and asks them to
            checkpoint first; the QOS ``Preempt`` lists stay empty so that Slurm does not
            preempt too). Who may preempt whom is the same in both.
        job_root: Where job directories are made; ``~`` is the submitting user's home.
        python: The interpreter, on the cluster, that runs the sidecar and sweep tasks
            inside jobs: an environment with hpclaunch installed on a filesystem every
            compute node sees (``~`` is the user's home). ``None``: the interpreter running
            hpclaunch, which is right on the login node but means nothing on the cluster
            when hpclaunch runs on a laptop over SSH (such submissions then need it).
        poll_min_interval: Never ask Slurm for job status more often than this (seconds).
        module_system: ``lmod``, ``tcl`` (Environment Modules) or ``none``: whether jobs
            can ``module load`` (specs with modules are refused on ``none``).
        modules: Environment modules to ``module load`` in every job.
        scratch: Fast per-user storage, exported to jobs as ``HPCLAUNCH_SCRATCH``: an
            absolute path, ``~/...``, or ``$VAR/...`` for a variable the site sets on the
            compute nodes (e.g. ``$PSCRATCH`` on Perlmutter).
        node_only_paths: Absolute paths (or ``~/...``) mounted on the compute nodes only,
            such as node-local disks: ``submit`` does not check that paths under them exist
            (:mod:`hpclaunch.planning.paths`).
        login: ``[user@]host[:port]`` of the login node, reached over SSH when hpclaunch
            runs elsewhere (same as ``defaults: {remote: ...}``, which wins).
        prices: What a GPU-hour costs, for ``hpclaunch cost``; ``None``: no money column.
        slurm_bin: The directory of the cluster's Slurm commands (``sbatch``, ``squeue``,
            ``sacct``, ``scontrol``, ``sacctmgr``, ``sinfo``, ``sdiag``, ``scancel``,
            ``srun``) where Slurm runs, when they are not on ``PATH`` or ``PATH`` finds
            another version first (a site with several Slurm installs, e.g.
            ``/opt/slurm-25.11/bin``). Every Slurm command hpclaunch runs uses it, and jobs
            get it first on their ``PATH`` (their ``srun``, the sidecar). ``None``: ``PATH``.
        defaults: Settings this site suggests (backend, remote).
        containers: The container runtimes jobs may use (``None``: none).
        idle: The idle-GPU guard of jobs whose spec has none (:mod:`hpclaunch.jobspec.idle`):
            admins tell users of idle GPUs, or stop such jobs, site-wide.
        tracking: What a spec's ``tracking:`` leaves unset (a lab's W&B entity, its MLflow
            server), and ``offline: true`` when the compute nodes have no internet
            (:mod:`hpclaunch.jobspec.tracking`); it turns no tracker on by itself.
    """

    name: str = Field(min_length=1)
    partitions: tuple[Partition, ...] = Field(min_length=1)
    gres_style: Literal["gres", "gpus_per_node"] = "gres"
    gres_name: str = Field("gpu", pattern=_NAME)
    tiers: dict[Tier, TierPolicy] = Field(default_factory=dict)
    default_account: str | None = Field(None, pattern=_NAME)
    quotas: dict[str, int] = Field(default_factory=dict)
    overquota: OverQuota = Field(default_factory=OverQuota)
    preemption: Literal["slurm", "arbiter"] = "slurm"
    expedited_requeue: bool = False
    job_root: str = Field("~/.hpclaunch/jobs", min_length=1)
    python: str | None = Field(None, pattern=r"^(/|~/)")
    poll_min_interval: float = Field(10.0, gt=0)
    module_system: Literal["lmod", "tcl", "none"] = "none"
    modules: tuple[str, ...] = ()
    scratch: str | None = Field(None, pattern=r"^(/|~/|\$[A-Za-z_][A-Za-z0-9_]*(/|$))")
    node_only_paths: tuple[Annotated[str, Field(pattern=r"^(/|~/)")], ...] = ()
    login: str | None = Field(None, min_length=1)
    prices: Prices | None = None
    slurm_bin: str | None = Field(None, pattern=r"^/")
    defaults: SiteDefaults = Field(default_factory=SiteDefaults)
    containers: Containers | None = None
    idle: Idle | None = None
    tracking: Tracking | None = None

    @field_validator("quotas")
    @classmethod
    def _non_negative_quotas(cls, value: dict[str, int]) -> dict[str, int]:
        return _none_negative(value, "guaranteed GPUs must be >= 0 (projects: {})")

    @model_validator(mode="after")
    def _consistent(self) -> SiteConfig:
        names = [p.name for p in self.partitions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"partition names must be unique; repeated: {', '.join(dupes)}")
        defaults = [p.name for p in self.partitions if p.default]
        if len(defaults) > 1:
            raise ValueError(f"at most one partition may be default; got {', '.join(defaults)}")
        if self.modules and self.module_system == "none":
            raise ValueError("modules are listed but module_system is none; set lmod or tcl")
        if self.quotas:
            self._check_quota_names()
        for tier, policy in self.tiers.items():
            if policy.partition is not None and policy.partition not in names:
                raise ValueError(
                    f"tier {tier!r} names partition {policy.partition!r}, which is not among "
                    f"the partitions: {', '.join(names)}"
                )
        return self

    def _check_quota_names(self) -> None:
        qos_names = {policy.qos for policy in self.tiers.values()}
        if self.overquota.qos in qos_names:
            raise ValueError(
                f"overquota.qos {self.overquota.qos!r} is also a tier's QOS; over-quota work "
                "needs a QOS of its own"
            )
        for project in self.quotas:
            oq = self.overquota.account_for(project)
            if oq in self.quotas:
                raise ValueError(f"quotas: {oq!r} is project {project!r}'s over-quota account")

    @property
    def has_quotas(self) -> bool:
        """Whether guaranteed quotas are on (``quotas`` is not empty)."""
        return bool(self.quotas)

    def tier_of_qos(self, qos: str | None) -> str | None:
        """The tier whose QOS is ``qos``, if exactly one tier has it."""
        found = [str(name) for name, policy in self.tiers.items() if policy.qos == qos]
        return found[0] if qos is not None and len(found) == 1 else None

    def usage_factor_of(self, qos: str) -> float:
        """The share of a job's use charged to its fair share for QOS ``qos``, as this site
        config sets it (``site apply``; ``site check`` says where the cluster differs):
        1 where the config leaves the QOS alone."""
        if self.has_quotas and qos == self.overquota.qos:
            return self.overquota.usage_factor
        for policy in self.tiers.values():  # two tiers sharing a QOS: the first one's
            if policy.qos == qos:
                factor = policy.charged_factor
                return 1.0 if factor is None else factor
        return 1.0

    @overload
    def project_of(self, account: str) -> str: ...

    @overload
    def project_of(self, account: str | None) -> str | None: ...

    def project_of(self, account: str | None) -> str | None:
        """The project an account belongs to: ``P`` for ``P`` and for its over-quota account
        (``P-oq``; also of a project no longer under ``quotas``, by the name's pattern)."""
        if account is None:
            return None
        for project in self.quotas:
            if account == self.overquota.account_for(project):
                return project
        prefix, _, suffix = self.overquota.account.partition("{project}")
        if (
            not self.quotas
            or account in self.quotas
            or not account.startswith(prefix)
            or not account.endswith(suffix)
            or len(account) <= len(prefix) + len(suffix)
        ):
            return account
        return account[len(prefix) : len(account) - len(suffix)]

    def partition(self, name: str) -> Partition:
        """Return the partition called ``name`` (``KeyError`` if there is none)."""
        for part in self.partitions:
            if part.name == name:
                return part
        raise KeyError(name)


def load_site(name_or_path: str | Path) -> SiteConfig:
    """Load a site config by name (``local`` → ``site-configs/local.yaml``) or by path.

    Args:
        name_or_path: A site name, or a path to a YAML file (anything with a ``/`` or a
            ``.yaml``/``.yml`` suffix is taken as a path).

    Raises:
        ConfigError: The site is unknown (the message lists the known ones), the file is
            not YAML, or a field is wrong (file, field path and fix).
    """
    from hpclaunch._validation import load_model, read_yaml_mapping  # noqa: PLC0415 (yaml)

    path = resolve_site_path(name_or_path)
    data = read_yaml_mapping(path, ConfigError, "site config")
    return load_model(SiteConfig, data, source=f"site config {path}", error_cls=ConfigError)
