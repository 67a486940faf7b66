"""An array's task ids as Slurm writes them: ``0-3,7``, steps ``0-8:2``, and slurmdbd's hex
bitmap ``0xF`` (tasks 0-3; sacct turns it into ranges, pyslurm 25.11 does not).

One reader for squeue's folded pending tasks (``123_[2-5%2]``), sacct's, and pyslurm's
``array_tasks_waiting``.
"""

from __future__ import annotations

__all__ = ["task_ids"]


def task_ids(text: str) -> list[int]:
    """The task ids of ``text`` (without squeue's ``%limit``), in the order written.

    Raises:
        ValueError: ``text`` is not such a list.
    """
    if text.lower().startswith("0x"):
        bits = int(text, 16)
        return [task for task in range(bits.bit_length()) if bits >> task & 1]
    ids: list[int] = []
    for part in text.split(","):
        span, _, step = part.partition(":")
        low, _, high = span.partition("-")
        ids.extend(range(int(low), int(high or low) + 1, int(step or 1)))
    return ids
