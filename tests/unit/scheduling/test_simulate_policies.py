"""Victim choices: ours (a pure function) and Slurm 22.05's candidate order and walk."""

from __future__ import annotations

from dataclasses import replace

from hpclaunch.scheduling.simulate.policies import Ours, slurm_order, walk_candidates
from hpclaunch.scheduling.victims import Candidate, Request, choose_victims


def cand(job_id: int, placement: dict[int, int], **kw: object) -> Candidate:
    fields: dict[str, object] = {"since_commit": 0.0, "ckpt_write": 30.0, "restart_cost": 60.0}
    fields.update(kw)
    return Candidate(job_id, placement, **fields)  # type: ignore[arg-type]


def test_least_lost_work_wins() -> None:
    a = cand(1, {0: 1}, since_commit=900, honours_request=False)
    b = cand(2, {1: 1}, since_commit=100, honours_request=False)
    assert choose_victims(Request(1), [a, b], [0, 0]) == (2,)


def test_cost_counts_every_gpu_of_a_victim() -> None:
    small = cand(1, {0: 1}, since_commit=500, honours_request=False)
    big = cand(2, {1: 4}, since_commit=200, honours_request=False)  # 4 x 260 > 1 x 560
    assert choose_victims(Request(1), [small, big], [0, 0]) == (1,)


def test_exact_fit_is_preferred_unless_much_dearer() -> None:
    exact = cand(1, {0: 1}, ckpt_write=30, restart_cost=60)  # frees 1 of 1: cost 90
    loose = cand(2, {1: 2}, ckpt_write=10, restart_cost=30)  # frees 2 of 1: cost 80
    assert choose_victims(Request(1), [exact, loose], [0, 0]) == (1,)
    dear = cand(1, {0: 1}, ckpt_write=100, restart_cost=60)  # 160 > 1.5 x 80
    assert choose_victims(Request(1), [dear, loose], [0, 0]) == (2,)


def test_free_gpus_on_the_node_count_towards_the_need() -> None:
    a = cand(1, {0: 1})
    b = cand(2, {1: 2})
    # Node 0 has 1 free: preempting a (1 GPU) gives exactly 2 there.
    assert choose_victims(Request(2), [a, b], [1, 0]) == (1,)


def test_several_victims_on_one_node() -> None:
    a, b = cand(1, {0: 1}), cand(2, {0: 1})
    assert choose_victims(Request(2), [a, b], [0]) == (1, 2)


def test_a_job_preempted_before_waits_min_run_into_its_new_run() -> None:
    again = cand(1, {0: 2}, preemptions=1, ran=299.0)
    assert choose_victims(Request(1), [again], [0], min_run=300) is None
    assert choose_victims(Request(1), [replace(again, ran=300.0)], [0], min_run=300) == (1,)
    # Never preempted: no protection, however young its run.
    fresh = cand(2, {0: 2}, ran=1.0)
    assert choose_victims(Request(1), [fresh], [0], min_run=300) == (2,)


def test_the_count_cap_is_off_unless_asked_for() -> None:
    often = cand(1, {0: 2}, preemptions=5)
    assert choose_victims(Request(1), [often], [0]) == (1,)
    assert choose_victims(Request(1), [often], [0], max_preemptions=5) is None
    assert choose_victims(Request(1), [often], [0], max_preemptions=6) == (1,)


def test_ours_says_when_a_protected_victim_becomes_eligible() -> None:
    ours = Ours(min_run=300)
    cs = [cand(1, {0: 1}, preemptions=1, ran=100.0), cand(2, {0: 1}, preemptions=2, ran=250.0)]
    assert ours.eligible_at(cs, now=1000.0) == 1050.0
    assert ours.eligible_at([cand(3, {0: 1}, ran=5.0)], now=1000.0) is None  # not protected
    # A job the count cap protects for good never becomes eligible.
    assert Ours(min_run=300, max_preemptions=2).eligible_at(cs[1:], now=1000.0) is None


def test_multi_node_request_takes_the_cheapest_nodes() -> None:
    cs = [cand(1, {0: 4}), cand(2, {1: 4}, ckpt_write=1), cand(3, {2: 4}, ckpt_write=2)]
    assert choose_victims(Request(4, nodes=2), cs, [0, 0, 0]) == (2, 3)


def test_slurm_order_is_qos_priority_then_node_count() -> None:
    cs = [
        cand(1, {0: 1, 1: 1}, tier="low"),
        cand(2, {0: 1}, tier="medium"),
        cand(3, {2: 1}, tier="low"),
    ]
    assert [c.job_id for c in slurm_order(cs)] == [3, 1, 2]
    young = [cand(1, {0: 1}, start=10.0), cand(2, {0: 1}, start=50.0)]
    assert [c.job_id for c in slurm_order(young, youngest_first=True)] == [2, 1]


def test_slurm_walk_preempts_removed_candidates_on_the_chosen_nodes_only() -> None:
    # In order: A (node 0, 1 GPU), B (node 1, 2 GPUs), C (node 0, 1 GPU). Removing A leaves
    # no room for 2 GPUs; removing B does (node 1). A was removed but is not on node 1.
    ordered = [cand(1, {0: 1}), cand(2, {1: 2}), cand(3, {0: 1})]
    assert walk_candidates(Request(2), ordered, [0, 0]) == (2,)


def test_slurm_walk_preempts_more_than_needed_on_a_chosen_node() -> None:
    # Node 0: A (1 GPU) and B (1 GPU), need 1 after removing both? No: A alone frees 1.
    # Order B, A on node 0 and a 1-GPU need: B is enough; with need 2, both go.
    ordered = [cand(2, {0: 1}), cand(1, {0: 1})]
    assert walk_candidates(Request(1), ordered, [0]) == (2,)
    assert walk_candidates(Request(2), ordered, [0]) == (1, 2)
    assert walk_candidates(Request(3), ordered, [0]) is None
