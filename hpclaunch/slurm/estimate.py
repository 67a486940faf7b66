"""When Slurm expects a job to start: ``sbatch --test-only`` (the job as it would be
submitted, never queued) and what it answers.

sbatch prints the answer on stderr through ``info()`` (src/api/allocate.c,
``slurm_job_will_run``); the wording moved between releases, and the recordings of each
(tests/unit/data/slurm-*/commands.json) hold what they really print:

* ``sbatch: Job 12 to start at 2026-11-28T12:40:00 using 2 processors on nodes n[1-2] in
  partition gpu`` (22.05, 24.11);
* ``... to start at 2026-11-28T12:40:00 on cluster hpclaunch a using 2 processors ...``
  (25.11.7's format string has a stray ``a``);
* a following ``  Preempts: 31,32`` line when the job would start by preempting those.

The time is the cluster's local time, no zone (``SLURM_TIME_FORMAT``'s default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["StartEstimate", "parse_test_only", "will_run_argv"]

_WILL_RUN = re.compile(
    r"Job \d+ to start at (?P<start>\S+)(?: on cluster \S+)?(?: a)? using (?P<cpus>\d+) "
    r"processors on (?:nodes )?(?P<nodes>\S+)(?: in partition (?P<partition>\S+))?"
)
_PREEMPTS = re.compile(r"Preempts:\s*(?P<ids>[\d_,\s]+)")


@dataclass(frozen=True)
class StartEstimate:
    """Slurm's answer to ``sbatch --test-only``.

    Attributes:
        start: When it would start, as Slurm prints times (the cluster's local time).
        cpus: The CPUs it would get.
        nodes: Where (a hostlist).
        partition: In which partition (``None``: not said).
        preempts: The jobs it would preempt to start then.
    """

    start: str
    cpus: int
    nodes: str
    partition: str | None
    preempts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "start": self.start,
            "cpus": self.cpus,
            "nodes": self.nodes,
            "partition": self.partition,
            "preempts": list(self.preempts),
        }


def will_run_argv() -> list[str]:
    """``sbatch --test-only``, the script on standard input (its ``#SBATCH`` lines carry the
    whole request, as when it is submitted)."""
    return ["sbatch", "--test-only"]


def parse_test_only(text: str) -> StartEstimate | None:
    """The estimate in what ``sbatch --test-only`` printed (stderr), or ``None``."""
    found = _WILL_RUN.search(text)
    if found is None:
        return None
    preempts = _PREEMPTS.search(text)
    ids = tuple(i for i in re.split(r"[,\s]+", preempts["ids"]) if i) if preempts else ()
    return StartEstimate(
        start=found["start"],
        cpus=int(found["cpus"]),
        nodes=found["nodes"],
        partition=found["partition"],
        preempts=ids,
    )
