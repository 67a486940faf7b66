"""The measured simulator's ``fifo-elastic`` (ours + shrink before wait + grow into idle)
and ``ones`` (evolutionary) policies, on hand-made one-node cases."""

from __future__ import annotations

import pytest

from hpclaunch.scheduling.simulate.measured.allocate import Speeds
from hpclaunch.scheduling.simulate.measured.apps import app
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig, simulate_rounds
from hpclaunch.scheduling.simulate.measured.jobs import Elastic, WorkJob
from hpclaunch.scheduling.simulate.measured.ones import Ones, _Fitness
from hpclaunch.scheduling.simulate.measured.policies import POLICIES

ONE_NODE = RoundsConfig(nodes=1, gpus_per_node=4)


def job(
    name: str, application: str, submit: float, gpus: int, global_batch: int, **elastic: object
) -> WorkJob:
    made = WorkJob(name, app(application), submit, gpus, global_batch)
    if elastic:
        made.elastic = Elastic(**elastic)  # type: ignore[arg-type]
    return made


def test_fifo_elastic_shrinks_a_running_job_for_the_first_in_line_not_keeping_it_waiting() -> None:
    def two(elastic: bool) -> dict[str, WorkJob]:
        extra = {"batch": "fixed", "max_gpus": 4, "min_interval": 0.0} if elastic else {}
        old = job("old", "deepspeech2", 0.0, 4, 160, **extra)  # ~84 min alone
        new = job("new", "cifar10", 1800.0, 2, 512)  # rigid, 2 GPUs
        return {
            j.name: j
            for j in simulate_rounds(
                [old, new], POLICIES["fifo-elastic" if elastic else "fifo-backfill"](), ONE_NODE
            )
        }

    rigid, shrunk = two(False), two(True)
    assert rigid["new"].first_wait() > 1800  # waited for the old job's end
    assert shrunk["new"].first_wait() <= 60  # started the next round
    assert shrunk["old"].evicted_seconds == 0  # never without GPUs...
    assert shrunk["old"].restarts >= 1  # ...but restarted smaller, then grown back
    assert shrunk["new"].jct() < rigid["new"].jct()


def test_fifo_elastic_shrinks_nobody_when_that_cannot_make_room() -> None:
    old = job("old", "deepspeech2", 0.0, 3, 120, batch="fixed", min_gpus=2, max_gpus=3)
    new = job("new", "cifar10", 600.0, 4, 512)  # needs the whole node: old can give only 1
    done = {j.name: j for j in simulate_rounds([old, new], POLICIES["fifo-elastic"](), ONE_NODE)}
    assert done["old"].restarts == 0  # kept its 3 GPUs to the end
    assert done["new"].started >= done["old"].finish


def test_fifo_elastic_grows_a_lone_job_into_idle_gpus_only_when_it_saves_time() -> None:
    grows = job("g", "cifar10", 0.0, 1, 128, batch="adaptive", max_gpus=4, min_interval=0.0)
    (done,) = simulate_rounds([grows], POLICIES["fifo-elastic"](), ONE_NODE)
    rigid = job("r", "cifar10", 0.0, 1, 128)
    simulate_rounds([rigid], POLICIES["fifo-backfill"](), ONE_NODE)
    assert done.gpu_seconds / (done.finish - 90.0) > 1.5  # it held more than one GPU
    assert done.jct() < 0.8 * rigid.jct()


def test_ones_never_holds_more_gpus_than_the_cluster_and_repeats_exactly() -> None:
    def mix() -> list[WorkJob]:
        return [
            job("a", "cifar10", 0.0, 2, 256, batch="adaptive", max_gpus=4, min_interval=120.0),
            job("b", "ncf", 60.0, 1, 32768, batch="adaptive", max_gpus=4, min_interval=120.0),
            job("c", "cifar10", 120.0, 4, 512),  # rigid
            job("d", "bert", 180.0, 1, 12, batch="adaptive", max_gpus=4, min_interval=120.0),
        ]

    first = simulate_rounds(mix(), Ones(), ONE_NODE)  # placing more than 4 GPUs raises
    again = simulate_rounds(mix(), Ones(), ONE_NODE)
    assert all(j.done for j in first)
    assert [(j.finish, j.restarts) for j in first] == [(j.finish, j.restarts) for j in again]
    other_seed = simulate_rounds(mix(), Ones(seed=1), ONE_NODE)
    assert all(j.done for j in other_seed)


def test_ones_fitness_charges_an_idle_gpu_and_a_restart() -> None:
    a = job("a", "cifar10", 0.0, 2, 256, batch="adaptive", max_gpus=4)
    b = job("b", "cifar10", 0.0, 2, 256, batch="adaptive", max_gpus=4)
    fit = _Fitness([a, b], Speeds(), capacity=4, restart=30.0, interval=60.0)
    both = fit((2, 2))
    assert fit((2, 0)) > both  # b waits for a's GPU-seconds to drain
    assert fit((0, 0)) > fit((2, 0))
    assert _Fitness([a], Speeds(), 4, 30.0, 60.0)((0,)) > _Fitness([a], Speeds(), 4, 30.0, 60.0)(
        (2,)
    )
    a.nodes = (0, 0)  # a holds 2 GPUs: keeping them costs no restart
    fit = _Fitness([a, b], Speeds(), capacity=4, restart=30.0, interval=60.0)
    assert fit((2, 2)) == pytest.approx(both - 30.0)


def test_ones_keeps_a_job_at_its_size_within_its_min_interval() -> None:
    lone = job("a", "cifar10", 0.0, 1, 128, batch="adaptive", max_gpus=4, min_interval=10 * 3600.0)
    (done,) = simulate_rounds([lone], Ones(), ONE_NODE)
    assert done.restarts == 0  # its first size held to the end
