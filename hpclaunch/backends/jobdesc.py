"""A rendered job's sbatch options as the attributes of pyslurm's ``JobSubmitDescription``.

The batch script stays the one description of a job (``hpclaunch render`` shows it): its
``#SBATCH`` options (the plan's ``sbatch_options``) and the options on the sbatch command line
(a sweep's ``--array``, ``--comment`` and ``--dependency``; the command line wins, as in
sbatch) are mapped here one by one. pyslurm's own ``#SBATCH`` reader is not used: it cuts
values at ``#`` and ``=``, ignores quoting and silently drops options it does not know
(pyslurm 25.11.2, ``core/job/sbatch_opts.pyx``). An option with no attribute here is refused,
never dropped: the job would run without it.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpclaunch.errors import PlanError
from hpclaunch.slurm.sbatch_options import normalise_flag
from hpclaunch.slurm.times import parse_time

__all__ = [
    "JobDescription",
    "describe_job",
    "merged_options",
    "sbatch_environment",
    "script_options",
]

#: Options whose value becomes an attribute as it is (a string).
_TEXT = {
    "--job-name": "name",
    "--comment": "comment",
    "--partition": "partitions",
    "--qos": "qos",
    "--account": "account",
    "--nodes": "nodes",
    "--mem": "memory_per_node",
    "--mem-per-cpu": "memory_per_cpu",
    "--mem-per-gpu": "memory_per_gpu",
    "--constraint": "constraints",
    "--chdir": "working_directory",
    "--output": "standard_output",
    "--error": "standard_error",
    "--input": "standard_in",
    "--open-mode": "log_files_open_mode",
    "--dependency": "dependencies",
    "--array": "array",
    "--gres": "gres_per_node",
    "--gpus": "gpus",
    "--begin": "begin_time",
    "--deadline": "deadline",
    "--reservation": "reservations",
    "--exclude": "excluded_nodes",
    "--nodelist": "required_nodes",
    "--licenses": "licenses",
    "--mail-user": "mail_user",
    "--mail-type": "mail_types",
    "--tmp": "temporary_disk_per_node",
    "--wckey": "wckey",
    "--network": "network",
}
#: Options whose value is a whole number.
_NUMBER = {
    "--nice": "nice",
    "--ntasks": "ntasks",
    "--ntasks-per-node": "ntasks_per_node",
    "--cpus-per-task": "cpus_per_task",
    "--cpus-per-gpu": "cpus_per_gpu",
    "--priority": "priority",
}
#: Options without a value, and the attribute value they stand for.
_FLAG: Mapping[str, tuple[str, object]] = {
    "--exclusive": ("resource_sharing", "no"),
    "--oversubscribe": ("resource_sharing", "yes"),
    "--requeue": ("is_requeueable", True),
    "--no-requeue": ("is_requeueable", False),
    "--hold": ("priority", 0),
    "--no-kill": ("kill_on_node_fail", False),
    "--overcommit": ("overcommit", True),
    "--contiguous": ("requires_contiguous_nodes", True),
    "--spread-job": ("spreads_over_nodes", True),
    "--use-min-nodes": ("use_min_nodes", True),
}
#: Options of the sbatch command itself, not of the job.
_IGNORED = frozenset({"--parsable"})


@dataclass(frozen=True)
class JobDescription:
    """What to give ``pyslurm.JobSubmitDescription``.

    Attributes:
        attributes: Its keyword arguments (``name=...``, ``partitions=...``).
        script_args: The batch script's arguments (after its path).
        environment: What sbatch itself would add to the job's environment for these
            options (:func:`sbatch_environment`), over the caller's.
    """

    attributes: dict[str, object]
    script_args: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)


def script_options(script: str) -> list[tuple[str, str | None]]:
    """The ``#SBATCH`` options of a batch script hpclaunch rendered (``--flag`` or
    ``--flag=value``, the value double-quoted with ``\\`` escapes when it is not plain:
    :func:`hpclaunch.planning.render.sbatch_quote`), up to its first command, where
    sbatch stops reading them too (sbatch(1))."""
    options: list[tuple[str, str | None]] = []
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if not line.startswith("#SBATCH "):
            continue
        flag, sep, value = line[len("#SBATCH ") :].strip().partition("=")
        if sep and len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options.append((flag, value if sep else None))
    return options


def merged_options(
    script_options: Sequence[tuple[str, str | None]], argv: Sequence[str], script_path: str
) -> tuple[list[tuple[str, str | None]], tuple[str, ...]]:
    """The options sbatch would apply, in order, and the script's arguments.

    ``script_options`` are the script's ``#SBATCH`` options; ``argv`` is the sbatch command
    (``sbatch --parsable [--opt=value ...] SCRIPT [ARG ...]``), whose options replace the
    script's of the same name.
    """
    if not argv or argv[0] != "sbatch" or script_path not in argv:
        raise ValueError(f"not an sbatch command of {script_path}: {list(argv)!r}")
    at = list(argv).index(script_path)
    merged: dict[str, tuple[str, str | None]] = {}
    for flag, value in script_options:
        merged[_long(flag)[0]] = (flag, value)
    for item in argv[1:at]:
        flag, sep, value = item.partition("=")
        merged[_long(flag)[0]] = (flag, value if sep else None)
    return list(merged.values()), tuple(argv[at + 1 :])


def describe_job(
    options: Sequence[tuple[str, str | None]], script_args: Sequence[str] = ()
) -> JobDescription:
    """Map sbatch options to ``JobSubmitDescription`` attributes.

    Raises:
        PlanError: An option this backend cannot pass (the hint names the cli backend).
    """
    attrs: dict[str, object] = {}
    for flag, written in options:
        name, inline = _long(flag)
        value = written if inline is None else inline
        if name in _IGNORED:
            continue
        if name in _FLAG and value is None:
            attr, flag_value = _FLAG[name]
            attrs[attr] = flag_value
        elif value is None:
            raise _refused(flag, "it needs a value here")
        elif name in _TEXT:
            attrs[_TEXT[name]] = value
        elif name in _NUMBER:
            attrs[_NUMBER[name]] = _number(flag, value)
        elif name == "--time":
            attrs["time_limit"] = _minutes(flag, value)
        elif name == "--signal":
            attrs["signal"] = _signal(flag, value)
        elif name == "--kill-on-invalid-dep":
            # yes|no (sbatch(1)); pipelines set it so a job whose dependency failed ends.
            if value not in ("yes", "no"):
                raise _refused(flag, f"{value!r} is not yes or no")
            attrs["kill_on_invalid_dependency"] = value == "yes"
        elif name == "--gpus-per-node":
            # --gpus-per-node=[type:]N is a per-node GPU request like --gres=gpu:[type:]N:
            # both become the job's tres_per_node (sbatch(1), 22.05+); pyslurm 25.11 has
            # only gres_per_node for it.
            attrs["gres_per_node"] = f"gpu:{value}"
        else:
            raise _refused(flag, "pyslurm's JobSubmitDescription has no attribute for it")
    environment = sbatch_environment(attrs)  # of the options given, as sbatch's
    # sbatch: with --ntasks-per-node and no --ntasks, a job has nodes x that many tasks
    # (src/sbatch/opt.c); pyslurm would default ntasks to 1 (core/job/submission.pyx).
    if "ntasks" not in attrs and "ntasks_per_node" in attrs:
        nodes = str(attrs.get("nodes", "1"))
        if nodes.isdigit():
            attrs["ntasks"] = int(nodes) * int(str(attrs["ntasks_per_node"]))
    return JobDescription(attrs, tuple(script_args), environment)


def sbatch_environment(attrs: Mapping[str, object]) -> dict[str, str]:
    """The variables sbatch puts in the job's environment from its options, which a job
    given to pyslurm lacks: slurmd overwrites ``SLURM_CPUS_PER_TASK`` only where sbatch set
    it (src/sbatch/opt.c ``set_envs``, src/common/env.c ``setup_env``, 24.11 and 25.11).
    ``SLURM_TRES_PER_TASK`` comes from the job's ``TresPerTask``, which sbatch fills from
    ``--cpus-per-task`` and pyslurm 25.11.2 cannot (its ``tres_per_task`` takes GPUs only).
    Without them, seen on the test cluster: code that sizes its data loaders by
    ``SLURM_CPUS_PER_TASK`` fails, and an ``srun`` in the job gives each task one CPU."""
    env: dict[str, str] = {}
    if "cpus_per_task" in attrs:
        env["SLURM_CPUS_PER_TASK"] = str(attrs["cpus_per_task"])
        env["SLURM_TRES_PER_TASK"] = f"cpu={attrs['cpus_per_task']}"
    if "ntasks" in attrs:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(attrs["ntasks"])
    if "ntasks_per_node" in attrs:
        env["SLURM_NTASKS_PER_NODE"] = str(attrs["ntasks_per_node"])
    if "dependencies" in attrs:
        env["SLURM_JOB_DEPENDENCY"] = str(attrs["dependencies"])
    return env


def _long(flag: str) -> tuple[str, str | None]:
    """(long name, value written in the flag itself): ``-p`` is ``--partition``."""
    try:
        return normalise_flag(flag)
    except ValueError as exc:
        raise _refused(flag, str(exc)) from None


def _signal(flag: str, value: str) -> dict[str, object]:
    """``[{R|B}:]<sig_num>[@sig_time]`` (sbatch(1)) as pyslurm's dict. Given the string,
    pyslurm 25.11 looks the name up in Python's ``signal.Signals`` and refuses ``USR1``
    ("Invalid Signal", seen on the test cluster): it wants ``SIGUSR1`` or a number."""
    flags, _, rest = value.rpartition(":")
    name, _, seconds = rest.partition("@")
    try:
        number = int(name) if name.isdigit() else signal.Signals[_sig_name(name)].value
        lead = int(seconds) if seconds else 60  # sbatch's default lead time
    except (KeyError, ValueError):
        raise _refused(flag, f"{value!r} is not [B:|R:]SIGNAL[@SECONDS]") from None
    if set(flags.upper()) - {"B", "R"}:
        raise _refused(flag, f"{value!r}: the flags before ':' may be B and R only")
    return {
        "signal": number,
        "time": lead,
        "batch_only": "B" in flags.upper(),
        "allow_reservation_overlap": "R" in flags.upper(),
    }


def _sig_name(name: str) -> str:
    upper = name.upper()
    return upper if upper.startswith("SIG") else f"SIG{upper}"


def _number(flag: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _refused(flag, f"{value!r} is not a whole number") from None


def _minutes(flag: str, value: str) -> int:
    """Slurm keeps time limits in whole minutes and rounds seconds up (``--time=0:30`` is one
    minute); pyslurm 25.11 wants an int (a string of digits raised TypeError in submit)."""
    try:
        return math.ceil(parse_time(value) / 60)
    except (ValueError, PlanError):
        raise _refused(flag, f"{value!r} is not a Slurm time") from None


def _refused(flag: str, why: str) -> PlanError:
    return PlanError(
        f"the pyslurm backend cannot submit with sbatch option {flag}: {why}",
        hint="submit this job with the cli backend (--backend cli), or drop the option "
        "from the spec's sbatch_extra",
    )
