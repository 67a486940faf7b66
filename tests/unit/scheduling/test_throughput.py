"""The learned throughput model: what a job's measurements say about sizes it has not run."""

from __future__ import annotations

import pytest

from hpclaunch.scheduling.throughput import Params, Shape, Throughput, efficiency

TRUE = Params(alpha=0.02, beta=0.001, sync_local=0.05, sync_node=0.2)
SHAPES = [Shape(1, 1, 64), Shape(2, 1, 64), Shape(4, 1, 32), Shape(8, 2, 16), Shape(4, 1, 64, 1)]


def test_nothing_measured_predicts_nothing() -> None:
    assert Throughput().samples_per_second(Shape(1, 1, 64)) is None


def test_one_measurement_predicts_perfect_scaling_the_prior() -> None:
    model = Throughput()
    model.measure(Shape(1, 1, 64), TRUE.step_seconds(Shape(1, 1, 64)))
    one = model.samples_per_second(Shape(1, 1, 64))
    eight = model.samples_per_second(Shape(8, 2, 64))
    assert one == pytest.approx(TRUE.samples_per_second(Shape(1, 1, 64)), rel=1e-3)
    assert eight == pytest.approx(8 * one, rel=1e-3)  # no sync, no overhead: optimistic


def test_enough_shapes_recover_the_true_parameters_and_predict_an_unseen_size() -> None:
    model = Throughput()
    for shape in SHAPES:
        model.measure(shape, TRUE.step_seconds(shape))
    fitted = model.params()
    assert fitted is not None
    for name in ("alpha", "beta", "sync_local", "sync_node"):
        assert getattr(fitted, name) == pytest.approx(getattr(TRUE, name), rel=0.02)
    unseen = Shape(16, 4, 8)
    assert model.samples_per_second(unseen) == pytest.approx(
        TRUE.samples_per_second(unseen), rel=0.02
    )


def test_a_measurement_at_two_nodes_teaches_the_sync_across_nodes() -> None:
    model = Throughput()
    for shape in (Shape(1, 1, 64), Shape(2, 1, 64)):
        model.measure(shape, TRUE.step_seconds(shape))
    before = model.samples_per_second(Shape(8, 2, 64))
    model.measure(Shape(4, 2, 64), TRUE.step_seconds(Shape(4, 2, 64)))
    after = model.samples_per_second(Shape(8, 2, 64))
    true = TRUE.samples_per_second(Shape(8, 2, 64))
    assert before is not None
    assert after is not None
    assert before > 1.1 * true  # it did not know the nodes' sync
    assert after == pytest.approx(true, rel=0.1)


def test_noisy_shapes_never_explain_all_the_time_by_sync() -> None:
    """Two shapes whose noise makes more passes look faster (seen on yolov3 at 2 nodes):
    compute keeps its floor, so no step is predicted to take no time."""
    model = Throughput()
    model.measure(Shape(3, 2, 8, 2), 1.52)
    model.measure(Shape(4, 2, 8, 1), 1.566)
    fitted = model.params()
    assert fitted is not None
    assert fitted.beta > 0
    assert model.samples_per_second(Shape(1, 1, 8, 7)) is not None


def test_efficiency_is_one_at_the_base_batch_and_below_linear_above() -> None:
    assert efficiency(256, 256, 1.0, 4.0) == pytest.approx(1.0)
    assert 1.0 < efficiency(1024, 256, 1.0, 4.0) < 4.0
    assert efficiency(1024, 256, 0.0, 4.0) == pytest.approx(4.0)  # all noise: linear
