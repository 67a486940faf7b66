"""The one elastic policy (``las.plan``) that the simulator runs and the arbiter applies."""

from __future__ import annotations

from hpclaunch.scheduling.las import Contender, level, plan


def elastic(key: str, held: int = 0, attained: float = 0.0, **kw: object) -> Contender:
    return Contender(key, (1, 2, 3, 4), held=held, attained=attained, **kw)  # type: ignore[arg-type]


def test_least_attained_service_first_and_an_elastic_job_shrinks_before_anyone_waits() -> None:
    old = elastic("old", held=4, attained=10_000.0)
    new = Contender("new", (2,), attained=0.0)
    sizes = plan([old, new], 4)
    assert sizes == {"new": 2, "old": 2}  # old shrunk to what is left, nobody waits


def test_a_rigid_job_that_does_not_fit_waits_and_one_that_ran_longest_is_preempted() -> None:
    long = Contender("long", (4,), held=4, attained=50_000.0)
    short = Contender("short", (2,), attained=0.0)
    assert plan([long, short], 4) == {"short": 2}


def test_a_job_that_may_not_be_preempted_keeps_its_gpus() -> None:
    te = Contender("te", (4,), held=4, attained=50_000.0, preemptible=False)
    be = Contender("be", (2,), attained=0.0)
    assert plan([te, be], 4) == {"te": 4}


def test_tiers_go_before_attained_service() -> None:
    high = Contender("high", (4,), attained=90_000.0, tier=0)
    low = Contender("low", (4,), attained=0.0, tier=1)
    assert plan([low, high], 4) == {"high": 4}


def test_idle_gpus_go_where_the_predicted_speed_grows_most() -> None:
    flat = elastic("flat", speedup=lambda a, b: 1.0 + 0.01 * (a - b))  # hardly scales
    steep = elastic("steep", attained=5.0)  # linear
    assert plan([flat, steep], 5) == {"flat": 1, "steep": 4}


def test_a_job_within_its_interval_does_not_grow() -> None:
    waiting = elastic("a", held=1, may_grow=False)
    assert plan([waiting], 4) == {"a": 1}


def test_a_size_its_measurements_say_did_not_pay_is_given_back() -> None:
    """Grown to 4 to learn its speed there, it measured 4 GPUs slower than 2."""
    speeds = {1: 1.0, 2: 1.8, 3: 1.5, 4: 0.9}
    learned = elastic("a", held=4, may_grow=False, speedup=lambda a, b: speeds[a] / speeds[b])
    assert plan([learned], 4) == {"a": 2}
    paid = elastic("b", held=4, may_grow=False)  # linear: 4 pays
    assert plan([paid], 4) == {"b": 4}


def test_service_is_compared_by_doubling_levels() -> None:
    assert [level(a, 100.0) for a in (0, 99, 100, 299, 300, 700)] == [0, 0, 1, 1, 2, 3]


def test_within_a_level_first_come_first_served_so_jobs_do_not_swap_at_every_pass() -> None:
    """Two rigid jobs that want the same GPUs: the one running keeps them while both are
    on one level, and is displaced only by a job a level below."""
    running = Contender("running", (4,), held=4, attained=500.0, submitted=1.0)
    newer = Contender("newer", (4,), attained=0.0, submitted=2.0)
    assert plan([running, newer], 4, quantum=1000.0) == {"running": 4}
    assert plan([running, newer], 4, quantum=100.0) == {"newer": 4}  # 500 s: level 2
