"""The job spec: what a researcher writes to describe one training job.

A spec is a YAML file validated into :class:`JobSpec` (pydantic v2, frozen, unknown keys
forbidden)::

    name: resnet50 baseline
    command: [python, train.py, --epochs, "90"]
    env: {OMP_NUM_THREADS: "4"}
    resources: {nodes: 1, gpus_per_node: 2, time: "04:00:00", mem: 32G}
    tier: medium
    project: vision
    checkpoint: {dir: /scratch/me/ckpt, signal_lead_time: 120}

or, with a script instead of a command, modules, a conda environment, a dependency and a
raw sbatch option::

    name: eval
    script: scripts/eval.sh
    args: [--split, test]
    modules: [cuda/12.1]
    conda: torch
    dependencies: [{job: "1234", type: afterok}]
    sbatch_extra: {--nice: 10}

Values are checked here for form only; whether the site can run the job is
:func:`hpclaunch.planning.plan.build_plan`'s business.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from hpclaunch.errors import SpecError
from hpclaunch.jobspec.batchplan import plan_batch
from hpclaunch.jobspec.container import Container
from hpclaunch.jobspec.elastic import Elastic
from hpclaunch.jobspec.idle import Idle
from hpclaunch.jobspec.notify import Notify
from hpclaunch.jobspec.retry import Retry
from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.jobspec.tiers import Tier
from hpclaunch.jobspec.tracking import Tracking
from hpclaunch.jobspec.words import ArgvWord, EnvVars, argv_word, no_nul
from hpclaunch.slurm import sbatch_options
from hpclaunch.slurm.times import format_time, parse_time

__all__ = [
    "CheckpointPolicy",
    "Dependency",
    "Elastic",
    "JobSpec",
    "Launcher",
    "Resources",
    "Tier",
    "load_spec",
    "read_spec_file",
    "validate_spec",
]

Launcher = Literal["none", "srun", "torchrun", "deepspeed", "accelerate"]
DependencyType = Literal["afterok", "afterany", "afternotok", "after"]

_MEM = re.compile(r"^(\d+)\s*([KMGT]?)B?$", re.IGNORECASE)
_MEM_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
# Older sbatch versions (20.x src/sbatch/opt.c, _opt_batch_script) take any "#SBATCH" line
# containing "packjob" (later also "hetjob"), in any case, as a heterogeneous-job separator.
# 22.05 does not (checked on the test cluster), but sites run older versions.
_HETJOB_WORDS = ("hetjob", "packjob")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# YAML users write `mem: 1000` and `time: 30`: the schema accepts numbers where we do.
_STR_OR_INT = WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
# Module names (cuda/12.1, gcc@11.2, PrgEnv-gnu) and conda environments (names or paths):
# one word of printable text, no blanks (they are shell-quoted anyway).
_WORD = r"^[^\s'\"`$;&|<>(){}\\]+$"


class Resources(_Model):
    """What the job asks Slurm for, per node.

    Attributes:
        nodes: Number of nodes (``--nodes``).
        gpus_per_node: GPUs on each node; 0 for a CPU-only job.
        gpu_type: A GPU type known to the site (e.g. ``a100``); needs ``gpus_per_node`` > 0.
        cpus_per_task: CPUs for each task (``--cpus-per-task``); one task per node for now.
        cpus_per_gpu: CPUs for each GPU (``--cpus-per-gpu``), instead of ``cpus_per_task``.
        mem: Memory per node, e.g. ``8G`` or ``500M`` (``--mem``); normalised to ``<n><unit>``.
        time: Time limit in a Slurm format (``MM``, ``HH:MM:SS``, ``D-HH:MM:SS``, ...),
            normalised to ``HH:MM:SS`` / ``D-HH:MM:SS``. ``None``: the partition's default.
        constraint: Node features (``--constraint``), e.g. ``ib&a100_80g``.
        exclusive: Whole nodes only, shared with no other job (``--exclusive``).
        partition: A partition of the site to run in (``--partition``); ``None``: the
            default partition, or the first that fits.
    """

    nodes: int = Field(1, ge=1, description="Number of nodes (--nodes).")
    gpus_per_node: int = Field(0, ge=0, description="GPUs on each node; 0: CPU only.")
    gpu_type: str | None = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="A GPU type of the site (any case), e.g. a100.",
        examples=["a100"],
    )
    cpus_per_task: int = Field(1, ge=1, description="CPUs per task (--cpus-per-task).")
    cpus_per_gpu: int | None = Field(
        None, ge=1, description="CPUs per GPU (--cpus-per-gpu), instead of cpus_per_task."
    )
    mem: Annotated[str | None, _STR_OR_INT] = Field(
        None, description="Memory per node (--mem), e.g. 8G or 500M.", examples=["16G"]
    )
    time: Annotated[str | None, _STR_OR_INT] = Field(
        None,
        description="Time limit: minutes, HH:MM:SS or D-HH:MM:SS (--time).",
        examples=["04:00:00"],
    )
    constraint: str | None = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9_.:\-&|\[\]*()!]+$",
        description="Node features (--constraint), e.g. 'ib&a100'.",
    )
    exclusive: bool = Field(False, description="Whole nodes, shared with no job (--exclusive).")
    partition: str | None = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="A partition of the site (--partition); default: the site's default "
        "partition, or the first that fits.",
        examples=["debug"],
    )

    @field_validator("mem", mode="before")
    @classmethod
    def _normalise_mem(cls, value: Any) -> Any:
        if value is None:
            return None
        match = _MEM.match(str(value).strip())
        if not match or isinstance(value, bool):
            raise ValueError(f"{value!r} is not a memory size; write e.g. 500M, 8G or 1T")
        number, unit = match.groups()
        if int(number) == 0:
            raise ValueError("mem must be more than zero (Slurm reads 0 as 'all of the node')")
        return f"{int(number)}{(unit or 'M').upper()}"

    @field_validator("time", mode="before")
    @classmethod
    def _normalise_time(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, (str, int)):
            raise ValueError(f"expected a time such as '04:00:00' or 30 (minutes), got {value!r}")
        return format_time(parse_time(value))

    @model_validator(mode="after")
    def _gpu_type_needs_gpus(self) -> Resources:
        if self.gpu_type is not None and self.gpus_per_node == 0:
            raise ValueError("gpu_type is set but gpus_per_node is 0; ask for at least one GPU")
        if self.cpus_per_gpu is not None:
            if self.gpus_per_node == 0:
                raise ValueError("cpus_per_gpu is set but gpus_per_node is 0; use cpus_per_task")
            # sbatch(1): --cpus-per-gpu is not compatible with --cpus-per-task.
            if "cpus_per_task" in self.model_fields_set:
                raise ValueError(
                    "give cpus_per_task or cpus_per_gpu, not both (Slurm refuses the pair)"
                )
        return self

    @property
    def cpus_per_node(self) -> int:
        """CPUs the job asks for on each node (one task per node)."""
        if self.cpus_per_gpu is not None:
            return self.cpus_per_gpu * self.gpus_per_node
        return self.cpus_per_task

    @property
    def time_seconds(self) -> int | None:
        """The time limit in seconds, or ``None`` for the partition's default."""
        return None if self.time is None else parse_time(self.time)

    @property
    def mem_mb(self) -> int | None:
        """Memory per node in MiB (rounded up), or ``None``."""
        if self.mem is None:
            return None
        number, unit = int(self.mem[:-1]), self.mem[-1]
        return max(1, math.ceil(number * _MEM_MB[unit]))


class CheckpointPolicy(_Model):
    """How the job is warned before it must stop, and how often it may come back.

    Attributes:
        dir: Where the trainer keeps checkpoints (exported as ``HPCLAUNCH_CHECKPOINT_DIR``).
        signal: The signal sent to the batch shell ahead of the end (``--signal=B:SIG@T``).
            USR1 by default; USR2 avoids clashes with NCCL's own USR1 handling.
        signal_lead_time: Seconds before the time limit to send it (sbatch allows 0-65535;
            Slurm may send it up to 60 s early). It must fit the time limit:
            :func:`hpclaunch.planning.signals.signal_lead`.
        max_requeues: How many times the job may be requeued; 0 means never (``--no-requeue``).
    """

    dir: str | None = Field(
        None,
        min_length=1,
        description="Where the trainer keeps checkpoints (HPCLAUNCH_CHECKPOINT_DIR); default: "
        "<job dir>/checkpoints.",
        examples=["/scratch/me/ckpt"],
    )
    signal: Literal["USR1", "USR2"] = Field(
        "USR1",
        description="The warning signal sent before the end (--signal=B:SIG@T); USR2 avoids "
        "NCCL's own USR1 handling.",
    )
    signal_lead_time: int = Field(
        120,
        ge=0,
        le=65535,
        description="Seconds before the time limit to warn (Slurm may warn up to 60 s early); "
        "with a short time limit the default shrinks to fit; a set value must be shorter "
        "than the time limit.",
    )
    max_requeues: int = Field(
        5,
        ge=0,
        description="How many times the job may be requeued after its time limit or a node "
        "failure (preemption is not counted), in every tier; 0: never (--no-requeue, no "
        "warning before the time limit).",
    )


class Dependency(_Model):
    """Start only after another job reached a state (``--dependency=<type>:<job>``).

    Attributes:
        job: The Slurm job id (``1234``, or ``1234_5`` for one array task).
        type: ``afterok`` (it completed), ``afternotok`` (it failed), ``afterany`` (it
            ended either way) or ``after`` (it started).
    """

    job: Annotated[str, BeforeValidator(argv_word, json_schema_input_type=str | int)] = Field(
        pattern=r"^(local-)?[0-9]+(_[0-9]+)?$",
        description="A job id: Slurm's, or the local backend's (local-3).",
        examples=["1234"],
    )
    type: DependencyType = Field("afterok", description="When this job may start.")


#: A sweep parameter's value: what YAML gives (``0.1``, ``64``, ``adam``, ``true``).
class JobSpec(_Model):
    """One job, as the researcher describes it.

    Attributes:
        name: Job name; any printable text (it is quoted wherever it is used).
        command: The program and its arguments as a list (an argv); never a shell line.
        script: Instead of ``command``: a script to run (its shebang picks the
            interpreter; it must be executable); relative paths start from the workdir.
        args: The script's arguments (only with ``script``); each reaches it exactly.
        workdir: Directory to start in; relative paths start from the submit directory.
        env: Extra environment variables for the job.
        launcher: How the command is started: ``none`` (directly, no sidecar), or under the
            sidecar (hpclaunch.supervise): ``srun`` (one task per GPU, or per node without
            GPUs), ``torchrun``, ``deepspeed`` or ``accelerate`` (one launcher per node).
        resources: What to ask Slurm for.
        tier: Priority tier; the site maps it to a QOS and says whether it is preemptible.
        project: The project to charge (Slurm account); default: the site's default account.
        checkpoint: Signal and requeue policy.
        output_dir: Where per-attempt logs go; default: the job directory.
        venv: A Python virtual environment to activate before the command (its directory;
            relative paths start from the workdir). It must be visible on the compute nodes.
        conda: A conda environment (name or path) to activate, instead of ``venv``.
        modules: Environment modules to load, after the site's own.
        dependencies: Jobs that must reach a state before this one starts.
        sbatch_extra: Raw sbatch options (``{--nice: 10}``; ``null`` for a flag without
            value). Options hpclaunch sets itself are refused, naming the field to use.
        sweep: Run the job once per point of a sweep (``hpclaunch sweep``); ``{name}`` in
            ``command``/``args`` becomes the point's value in each run.
        container: Run the command (and its launcher) in a container; the sidecar stays
            outside (:mod:`hpclaunch.jobspec.container`).
        elastic: Sizes the job may be resized to (:mod:`hpclaunch.jobspec.elastic`).
        retry: Retries on named failures, with backoff (:mod:`hpclaunch.jobspec.retry`).
        notify: Who is told of the job's events (:mod:`hpclaunch.jobspec.notify`).
        idle: The idle-GPU guard (:mod:`hpclaunch.jobspec.idle`).
    """

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["command"]}, {"required": ["script"]}]}
    )

    name: str = Field(min_length=1, max_length=200, description="Job name (--job-name).")
    command: tuple[ArgvWord, ...] | None = Field(
        None,
        min_length=1,
        description="The program and its arguments, as a list (never a shell line).",
        examples=[["python", "train.py", "--lr", "0.1"]],
    )
    script: str | None = Field(
        None, min_length=1, description="A script to run instead of command (executable)."
    )
    args: tuple[ArgvWord, ...] = Field((), description="The script's arguments.")
    workdir: str | None = Field(None, min_length=1, description="Directory to start in.")
    env: EnvVars = Field(default_factory=dict, description="Environment variables.")
    launcher: Launcher = Field("none", description="How the command is started.")
    processes_per_node: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Processes the launcher starts on each node (torchrun/deepspeed/accelerate "
        "workers, or copies of the command with launcher srun); default: one per GPU, one on "
        "a node without GPUs. 1 for a single-process multi-GPU trainer.",
    )
    resources: Resources = Field(
        default_factory=Resources, description="What to ask Slurm for, per node."
    )
    tier: Tier = Field("medium", description="Priority tier; the site maps it to a QOS.")
    project: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.-]+$", description="Account to charge (--account)."
    )
    checkpoint: CheckpointPolicy = Field(
        default_factory=CheckpointPolicy,
        description="The warning before the job must stop, and how often it may come back.",
    )
    output_dir: str | None = Field(None, min_length=1, description="Where attempt logs go.")
    venv: str | None = Field(None, min_length=1, description="Virtualenv directory to activate.")
    conda: str | None = Field(
        None, min_length=1, pattern=_WORD, description="Conda environment (name or path)."
    )
    modules: tuple[Annotated[str, Field(min_length=1, pattern=_WORD)], ...] = Field(
        (), description="Environment modules to load (after the site's).", examples=[["cuda/12.1"]]
    )
    dependencies: tuple[Dependency, ...] = Field(
        (), description="Jobs this one waits for (--dependency)."
    )
    sbatch_extra: dict[str, ArgvWord | None] = Field(
        default_factory=dict,
        description="Raw sbatch options, e.g. {--nice: 10, --begin: now}; null: no value. "
        "Options hpclaunch sets itself are refused.",
        examples=[{"--nice": 10, "--mail-type": "END"}],
    )
    sweep: Sweep | None = Field(None, description="A parameter sweep (hpclaunch sweep).")
    container: Container | None = Field(
        None, description="Run the command in a container (image, runtime, mounts)."
    )
    elastic: Elastic | None = Field(
        None,
        description="Sizes the job may be resized to and its batch at each (hpclaunch resize).",
    )
    idle: Idle | None = Field(
        None,
        description="Tell of GPUs sitting idle, and stop the job after a while (default: the "
        "site's idle:, if it has one). The GPUs are sampled through NVML: the job's Python "
        "needs nvidia-ml-py (pip install 'hpclaunch[gpu]'); submit warns when it lacks it, "
        "and status says when a running job's nodes sample no GPU (the guard cannot act).",
    )
    notify: Notify | None = Field(
        None,
        description="Tell a webhook (Slack-compatible) or an address what happens to the job: "
        "started, preempted (an operator's scontrol requeue too), resumed, resized (from and "
        "to how many nodes), checkpoint failed, GPUs idle, failed (a failure retry: requeues "
        "too, saying so), completed. With launcher: none only the end is told (submit says "
        "so).",
    )
    retry: Retry | None = Field(
        None,
        description="Run the job again when it fails in a named way (a node failure, a lost "
        "job, out of memory, an exit code), waiting longer before each retry.",
    )
    tracking: Tracking | None = Field(
        None,
        description="Experiment trackers (W&B, MLflow, TensorBoard): one run per job (per "
        "sweep task) that every attempt continues; runtime.report_progress(step, "
        "metrics=...) logs each step once, in order, across requeues.",
    )

    @property
    def argv(self) -> tuple[str, ...]:
        """What runs: ``command``, or ``script`` followed by ``args``."""
        if self.command is not None:
            return self.command
        assert self.script is not None  # the validator makes sure one of them is set
        return (self.script, *self.args)

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if not value.isprintable():
            raise ValueError("must be printable text on one line (no newlines, tabs or controls)")
        lowered = value.lower()
        for word in _HETJOB_WORDS:
            if word in lowered:
                raise ValueError(
                    f"must not contain {word!r}: older sbatch versions read any #SBATCH line "
                    "containing it as a heterogeneous-job separator"
                )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _argv_not_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "must be a list of arguments, e.g. [python, train.py, --lr, '0.1'], "
                "not one shell line: hpclaunch never runs your command through a shell"
            )
        return value

    @field_validator("command")
    @classmethod
    def _valid_argv(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not value[0]:
            raise ValueError("the program (first element) must not be empty")
        if value[0].startswith("-"):
            raise ValueError(f"the first element must be the program, not an option: {value[0]!r}")
        for arg in value:
            no_nul(arg)
        return value

    @field_validator("script", "args")
    @classmethod
    def _no_nul_in_script(cls, value: Any) -> Any:
        for word in (value,) if isinstance(value, str) else value:
            no_nul(word)
        return value

    @field_validator("sbatch_extra")
    @classmethod
    def _extra_not_ours(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        seen: dict[str, str] = {}
        for key, val in value.items():
            flag, inline = sbatch_options.normalise_flag(key)
            owner = sbatch_options.owner_of(flag)
            if owner is not None:
                name, use = owner
                same = "" if name == key else f" (sbatch reads {key!r} as {name})"
                raise ValueError(f"{key!r}{same} is set by hpclaunch: use {use} instead")
            if inline is not None and val is not None:
                raise ValueError(f"{key!r}: the value is given twice (in the key and as {val!r})")
            if flag in seen:
                raise ValueError(f"{key!r} repeats {seen[flag]!r}")
            seen[flag] = key
            no_nul(val or inline or "")
        return value

    @model_validator(mode="after")
    def _one_way_to_run(self) -> JobSpec:
        if (self.command is None) == (self.script is None):
            raise ValueError(
                "give either command (an argv list) or script (a path, with args), not "
                + ("both" if self.command is not None else "neither")
            )
        if self.args and self.script is None:
            raise ValueError("args go with script; with command, put them in the list")
        if self.conda and self.venv:
            raise ValueError("give venv or conda, not both: one environment is activated")
        if self.processes_per_node is not None and self.launcher == "none":
            raise ValueError(
                "processes_per_node needs a launcher (srun, torchrun, deepspeed or accelerate): "
                "with launcher none the command runs once, as written"
            )
        if self.idle is not None and self.idle.stop_after is not None and self.launcher == "none":
            raise ValueError(
                "idle.stop_after: the sidecar stops an idle job, and launcher none has no "
                "sidecar: set launcher: srun (or torchrun, deepspeed, accelerate)"
            )
        if self.sweep is not None and self.sweep.is_study and self.launcher == "none":
            raise ValueError(
                "sweep.metric: an adaptive sweep's trials are told their end (complete, "
                "pruned, failed) by the sidecar, and launcher none has no sidecar: set "
                "launcher: srun (or torchrun, deepspeed, accelerate)"
            )
        if self.retry is not None and self.launcher == "none":
            raise ValueError(
                "retry: the sidecar decides and requeues, and launcher none has no sidecar: "
                "set launcher: srun (or torchrun, deepspeed, accelerate)"
            )
        if self.retry is not None and self.checkpoint.max_requeues == 0:
            raise ValueError(
                "retry: a retry requeues the job, and checkpoint.max_requeues 0 forbids "
                "requeues (--no-requeue); set it to 1 or more (retries do not count)"
            )
        return self

    @field_validator("elastic")
    @classmethod
    def _elastic_fits(cls, elastic: Elastic | None, info: ValidationInfo) -> Elastic | None:
        # Declared last, so every other field is in info.data (when it was valid).
        keys = ("resources", "launcher", "checkpoint", "sweep", "processes_per_node")
        if elastic is None or not all(k in info.data for k in keys):
            return elastic
        _check_elastic(elastic, **{k: info.data[k] for k in keys})
        return elastic


def _check_elastic(
    elastic: Elastic,
    *,
    resources: Resources,
    launcher: str,
    checkpoint: CheckpointPolicy,
    sweep: Sweep | None,
    processes_per_node: int | None,
) -> None:
    """Whether the elastic block fits the rest of the spec (raises ValueError)."""
    nodes = resources.nodes
    if nodes not in elastic.nodes:
        raise ValueError(
            f"nodes {list(elastic.nodes)} must include resources.nodes ({nodes}), "
            "the size the job starts at"
        )
    if launcher == "none":
        raise ValueError(
            "launcher none has no sidecar to checkpoint and restart the job at a "
            "new size; use launcher torchrun, srun, deepspeed or accelerate"
        )
    if checkpoint.max_requeues == 0:
        raise ValueError(
            "a resize requeues the job, and checkpoint.max_requeues 0 forbids "
            "requeues (--no-requeue); set it to 1 or more (resizes do not count)"
        )
    if sweep is not None:
        raise ValueError("a sweep's tasks cannot be resized yet")
    ranks = processes_per_node or max(1, resources.gpus_per_node)
    for size in elastic.nodes:
        try:
            plan_batch(
                global_batch=elastic.global_batch,
                max_batch_per_gpu=elastic.max_batch_per_gpu,
                policy=elastic.batch,
                base_world=nodes * ranks,
                world=size * ranks,
                max_lr_factor=elastic.max_lr_factor,
            )
        except ValueError as exc:
            raise ValueError(
                f"global_batch: at {size} node(s) x {ranks} rank(s): {exc}, or "
                "drop that size from nodes"
            ) from None


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> JobSpec:
    """Read and validate a job spec YAML file.

    Args:
        path: The spec file.
        overrides: ``KEY=VALUE`` changes on top of the file (``submit --set``):
            ``resources.nodes=2``, ``tier=high``; the value is read as YAML (``2`` is a
            number, ``[a, b]`` a list) and the result is validated exactly as the file is.

    Returns:
        The validated, frozen :class:`JobSpec`.

    Raises:
        SpecError: The file is missing or not YAML, or a field is wrong. The message names
            the file, each field path (``resources.gpus_per_node``) and what is wrong;
            unknown keys list the valid keys at their level.
    """
    return validate_spec(read_spec_file(path), str(path), overrides)


def validate_spec(data: Mapping[str, Any], source: str, overrides: Sequence[str] = ()) -> JobSpec:
    """``data`` with ``overrides`` applied, validated; errors name ``source`` (and the
    overrides, as ``(with --set ...)``) and each field.

    Raises:
        SpecError: A field is wrong, or an override cannot be applied.
    """
    from hpclaunch._validation import load_model  # noqa: PLC0415 (yaml)

    data = dict(data)
    if overrides:
        data = apply_overrides(data, overrides)
        source += f" (with --set {' '.join(overrides)})"
    return load_model(JobSpec, data, source=source, error_cls=SpecError)


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """A job spec file's mapping, not yet validated (:func:`load_spec` validates it).

    Raises:
        SpecError: The file is missing or not YAML, or it is a multi-job file.
    """
    from hpclaunch._validation import read_yaml_mapping  # noqa: PLC0415 (yaml)

    path = Path(path)
    data = read_yaml_mapping(path, SpecError, "job spec")
    if "jobs" in data:
        raise SpecError(
            f"{path} is a multi-job file (jobs:), not a single job spec",
            hint="hpclaunch submit runs it (every job, in dependency order)",
        )
    if "after" in data:
        raise SpecError(
            f"{path}: after: names other jobs of a multi-job file; a single job spec has none",
            hint="put this job and the ones it waits for in one file under jobs: [...] (see "
            "examples/pipeline.yaml), or wait for a submitted job by its id with "
            "dependencies: [{job: '1234', type: afterok}]",
        )
    return data


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``a.b.c=VALUE`` of ``overrides`` set (a deep copy).

    Raises:
        SpecError: An override is not ``KEY=VALUE``, its value is not YAML, or a key on its
            path holds a value that is not a mapping.
    """
    import yaml  # noqa: PLC0415 (yaml)

    from hpclaunch._validation import load_yaml  # noqa: PLC0415 (yaml)

    out = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(p.strip() for p in parts):
            raise SpecError(
                f"--set {item!r}: expected KEY=VALUE",
                hint="e.g. --set resources.nodes=2 --set tier=high",
            )
        try:
            value = load_yaml(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise SpecError(
                f"--set {item!r}: the value is not YAML ({exc})", hint="quote it: KEY='VALUE'"
            ) from exc
        node = out
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise SpecError(f"--set {item!r}: {where} is not a mapping in the spec")
            node = child
        node[parts[-1]] = value
    return out
