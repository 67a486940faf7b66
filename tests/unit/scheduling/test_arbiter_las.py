"""The arbiter's least-attained-service pass (``--policy las``): the simulator's policy,
``las.plan``, on the live cluster's state, and the decisions it turns into."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hpclaunch.scheduling import las
from hpclaunch.scheduling.adaptive_batch import Adaptive, Measured
from hpclaunch.scheduling.arbiter import las_pass
from hpclaunch.scheduling.arbiter.decide import InFlight, Roles, Snapshot
from hpclaunch.scheduling.arbiter.las_pass import contender_of, decide_las
from hpclaunch.scheduling.arbiter.progress import JobProgress
from hpclaunch.scheduling.simulate import engine
from hpclaunch.scheduling.simulate.measured import policies
from hpclaunch.scheduling.throughput import Shape
from hpclaunch.slurm.cluster import ClusterJob, NodeGpus

ROLES = Roles(preempting=frozenset({"high"}), grace={"low": 60.0})
NOW = 100_000.0


def _node(name: str, used: int) -> NodeGpus:
    return NodeGpus(name, 4, used, frozenset({"gpu"}), True)


def _job(
    job_id: str,
    nodes: int,
    *,
    hosts: tuple[str, ...] = (),
    start: float | None = None,
    qos: str = "low",
) -> ClusterJob:
    running = bool(hosts)
    return ClusterJob(
        job_id=job_id,
        unique_id=job_id,
        user="u",
        account="a",
        qos=qos,
        state="RUNNING" if running else "PENDING",
        reason=None if running else "Resources",
        priority=1,
        nodes=nodes,
        gpus=4 * nodes,
        hosts=hosts,
        start=start,
        partition="gpu",
        command=None,
    )


def _elastic(nodes: tuple[int, ...], **kw: object) -> JobProgress:
    return JobProgress(
        supervised=True, directory="/d", elastic_nodes=nodes, elastic_interval=600.0, **kw
    )  # type: ignore[arg-type]


def test_simulator_and_arbiter_run_the_same_plan() -> None:
    assert policies.plan is las.plan
    assert las_pass.plan is las.plan
    assert engine.las is las  # the TE/BE engine's ours-las (test_simulate_las.py: it calls it)


def test_a_newcomer_shrinks_the_job_that_held_most_and_starts() -> None:
    """Old elastic job on all 4 nodes for an hour; a rigid 1-node job arrives."""
    old = _job("10", 4, hosts=("n1", "n2", "n3", "n4"), start=NOW - 3600)
    new = _job("11", 1)
    snapshot = Snapshot((old, new), tuple(_node(f"n{i}", 4) for i in range(1, 5)), NOW)
    progress = {"10": _elastic((1, 2, 3, 4)), "11": JobProgress()}
    out = decide_las(snapshot, ROLES, progress, [])
    (shrink,) = out.preemptions
    assert (shrink.victim, shrink.for_job, shrink.resize_to) == ("10", "11", 3)
    assert shrink.checkpoint_first
    assert not out.growths  # the room is the newcomer's


def test_idle_gpus_grow_the_job_whose_measured_speed_grows_most() -> None:
    """Two 1-node elastic jobs, two idle nodes: one scales (its ledger says), one not."""
    a = _job("20", 1, hosts=("n1",), start=NOW - 1000)
    b = _job("21", 1, hosts=("n2",), start=NOW - 1000)
    snapshot = Snapshot(
        (a, b), (_node("n1", 4), _node("n2", 4), _node("n3", 0), _node("n4", 0)), NOW
    )
    flat = _elastic((1, 2, 3), speeds={1: 100.0, 2: 101.0}, served=10.0)
    scales = _elastic((1, 2, 3), speeds={1: 100.0, 2: 195.0}, served=20.0)
    out = decide_las(snapshot, ROLES, {"20": flat, "21": scales}, [])
    assert [(g.job_id, g.to_nodes) for g in out.growths] == [("21", 3)]
    assert not out.preemptions


def test_nothing_while_a_decision_is_under_way_or_a_high_tier_job_waits() -> None:
    a = _job("30", 1, hosts=("n1",), start=NOW - 1000)
    snapshot = Snapshot((a,), (_node("n1", 4), _node("n2", 0)), NOW)
    progress = {"30": _elastic((1, 2))}
    flight = InFlight("30", "30", NOW, NOW + 60, NOW - 1000, {"n1": 4})
    assert not decide_las(snapshot, ROLES, progress, [flight])
    high = _job("31", 2, qos="high")
    assert not decide_las(Snapshot((a, high), snapshot.nodes, NOW), ROLES, progress, [])
    assert decide_las(snapshot, ROLES, progress, []).growths  # otherwise: it grows


def test_a_pending_elastic_job_starts_small_where_its_size_does_not_fit() -> None:
    busy = _job("40", 3, hosts=("n1", "n2", "n3"), start=NOW - 100, qos="high")
    wide = _job("41", 2)
    snapshot = Snapshot(
        (busy, wide), (*(_node(f"n{i}", 4) for i in (1, 2, 3)), _node("n4", 0)), NOW
    )
    out = decide_las(snapshot, ROLES, {"41": _elastic((1, 2))}, [])
    assert [(s.job_id, s.to_nodes) for s in out.small_starts] == [("41", 1)]
    assert not out.preemptions  # the high tier's job is not preemptible


def test_attained_service_counts_the_ledger_and_the_current_run() -> None:
    job = _job("50", 2, hosts=("n1", "n2"), start=NOW - 100)
    c = contender_of(job, ROLES, _elastic((1, 2), served=500.0), NOW)
    assert c.attained == (500.0 + 100 * 2) * 4  # node-seconds x GPUs per node
    assert c.sizes == (4, 8)
    assert c.tier == 1
    assert not c.may_grow  # 100 s < its 600 s interval


def test_every_run_is_protected_for_min_run() -> None:
    job = _job("60", 1, hosts=("n1",), start=NOW - 100)
    assert not contender_of(job, ROLES, JobProgress(), NOW, min_run=300.0).preemptible
    assert contender_of(job, ROLES, JobProgress(), NOW, min_run=60.0).preemptible
    capped = contender_of(job, ROLES, JobProgress(preemptions=2), NOW, 60.0, max_preemptions=2)
    assert not capped.preemptible


def test_measured_speeds_give_the_speedup_and_a_linear_batch_counts_its_samples() -> None:
    job = _job("70", 1, hosts=("n1",), start=NOW - 1000)
    fixed = contender_of(job, ROLES, _elastic((1, 2, 4), speeds={1: 100.0, 2: 150.0}), NOW)
    assert fixed.ratio(8, 4) == pytest.approx(1.5, rel=0.01)  # measured
    linear = contender_of(
        job, ROLES, _elastic((1, 2, 4), speeds={1: 100.0, 2: 150.0}, batch="linear"), NOW
    )
    assert linear.ratio(8, 4) == pytest.approx(1.5, rel=0.01)  # samples/s, any batch
    assert contender_of(job, ROLES, _elastic((1, 2)), NOW).ratio(8, 4) == 2.0  # prior


def test_a_job_waiting_out_its_requeue_delay_keeps_its_gpus_from_a_growth() -> None:
    """Evicted a moment ago, job 81 pends for BeginTime: its node is not idle to the plan
    (left out, the plan grew job 80 into it, and 81 then waited behind the growth)."""
    running = _job("80", 1, hosts=("n1",), start=NOW - 1000)
    requeued = replace(_job("81", 1), reason="BeginTime")
    snapshot = Snapshot((running, requeued), (_node("n1", 4), _node("n2", 0)), NOW)
    grows = _elastic((1, 2), served=1000.0)
    before = {"80": grows, "81": JobProgress(served=30.0, preemptions=1)}
    assert not decide_las(snapshot, ROLES, before, []).growths
    never_ran = {"80": grows, "81": JobProgress()}  # a --begin job: not ours to keep
    assert decide_las(snapshot, ROLES, never_ran, []).growths


def test_an_adaptive_jobs_speedup_is_its_goodput_with_the_batch_it_would_choose() -> None:
    """Measured fixed at 2 nodes (0.24 s a step of 16: 0.1 s a pass, 0.005 s a sample,
    0.1 s of sync) and 1 (0.28 s, two passes), gradient noise scale 400."""
    measured = (
        Measured(Shape(2, 2, 8, 0), 0.24, (1.0, 400.0)),
        Measured(Shape(1, 1, 8, 1), 0.28, (1.0, 400.0)),
    )
    adaptive = Adaptive(16, 256, 8, 8.0, measured)
    job = _job("90", 1, hosts=("n1",), start=NOW - 1000)
    prog = _elastic((1, 2, 4), batch="adaptive", adaptive=adaptive, speeds={1: 10.0})
    seen = contender_of(job, ROLES, prog, NOW)
    # Four GPUs a node here, and one rank a node (the job's ranks_per_node).
    two, one = adaptive.goodput(2, 2), adaptive.goodput(1, 1)
    assert two is not None
    assert one is not None
    assert seen.ratio(8, 4) == pytest.approx(two / one)
    assert 1.0 < seen.ratio(8, 4) < 2.0  # the sync it measured costs
    assert contender_of(job, ROLES, JobProgress(), NOW).ratio(8, 4) == 2.0  # the prior
