"""The one reader of Slurm's resource strings and integers (hpclaunch/slurm/tres.py), on the
shapes each supported release prints (the recorded outputs exercise it through the parsers)."""

from __future__ import annotations

import pytest

from hpclaunch.slurm.tres import (
    gpus_per_node,
    gres_count,
    job_gpus,
    parse_size,
    to_int,
    tres_gpus,
    tres_text,
    tres_value,
)


def test_to_int_takes_signs_and_blanks_and_refuses_slurms_blanks() -> None:
    assert [to_int(t) for t in ("4", " 12 ", "-100", "N/A", "(null)", "")] == [
        4,
        12,
        -100,  # a nice may be negative
        None,
        None,
        None,
    ]


def test_tres_value() -> None:
    tres = "cpu=4,mem=8G,gres/gpu=2,gres/gpu:a100=2"
    assert tres_value(tres, "gres/gpu") == 2
    assert tres_value(tres, "cpu") == 4
    assert tres_value(tres, "mem") is None  # not a count
    assert tres_value(tres, "gres/nvme") is None
    assert tres_value("", "gres/gpu") is None


def test_tres_gpus_totals_and_types() -> None:
    assert tres_gpus("cpu=1,gres/gpu=4,gres/gpu:a100=3,gres/gpu:v100=1") == (
        4,
        {"a100": 3, "v100": 1},
    )
    assert tres_gpus("gres/gpu:a100=2,gres/gpu:v100=1") == (3, {"a100": 2, "v100": 1})
    assert tres_gpus("cpu=2,mem=1G") == (0, {})
    assert tres_gpus("gres/shard=2", "shard") == (2, {})


def test_gres_count() -> None:
    assert gres_count("gpu:4") == 4
    assert gres_count("gpu:a100:4(S:0-1)") == 4
    assert gres_count("gpu:a100:2,gpu:v100:2") == 4
    assert gres_count("(null)") == 0
    assert gres_count("gpudirect:1") == 0


def test_gpus_per_node_of_squeues_tres_per_node() -> None:
    assert gpus_per_node("gres:gpu:4") == 4  # 22.05
    assert gpus_per_node("gres/gpu:4") == 4  # 24.11+
    assert gpus_per_node("gres:gpu:a100:2,gres:nvme:1") == 2
    assert gpus_per_node("gres/gpu=3") == 3
    assert gpus_per_node("N/A") == 0
    assert gpus_per_node("gres:gpudirect:1") == 0


@pytest.mark.parametrize(
    ("tres", "per_job", "per_node", "per_task", "nodes", "tasks", "gpus"),
    [
        # As squeue printed them on 25.11 (tests/unit/data/slurm-25.11): the TRES count.
        ("cpu=2,mem=50M,node=1,billing=2,gres/gpu=2", "N/A", "N/A", "gres/gpu=1", 1, 2, 2),
        ("cpu=1,mem=50M,node=1,billing=1,gres/gpu=2", "gres/gpu:2", "N/A", "N/A", 1, 1, 2),
        ("cpu=2,node=2,gres/gpu=8,gres/gpu:a100=8", "N/A", "gres/gpu:a100:4", "N/A", 2, 2, 8),
        # A site that does not track gres/gpu: counted from the request, however it asked.
        ("cpu=2,mem=50M,node=1,billing=2", "N/A", "N/A", "gres/gpu=1", 1, 2, 2),
        ("cpu=1,mem=50M,node=1,billing=1", "gres/gpu:3", "N/A", "N/A", 1, 1, 3),
        ("cpu=2,mem=100M,node=2,billing=2", "N/A", "gres:gpu:2", "N/A", 2, 2, 4),
        ("N/A", "N/A", "N/A", "N/A", 1, 1, 0),
        ("cpu=1,mem=50M,node=1", "N/A", "gres/shard:1", "N/A", 1, 1, 0),
    ],
)
def test_job_gpus_however_the_job_asked(
    tres: str, per_job: str, per_node: str, per_task: str, nodes: int, tasks: int, gpus: int
) -> None:
    assert job_gpus(tres, per_job, per_node, per_task, nodes=nodes, tasks=tasks) == gpus


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2508K", 2508 * 1024),
        ("100M", 100 << 20),
        ("1.50G", round(1.5 * (1 << 30))),
        ("0", 0),
        ("", None),
        ("N/A", None),
    ],
)
def test_sizes_as_sacct_prints_them(text: str, size: int | None) -> None:
    assert parse_size(text) == size


def test_a_tres_entry_as_text() -> None:
    usage = "cpu=00:00:01,energy=0,fs/disk=2048,mem=2508K,pages=0,vmem=0"
    assert tres_text(usage, "mem") == "2508K"
    assert tres_text(usage, "gres/gpu") is None
