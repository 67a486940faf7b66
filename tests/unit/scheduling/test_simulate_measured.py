"""The measured-work model (the Pollux artifact's data) and the round-based simulator."""

from __future__ import annotations

import csv

import pytest

from hpclaunch.scheduling.simulate.measured.apps import app, data_dir, rigid_config
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig, simulate_rounds
from hpclaunch.scheduling.simulate.measured.jobs import (
    Elastic,
    WorkJob,
)
from hpclaunch.scheduling.simulate.measured.policies import POLICIES


def _csv(path: str) -> list[dict[str, str]]:
    with (data_dir() / "traces" / path).open() as fh:
        return list(csv.DictReader(fh))


def test_a_measured_placement_gives_its_measured_step_time_in_any_rotation() -> None:
    cifar = app("cifar10")
    row = next(r for r in _csv("cifar10/placements.csv") if r["placement"] == "12")
    measured = (float(row["step_time"]), float(row["sync_time"]))
    bsz = float(row["local_bsz"])
    assert cifar.step_time((1, 2), bsz) == pytest.approx(measured)
    assert cifar.step_time((2, 1), bsz) == pytest.approx(measured)  # rotations are one shape


def test_step_time_is_linear_between_measured_batches() -> None:
    cifar = app("cifar10")
    rows = [r for r in _csv("cifar10/placements.csv") if r["placement"] == "4"][:2]
    (b0, t0), (b1, t1) = ((float(r["local_bsz"]), float(r["step_time"])) for r in rows)
    assert cifar.step_time((4,), (b0 + b1) / 2)[0] == pytest.approx((t0 + t1) / 2)


def test_a_shape_beyond_four_nodes_comes_from_the_scalability_runs() -> None:
    imagenet = app("imagenet")
    row = _csv("imagenet/scalability.csv")[0]
    nodes, gpus = int(row["num_nodes"]), int(row["num_replicas"])
    placement = [gpus // nodes] * nodes
    got = imagenet.step_time(placement, float(row["local_bsz"]))
    assert got == pytest.approx((float(row["step_time"]), float(row["sync_time"])))


def test_statistical_efficiency_is_one_at_the_smallest_batch_and_below_linear_above() -> None:
    cifar = app("cifar10")
    assert cifar.gain(cifar.init_batch, 0) == pytest.approx(1.0)
    big = cifar.gain(8 * cifar.init_batch, 10)
    assert 1.0 < big < 8.0


def test_epochs_end_in_order_and_the_last_one_is_the_work() -> None:
    bert = app("bert")
    assert bert.max_epochs == 2
    assert 0 < bert.epoch_end(0) < bert.epoch_end(1) == bert.total_progress
    assert bert.epoch_at(0.0) == 0
    assert bert.epoch_at(bert.epoch_end(0)) == 1


def test_rigid_configs_split_the_batch_within_the_per_gpu_limit() -> None:
    yolo = app("yolov3")  # at most 8 samples per GPU
    config = rigid_config(yolo, 4, 64)
    assert (config.atomic, config.accum, config.batch) == (8, 1, 64)
    cifar = app("cifar10")
    assert rigid_config(cifar, 1, 2 * cifar.init_batch).accum >= 1  # the artifact's rule
    assert rigid_config(cifar, 8, 2048).batch == 2048


def job(
    name: str, application: str, submit: float, gpus: int, batch: int, *, oracle: bool = False
) -> WorkJob:
    return WorkJob(name, app(application), submit, gpus, batch, oracle=oracle)


def test_a_lone_job_starts_at_the_next_round_and_runs_its_predicted_time() -> None:
    alone = job("a", "cifar10", 0.0, 8, 2048, oracle=True)
    predicted = alone.remaining_seconds()  # the true one: restart included, compact placement
    (done,) = simulate_rounds([alone], POLICIES["tiresias"]())
    assert done.finish == pytest.approx(60.0 + predicted)
    assert done.restarts == 0
    assert done.gpu_seconds == pytest.approx(8 * predicted)


def test_tiresias_puts_a_new_job_before_one_past_its_threshold_which_resumes_later() -> None:
    one_node = RoundsConfig(nodes=1, gpus_per_node=4)
    old = job("old", "imagenet", 0.0, 4, 800)  # days of work: past 16 GPU-h after 4 h
    new = job("new", "cifar10", 5 * 3600.0, 4, 512)
    alone = job("alone", "cifar10", 0.0, 4, 512, oracle=True).remaining_seconds()
    simulate_rounds([old, new], POLICIES["tiresias"](), one_node)
    assert new.jct() <= 60 + alone  # it did not wait for the old job
    assert old.restarts == 1  # preempted once, resumed from its progress
    assert old.done


def test_fifo_lets_nothing_pass_and_backfill_starts_what_delays_no_one() -> None:
    def three() -> list[WorkJob]:
        return [
            job("long", "imagenet", 0.0, 2, 400),
            job("wide", "cifar10", 30.0, 4, 1024),  # cannot start beside "long"
            job("short", "ncf", 40.0, 2, 32768),  # fits beside "long", ends long before it
        ]

    one_node = RoundsConfig(nodes=1, gpus_per_node=4)
    strict = {j.name: j for j in simulate_rounds(three(), POLICIES["fifo"](), one_node)}
    filled = {j.name: j for j in simulate_rounds(three(), POLICIES["fifo-backfill"](), one_node)}
    assert strict["short"].finish > strict["long"].finish  # behind "wide"
    assert filled["short"].finish < filled["long"].finish  # backfilled
    assert filled["wide"].finish == pytest.approx(strict["wide"].finish)  # not delayed


def test_a_fixed_batch_stays_the_jobs_at_every_size_it_divides() -> None:
    elastic = job("e", "cifar10", 0.0, 8, 2048)
    elastic.elastic = Elastic(batch="fixed")
    for gpus in (1, 2, 4, 8, 16):
        assert elastic.config_on(tuple([min(4, gpus)] * max(1, gpus // 4)), 0).batch == 2048


def test_an_elastic_job_alone_grows_into_idle_gpus_and_beats_its_rigid_size() -> None:
    one_node = RoundsConfig(nodes=1, gpus_per_node=4)
    rigid = job("r", "cifar10", 0.0, 1, 128)
    elastic = job("e", "cifar10", 0.0, 1, 128)
    elastic.elastic = Elastic(batch="adaptive", max_gpus=4)
    simulate_rounds([rigid], POLICIES["tiresias"](), one_node)
    simulate_rounds([elastic], POLICIES["elastic"](), one_node)
    assert elastic.gpu_seconds / (elastic.finish - 90.0) > 1.5  # it held more than one GPU
    assert elastic.jct() < 0.8 * rigid.jct()


def test_an_elastic_job_is_shrunk_for_a_newcomer_not_evicted() -> None:
    one_node = RoundsConfig(nodes=1, gpus_per_node=4)

    def two(elastic: Elastic | None) -> list[WorkJob]:
        old = job("old", "deepspeech2", 0.0, 4, 160)  # ~84 min alone
        new = job("new", "cifar10", 1800.0, 4, 512)  # ~20 min alone
        old.elastic = new.elastic = elastic
        return [old, new]

    rigid = {j.name: j for j in simulate_rounds(two(None), POLICIES["tiresias"](), one_node)}
    shared = {
        j.name: j
        for j in simulate_rounds(
            two(Elastic(batch="fixed", max_gpus=4)), POLICIES["elastic"](), one_node
        )
    }
    assert rigid["old"].evicted_seconds == 0  # rigid: the newcomer waited
    assert rigid["new"].first_wait() >= 60
    assert shared["old"].evicted_seconds == 0  # elastic: never without GPUs...
    assert shared["old"].restarts >= 1  # ...but resized
    assert shared["new"].first_wait() < 120  # and the newcomer started at once
    assert shared["new"].jct() < rigid["new"].jct()
