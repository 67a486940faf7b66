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

Values are checked here for form only; whether the site can run the job is
:func:`hpclaunch.plan.build_plan`'s business.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from hpclaunch.errors import SpecError
from hpclaunch.slurmtime import format_time, parse_time

__all__ = [
    "CheckpointPolicy",
    "JobSpec",
    "Launcher",
    "Resources",
    "Tier",
    "load_spec",
]

Tier = Literal["critical", "high", "medium", "low"]
Launcher = Literal["none", "srun", "torchrun", "deepspeed", "accelerate"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MEM = re.compile(r"^(\d+)\s*([KMGT]?)B?$", re.IGNORECASE)
_MEM_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
# Env names that belong to Slurm or hpclaunch inside the job; overriding them breaks srun
# or the sidecar, so a spec may not set them.
_RESERVED_ENV_PREFIXES = ("SLURM_", "SBATCH_", "HPCLAUNCH_")
# Older sbatch versions (20.x src/sbatch/opt.c, _opt_batch_script) take any "#SBATCH" line
# containing "packjob" (later also "hetjob"), in any case, as a heterogeneous-job separator.
# 22.05 does not (checked on the test cluster), but sites run older versions.
_HETJOB_WORDS = ("hetjob", "packjob")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _argv_word(value: Any) -> Any:
    """Accept YAML ints in argv/env (``--epochs, 10``); refuse floats and booleans."""
    if isinstance(value, bool):
        raise ValueError(f"YAML read {value!r} as a boolean; quote it (e.g. 'yes', 'true', 'on')")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise ValueError(f"YAML read {value!r} as a number; quote it to keep it exactly as written")
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character, which no program can receive")
    return value


ArgvWord = Annotated[str, BeforeValidator(_argv_word)]


class Resources(_Model):
    """What the job asks Slurm for, per node.

    Attributes:
        nodes: Number of nodes (``--nodes``).
        gpus_per_node: GPUs on each node; 0 for a CPU-only job.
        gpu_type: A GPU type known to the site (e.g. ``a100``); needs ``gpus_per_node`` > 0.
        cpus_per_task: CPUs for each task (``--cpus-per-task``); one task per node for now.
        mem: Memory per node, e.g. ``8G`` or ``500M`` (``--mem``); normalised to ``<n><unit>``.
        time: Time limit in a Slurm format (``MM``, ``HH:MM:SS``, ``D-HH:MM:SS``, ...),
            normalised to ``HH:MM:SS`` / ``D-HH:MM:SS``. ``None``: the partition's default.
    """

    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    gpu_type: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    cpus_per_task: int = Field(1, ge=1)
    mem: str | None = None
    time: str | None = None

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
        return self

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
            Slurm may send it up to 60 s early).
        max_requeues: How many times the job may be requeued; 0 means never (``--no-requeue``).
    """

    dir: str | None = Field(None, min_length=1)
    signal: Literal["USR1", "USR2"] = "USR1"
    signal_lead_time: int = Field(120, ge=0, le=65535)
    max_requeues: int = Field(5, ge=0)


class JobSpec(_Model):
    """One job, as the researcher describes it.

    Attributes:
        name: Job name; any printable text (it is quoted wherever it is used).
        command: The program and its arguments as a list (an argv); never a shell line.
        workdir: Directory to start in; relative paths start from the submit directory.
        env: Extra environment variables for the job.
        launcher: How the command is started: ``none`` (directly) or ``srun`` (one task per
            node); ``torchrun``, ``deepspeed`` and ``accelerate`` come with the sidecar.
        resources: What to ask Slurm for.
        tier: Priority tier; the site maps it to a QOS and says whether it is preemptible.
        project: The project to charge (Slurm account); default: the site's default account.
        checkpoint: Signal and requeue policy.
        output_dir: Where per-attempt logs go; default: the job directory.
        venv: A Python virtual environment to activate before the command (its directory;
            relative paths start from the workdir). It must be visible on the compute nodes.
    """

    name: str = Field(min_length=1, max_length=200)
    command: tuple[ArgvWord, ...] = Field(min_length=1)
    workdir: str | None = Field(None, min_length=1)
    env: dict[str, ArgvWord] = Field(default_factory=dict)
    launcher: Launcher = "none"
    resources: Resources = Field(default_factory=Resources)
    tier: Tier = "medium"
    project: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    output_dir: str | None = Field(None, min_length=1)
    venv: str | None = Field(None, min_length=1)

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
    def _valid_argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0]:
            raise ValueError("the program (first element) must not be empty")
        if value[0].startswith("-"):
            raise ValueError(f"the first element must be the program, not an option: {value[0]!r}")
        for arg in value:
            _no_nul(arg)
        return value

    @field_validator("env")
    @classmethod
    def _valid_env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if not _ENV_NAME.match(key):
                raise ValueError(
                    f"{key!r} is not a valid environment variable name "
                    "(letters, digits and _, not starting with a digit)"
                )
            if key.upper().startswith(_RESERVED_ENV_PREFIXES):
                raise ValueError(
                    f"{key!r}: SLURM_*, SBATCH_* and HPCLAUNCH_* are set by "
                    "Slurm and hpclaunch inside the job"
                )
            _no_nul(val)
        return value


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a job spec YAML file.

    Args:
        path: The spec file.

    Returns:
        The validated, frozen :class:`JobSpec`.

    Raises:
        SpecError: The file is missing or not YAML, or a field is wrong. The message names
            the file, each field path (``resources.gpus_per_node``) and what is wrong;
            unknown keys list the valid keys at their level.
    """
    from hpclaunch._validation import load_model, read_yaml_mapping

    path = Path(path)
    data = read_yaml_mapping(path, SpecError, "job spec")
    return load_model(JobSpec, data, source=str(path), error_cls=SpecError)
