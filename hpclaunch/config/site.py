"""The site config: what one Slurm cluster offers and how hpclaunch should use it.

A site is a YAML file, normally ``site-configs/NAME.yaml`` (shipped with hpclaunch), or any
path. It is validated into :class:`SiteConfig` (pydantic, frozen, unknown keys forbidden).
See ``site-configs/local.yaml`` for the local test cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpclaunch._resources import shipped_dir
from hpclaunch.errors import ConfigError
from hpclaunch.slurmtime import format_time, parse_time_limit
from hpclaunch.spec import Tier

__all__ = ["Partition", "SiteConfig", "SiteDefaults", "TierPolicy", "load_site", "site_search_dirs"]

_NAME = r"^[A-Za-z0-9_.-]+$"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Partition(_Model):
    """One Slurm partition, as far as hpclaunch needs to know it.

    Attributes:
        name: The partition name (``--partition``).
        gpu_type: The GRES type of its GPUs (``gpu:a100``); ``None`` when GRES has no type.
        gpus_per_node: GPUs on each node (0: a CPU partition).
        cpus_per_node: CPUs on each node.
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
        if value is None or not isinstance(value, (str, int)):
            return value
        seconds = parse_time_limit(value)
        return None if seconds is None else format_time(seconds)

    @property
    def max_time_seconds(self) -> int | None:
        """``max_time`` in seconds, or ``None`` for no limit."""
        return parse_time_limit(self.max_time)


class TierPolicy(_Model):
    """How one priority tier maps onto Slurm.

    Attributes:
        qos: The QOS to submit with (``--qos``).
        partition: Force this partition for the tier; ``None``: choose by resources.
        preemptible: Whether jobs of this tier can be preempted (and so are requeued).
        grace: The QOS ``GraceTime`` in seconds: how long a preempted job has to stop.
    """

    qos: str = Field(pattern=_NAME)
    partition: str | None = Field(None, pattern=_NAME)
    preemptible: bool = False
    grace: int = Field(0, ge=0)


class SiteDefaults(_Model):
    """Settings a site suggests; the user's config, env and flags override them."""

    backend: str | None = None
    remote: str | None = None


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
        quotas: Project to guaranteed GPUs (used by the tier scheduler).
        job_root: Where job directories are made; ``~`` is the submitting user's home.
        poll_min_interval: Never ask Slurm for job status more often than this (seconds).
        module_system: ``lmod``, ``tcl`` (Environment Modules) or ``none``: whether jobs
            can ``module load`` (specs with modules are refused on ``none``).
        modules: Environment modules to ``module load`` in every job.
        scratch: Fast per-user storage, exported to jobs as ``HPCLAUNCH_SCRATCH``: an
            absolute path, ``~/...``, or ``$VAR/...`` for a variable the site sets on the
            compute nodes (e.g. ``$PSCRATCH`` on Perlmutter).
        login: ``[user@]host[:port]`` of the login node, reached over SSH when hpclaunch
            runs elsewhere (same as ``defaults: {remote: ...}``, which wins).
        defaults: Settings this site suggests (backend, remote).
    """

    name: str = Field(min_length=1)
    partitions: tuple[Partition, ...] = Field(min_length=1)
    gres_style: Literal["gres", "gpus_per_node"] = "gres"
    gres_name: str = Field("gpu", pattern=_NAME)
    tiers: dict[Tier, TierPolicy] = Field(default_factory=dict)
    default_account: str | None = Field(None, pattern=_NAME)
    quotas: dict[str, int] = Field(default_factory=dict)
    job_root: str = Field("~/.hpclaunch/jobs", min_length=1)
    poll_min_interval: float = Field(10.0, gt=0)
    module_system: Literal["lmod", "tcl", "none"] = "none"
    modules: tuple[str, ...] = ()
    scratch: str | None = Field(None, pattern=r"^(/|~/|\$[A-Za-z_][A-Za-z0-9_]*(/|$))")
    login: str | None = Field(None, min_length=1)
    defaults: SiteDefaults = Field(default_factory=SiteDefaults)

    @field_validator("quotas")
    @classmethod
    def _non_negative_quotas(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [project for project, gpus in value.items() if gpus < 0]
        if bad:
            raise ValueError(f"guaranteed GPUs must be >= 0 (projects: {', '.join(bad)})")
        return value

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
        for tier, policy in self.tiers.items():
            if policy.partition is not None and policy.partition not in names:
                raise ValueError(
                    f"tier {tier!r} names partition {policy.partition!r}, which is not among "
                    f"the partitions: {', '.join(names)}"
                )
        return self

    def partition(self, name: str) -> Partition:
        """Return the partition called ``name`` (``KeyError`` if there is none)."""
        for part in self.partitions:
            if part.name == name:
                return part
        raise KeyError(name)


def site_search_dirs() -> list[Path]:
    """Directories where site names are looked up, in order."""
    shipped = shipped_dir("site-configs")
    return [shipped] if shipped else []


def load_site(name_or_path: str | Path) -> SiteConfig:
    """Load a site config by name (``local`` → ``site-configs/local.yaml``) or by path.

    Args:
        name_or_path: A site name, or a path to a YAML file (anything with a ``/`` or a
            ``.yaml``/``.yml`` suffix is taken as a path).

    Raises:
        ConfigError: The site is unknown (the message lists the known ones), the file is
            not YAML, or a field is wrong (file, field path and fix).
    """
    from hpclaunch._validation import load_model, read_yaml_mapping

    path = _resolve(str(name_or_path))
    data = read_yaml_mapping(path, ConfigError, "site config")
    return load_model(SiteConfig, data, source=f"site config {path}", error_cls=ConfigError)


def _resolve(name: str) -> Path:
    if "/" in name or name.endswith((".yaml", ".yml")):
        return Path(name).expanduser()
    dirs = site_search_dirs()
    for directory in dirs:
        candidate = directory / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
    raise ConfigError(
        f"unknown site {name!r} (looked in {', '.join(str(d) for d in dirs) or 'nowhere'})",
        hint=f"known sites: {', '.join(known) or 'none'}; or pass a path to a site YAML file",
    )
