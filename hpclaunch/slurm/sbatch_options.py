"""The sbatch options hpclaunch sets itself, and checks for the spec's raw ``sbatch_extra``.

``sbatch_extra`` is an escape hatch (``{--nice: 10, --begin: now}``), but it must not
override what hpclaunch decides: a second ``--qos`` or ``--output`` would silently win or
break requeue and logs. sbatch parses options with ``getopt_long`` (Slurm 22.05
src/sbatch/opt.c), so one option has many spellings: the long name, its short letter
(``-p``), any unambiguous abbreviation (``--part``) and ``--flag=value``. Every spelling is
normalised here to one long name before it is compared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["OWNED", "SHORT", "normalise_flag", "owner_of"]

#: Long options hpclaunch sets or forbids, and the spec field to use instead.
OWNED: Mapping[str, str] = {
    "--job-name": "name",
    "--comment": "(hpclaunch tags the job with its submission id)",
    "--partition": "tier or resources (the site config picks the partition)",
    "--qos": "tier (the site config maps tiers to QOS)",
    "--account": "project",
    "--nodes": "resources.nodes",
    "--ntasks": "launcher (one task per node)",
    "--ntasks-per-node": "launcher (one task per node)",
    "--cpus-per-task": "resources.cpus_per_task",
    "--cpus-per-gpu": "resources.cpus_per_gpu",
    "--gres": "resources.gpus_per_node and resources.gpu_type",
    "--gpus": "resources.gpus_per_node",
    "--gpus-per-node": "resources.gpus_per_node and resources.gpu_type",
    "--gpus-per-task": "resources.gpus_per_node",
    "--gpus-per-socket": "resources.gpus_per_node",
    "--mem": "resources.mem",
    "--mem-per-cpu": "resources.mem",
    "--mem-per-gpu": "resources.mem",
    "--time": "resources.time",
    "--constraint": "resources.constraint",
    "--exclusive": "resources.exclusive",
    "--chdir": "workdir",
    "--output": "output_dir",
    "--error": "output_dir (each attempt's output goes to one log)",
    "--open-mode": "(hpclaunch appends, so requeued attempts keep earlier output)",
    "--requeue": "tier and checkpoint.max_requeues",
    "--no-requeue": "tier and checkpoint.max_requeues",
    "--signal": "checkpoint.signal and checkpoint.signal_lead_time",
    "--dependency": "dependencies",
    "--export": "env",
    "--array": "(arrays come with sweeps)",
    "--wrap": "command or script",
    "--parsable": "(hpclaunch passes it on the command line)",
}

#: sbatch's short options (sbatch(1), Slurm 22.05) → their long names.
SHORT: Mapping[str, str] = {
    "a": "--array",
    "A": "--account",
    "b": "--begin",
    "B": "--extra-node-info",
    "c": "--cpus-per-task",
    "C": "--constraint",
    "d": "--dependency",
    "D": "--chdir",
    "e": "--error",
    "F": "--nodefile",
    "G": "--gpus",
    "H": "--hold",
    "i": "--input",
    "I": "--immediate",
    "J": "--job-name",
    "k": "--no-kill",
    "K": "--kill-command",
    "L": "--licenses",
    "m": "--distribution",
    "M": "--clusters",
    "n": "--ntasks",
    "N": "--nodes",
    "o": "--output",
    "O": "--overcommit",
    "p": "--partition",
    "q": "--qos",
    "Q": "--quiet",
    "s": "--oversubscribe",
    "S": "--core-spec",
    "t": "--time",
    "v": "--verbose",
    "W": "--wait",
    "w": "--nodelist",
    "x": "--exclude",
}

_LONG = re.compile(r"^--([A-Za-z][A-Za-z0-9-]*)(?:=(.*))?$", re.DOTALL)
_SHORT = re.compile(r"^-([A-Za-z])(?:=?(.*))?$", re.DOTALL)
_BARE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def normalise_flag(key: str) -> tuple[str, str | None]:
    """Split a spelling of an sbatch option into (long name, value written in the key).

    ``-p`` → ``("--partition", None)``; ``-pgpu`` → ``("--partition", "gpu")``;
    ``--begin=now`` → ``("--begin", "now")``; ``nice`` → ``("--nice", None)``.
    Abbreviations are kept as written (see :func:`owner_of`).

    Raises:
        ValueError: ``key`` is not an option, or a short option sbatch does not have.
    """
    if match := _LONG.match(key):
        return "--" + match.group(1), match.group(2)
    if match := _SHORT.match(key):
        letter, value = match.groups()
        if letter not in SHORT:
            raise ValueError(f"{key!r}: sbatch has no short option -{letter}; use the long form")
        return SHORT[letter], value or None
    if _BARE.match(key):
        return "--" + key, None
    raise ValueError(f"{key!r} is not an sbatch option; write it like --nice or --begin")


def owner_of(long_flag: str, taken: Mapping[str, str] = OWNED) -> tuple[str, str] | None:
    """The option of ``taken`` that ``long_flag`` names, with the field to use instead.

    A flag that is a prefix of a taken option is refused too: sbatch reads it as that
    option (getopt_long accepts unambiguous abbreviations), or rejects it as ambiguous.
    """
    if long_flag in taken:
        return long_flag, taken[long_flag]
    if len(long_flag) > 2:
        for name, field in taken.items():
            if name.startswith(long_flag):
                return name, field
    return None
