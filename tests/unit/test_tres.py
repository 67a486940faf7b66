"""The one reader of Slurm's resource strings and integers (hpclaunch/slurm/tres.py), on the
shapes each supported release prints (the recorded outputs exercise it through the parsers)."""

from __future__ import annotations

from hpclaunch.slurm.tres import gpus_per_node, gres_count, to_int, tres_gpus, tres_value


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
