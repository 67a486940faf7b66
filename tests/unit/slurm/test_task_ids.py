"""The one reader of an array's task ids (squeue, sacct, pyslurm)."""

from __future__ import annotations

import pytest

from hpclaunch.slurm.task_ids import task_ids


def test_ranges_steps_and_slurmdbds_hex_bitmap() -> None:
    assert task_ids("2-5") == [2, 3, 4, 5]
    assert task_ids("0-3,7") == [0, 1, 2, 3, 7]
    assert task_ids("0-8:4") == [0, 4, 8]
    assert task_ids("0xF") == [0, 1, 2, 3]  # slurmdbd's waiting tasks, seen through pyslurm
    with pytest.raises(ValueError, match="invalid literal"):
        task_ids("x")
