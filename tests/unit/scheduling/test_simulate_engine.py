"""The simulator on tiny scenarios whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from hpclaunch.scheduling.simulate.engine import SimConfig, simulate
from hpclaunch.scheduling.simulate.model import BE, TE, Cluster, Job
from hpclaunch.scheduling.simulate.policies import Ours, make_policy


def job(i: int, submit: float, gpus: int, duration: float, cls: str = BE, **kw: float) -> Job:
    nodes = int(kw.pop("nodes", 1))
    tier = "high" if cls == TE else "low"
    return Job(i, submit, gpus, nodes, duration, cls, tier, **kw)


def run(policy: str, jobs: list[Job], nodes: int = 1, gpn: int = 4) -> dict[int, Job]:
    config = SimConfig(nodes=nodes, gpus_per_node=gpn, grace_time=60, requeue_delay=120)
    return {j.id: j for j in simulate(jobs, make_policy(policy), config).jobs}


def blocking() -> list[Job]:
    # A takes 3 of 4 GPUs; B (2 GPUs) must wait for A; C (1 GPU, short) could run beside A.
    return [job(0, 0, 3, 100), job(1, 1, 2, 50), job(2, 2, 1, 10)]


def test_fifo_keeps_submission_order() -> None:
    done = run("fifo", blocking())
    assert [done[i].first_start for i in range(3)] == [0, 100, 100]
    assert [done[i].finish for i in range(3)] == [100, 150, 110]


def test_backfill_starts_a_short_job_that_delays_nobody() -> None:
    done = run("fifo-backfill", blocking())
    assert done[2].first_start == 2
    assert done[2].finish == 12
    assert done[1].first_start == 100  # the blocked job's reservation holds


def test_backfill_refuses_a_job_that_would_delay_the_reservation() -> None:
    # B now needs all 4 GPUs at 100 (no spare beyond its reservation); C would still hold
    # its GPU then.
    jobs = [job(0, 0, 3, 100), job(1, 1, 4, 50), job(2, 2, 1, 500)]
    done = run("fifo-backfill", jobs)
    assert done[1].first_start == 100
    assert done[2].first_start == 150


def test_backfill_may_use_gpus_beyond_the_reservation() -> None:
    jobs = blocking()
    jobs[2] = job(2, 2, 1, 500)  # long, but B leaves 2 GPUs spare at 100
    done = run("fifo-backfill", jobs)
    assert done[2].first_start == 2
    assert done[1].first_start == 100


def test_backfill_plans_with_time_limits_when_jobs_have_them() -> None:
    # As in blocking(), but B needs all 4 GPUs. With exact run times C (ends at 12) fits
    # before B's reservation at 100. Slurm plans with limits: A "ends" at 0 + 150 and C
    # "takes" 200 > 150 - 2, so C may not backfill and waits for B.
    def jobs(**limits: float) -> list[Job]:
        return [
            job(0, 0, 3, 100, limit=limits.get("a", float("inf"))),
            job(1, 1, 4, 50, limit=limits.get("b", float("inf"))),
            job(2, 2, 1, 10, limit=limits.get("c", float("inf"))),
        ]

    exact = run("fifo-backfill", jobs())
    assert exact[2].first_start == 2
    limited = run("fifo-backfill", jobs(a=150, b=60, c=200))
    assert limited[2].first_start == 150  # after B (100 - 150)
    assert limited[1].first_start == 100  # the runs still take their real time
    short = run("fifo-backfill", jobs(a=150, b=60, c=100))  # 2 + 100 <= 150: backfills
    assert short[2].first_start == 2


def test_priority_puts_te_before_earlier_be() -> None:
    jobs = [job(0, 0, 4, 100), job(1, 1, 4, 10), job(2, 2, 4, 10, TE)]
    done = run("priority", jobs)
    assert done[2].first_start == 100
    assert done[1].first_start == 110


def preemption_case() -> list[Job]:
    # V: BE on both GPUs, periodic checkpoint every 200 s of work, 10 s to write one on
    # request, 20 s to restart. T: a TE job arriving at 250 that needs one GPU.
    victim = job(0, 0, 2, 1000, ckpt_interval=200, ckpt_write=10, restart_cost=20)
    return [victim, job(1, 250, 1, 50, TE)]


def test_slurm_native_victim_loses_work_since_its_last_periodic_checkpoint() -> None:
    done = run("slurm-native", preemption_case(), gpn=2)
    v, t = done[0], done[1]
    # Signal at 250, killed at 250 + grace 60; its last periodic commit was at 200.
    assert t.first_start == 310
    assert t.finish == 360
    # Requeued at 310, may start at 310 + 120; restart 20; 800 s of work left.
    assert v.finish == 430 + 20 + 800
    assert v.preemptions == 1
    # GPU time held beyond 2 x 1000: 2 x (310 - 200) lost + 2 x 20 restart.
    assert v.busy_gpu_seconds - 2 * 1000 == pytest.approx(2 * 110 + 2 * 20)


def test_ours_asks_for_a_checkpoint_and_loses_only_the_write() -> None:
    done = run("ours", preemption_case(), gpn=2)
    v, t = done[0], done[1]
    # Signal at 250: the victim commits 250 s of work and releases at 260.
    assert t.first_start == 260
    assert t.finish == 310
    assert v.finish == 260 + 120 + 20 + 750
    assert v.busy_gpu_seconds - 2 * 1000 == pytest.approx(2 * 10 + 2 * 20)


def test_a_victim_computes_through_its_notice_and_loses_only_the_write() -> None:
    jobs = preemption_case()
    jobs[0].ckpt_notice = 5  # it sees the request 5 s after the signal
    done = run("ours", jobs, gpn=2)
    v, t = done[0], done[1]
    # Signal at 250: it computes to 255, commits 255 s of work, writes to 265.
    assert t.first_start == 265
    assert v.finish == 265 + 120 + 20 + 745
    # The notice is useful work: only the write and the restart are lost.
    assert v.busy_gpu_seconds - 2 * 1000 == pytest.approx(2 * 10 + 2 * 20)


def test_a_victim_that_ends_within_its_notice_just_finishes() -> None:
    jobs = preemption_case()
    jobs[0].duration = 253  # signalled at 250, done at 253: before it sees the request
    jobs[0].ckpt_notice = 5
    done = run("ours", jobs, gpn=2)
    v, t = done[0], done[1]
    assert v.finish == 253
    assert v.busy_gpu_seconds == pytest.approx(2 * 253)  # nothing lost, no restart
    assert t.first_start == 253


def test_notice_and_write_over_the_grace_time_are_not_honoured() -> None:
    jobs = preemption_case()
    jobs[0].ckpt_notice, jobs[0].ckpt_write = 55, 10  # 65 > grace 60
    done = run("ours", jobs, gpn=2)
    assert done[1].first_start == 310  # killed at the end of the grace time
    assert done[0].finish == 430 + 20 + 800


def test_a_victim_whose_write_exceeds_the_grace_time_is_killed_like_slurm_native() -> None:
    jobs = preemption_case()
    jobs[0].ckpt_write = 90  # > grace 60: the request cannot be honoured
    done = run("ours", jobs, gpn=2)
    assert done[1].first_start == 310
    assert done[0].finish == 430 + 20 + 800


def test_no_preemption_without_a_preempting_policy() -> None:
    done = run("priority", preemption_case(), gpn=2)
    assert done[1].first_start == 1000
    assert done[0].preemptions == 0


def test_multi_node_job_takes_whole_free_gpus_on_each_node() -> None:
    cluster = Cluster(nodes=3, gpus_per_node=4)
    cluster.allocate({0: 1})
    assert cluster.find(4, 2) == {1: 4, 2: 4}
    assert cluster.find(3, 3) == {0: 3, 1: 3, 2: 3}
    assert cluster.find(4, 3) is None
    assert cluster.find(3, 1) == {0: 3}  # best fit: the node with 3 free, exactly


def test_multi_node_job_waits_for_enough_nodes() -> None:
    jobs = [job(0, 0, 1, 100), job(1, 1, 8, 10, nodes=2)]
    done = run("fifo", jobs, nodes=2, gpn=4)
    assert done[1].first_start == 100  # 7 GPUs free, but not 2 whole nodes of 4


def cap_case() -> list[Job]:
    # One BE job on the only GPU, three TE jobs one after another.
    victim = job(0, 0, 1, 1000, ckpt_interval=100, ckpt_write=5, restart_cost=0)
    return [victim, *(job(i, t, 1, 10, TE) for i, t in ((1, 100), (2, 400), (3, 700)))]


def test_a_job_preempted_before_runs_min_run_again_before_its_next_preemption() -> None:
    done = run("ours", cap_case(), gpn=1)  # ours' default min_run: 300 s
    # Runs of the victim: 0-100 (never preempted: taken at once), back at 105 + 120 = 225;
    # TE 2 arrives at 400, 175 s into that run: it waits until 525 (a wake-up, no other
    # event falls there), the victim releases at 530 with 400 s done. Back at 650, TE 3
    # arrives at 700 and waits until 950 (700 s done), release at 955; back at 1075 with
    # 300 s left.
    assert [done[i].first_start for i in (1, 2, 3)] == [105, 530, 955]
    assert done[0].preemptions == 3
    assert done[0].finish == 1375


def test_the_count_cap_when_asked_for_protects_a_job_for_good() -> None:
    config = SimConfig(nodes=1, gpus_per_node=1, grace_time=60, requeue_delay=120)
    result = simulate(cap_case(), Ours(min_run=0, max_preemptions=2), config)
    done = {j.id: j for j in result.jobs}
    # Runs: 0-100 (100 s of work), 225-400 (175 s), 525 onwards: 725 s left.
    assert [done[i].first_start for i in (1, 2)] == [105, 405]
    assert done[0].preemptions == 2
    assert done[0].finish == 1250
    assert done[3].first_start == 1250


def test_a_stale_event_at_the_same_instant_does_not_skip_the_scheduling_pass() -> None:
    # The victim would end at 260; asked at 250, it releases at 250 + 10 = 260 too. The
    # release comes first, then the stale finish of the preempted run: the TE job must
    # start at 260, not when the victim comes back at 380.
    victim = job(0, 0, 1, 260, ckpt_interval=1000, ckpt_write=10, restart_cost=0)
    done = run("ours", [victim, job(1, 250, 1, 50, TE)], gpn=1)
    assert done[1].first_start == 260
    assert done[0].finish == 380 + 10


def test_jobs_that_cannot_fit_the_cluster_are_refused() -> None:
    with pytest.raises(ValueError, match="GPUs per node"):
        run("fifo", [job(0, 0, 8, 10)], gpn=4)
