"""The fidelity gate, held: our Tiresias reproduces the Pollux artifact's Tiresias + tuned
jobs on all 8 workloads at every load (+-10 % on the mean average JCT, +-20 % on each
workload), and the gate is tight enough to catch a changed parameter of our Tiresias.
About 1 s per load."""

from __future__ import annotations

import pytest

from hpclaunch.scheduling.simulate.measured.policies import TIRESIAS_THRESHOLD, Tiresias
from hpclaunch.scheduling.simulate.measured.published import (
    LOADS,
    average_jcts,
    gate,
    ratio,
)


@pytest.mark.parametrize("load", LOADS)
def test_our_tiresias_meets_the_gate_on_every_workload(load: float) -> None:
    result = gate(average_jcts("tiresias", load), load)
    assert result.met, result.line()
    assert len(result.per_workload) == 8


@pytest.mark.parametrize("threshold", [4 * TIRESIAS_THRESHOLD, TIRESIAS_THRESHOLD / 16])
def test_the_gate_fails_when_a_tiresias_parameter_is_changed(threshold: float) -> None:
    """The audit's case: the second queue's threshold 64 GPU-h instead of 16 (and 1)."""

    result = gate(average_jcts("tiresias", 1.0, policy=lambda: Tiresias(threshold)), 1.0)
    assert not result.met, result.line()


def test_a_ratio_is_paired_workload_by_workload() -> None:
    r = ratio([2.0, 300.0], [1.0, 600.0])
    assert r.mean == pytest.approx(1.25)  # (2 + 0.5) / 2, not 302 / 601
    assert r.values == (2.0, 0.5)
