"""The update that changes a job's node count, from recorded ``scontrol show job`` text."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.slurm.live_job import parse_show_job
from hpclaunch.slurm.nodecount import node_count_fields

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(
    "recorded",
    [
        "cluster-22.05/scontrol_show_job_4_nodes_2_cpus_per_task.txt",  # running: NumNodes=4
        "cluster-22.05/scontrol_show_job_pending_4_nodes.txt",  # held: NumNodes=4-4
        "cluster-25.11/scontrol_show_job_4_nodes_2_cpus_per_task.txt",
        "cluster-25.11/scontrol_show_job_pending_4_nodes.txt",
    ],
)
def test_tasks_and_cpus_scale_with_the_nodes(recorded: str) -> None:
    text = (DATA / recorded).read_text()
    assert node_count_fields(parse_show_job(text), 2) == {
        "NumNodes": "2-2",
        "NumTasks": "2",
        "NumCPUs": "4",
    }
    assert node_count_fields(parse_show_job(text), 8) == {
        "NumNodes": "8-8",
        "NumTasks": "8",
        "NumCPUs": "16",
    }


def test_without_the_counts_only_the_nodes_are_set() -> None:
    assert node_count_fields(parse_show_job(""), 3) == {"NumNodes": "3-3"}
    # CPUs that do not split evenly over the nodes are left to Slurm.
    assert node_count_fields(parse_show_job("NumNodes=2 NumCPUs=5 NumTasks=2"), 4) == {
        "NumNodes": "4-4",
        "NumTasks": "4",
    }
