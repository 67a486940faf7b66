"""When a running job should end, from its trainer's progress.json (hpclaunch/report/eta.py)."""

from __future__ import annotations

from hpclaunch.report.eta import STALE_AFTER, eta_of

NOW = 1_795_860_000.0


def progress(**fields: object) -> dict[str, object]:
    return {"step": 450, "total": 1000, "updated_at": NOW, "steps_per_s": 0.5, **fields}


def test_it_ends_before_its_time_limit() -> None:
    eta = eta_of(progress(job_end=NOW + 3600), now=NOW)
    assert eta is not None
    assert eta.ends_at == NOW + 550 / 0.5
    assert eta.before_limit is True
    assert eta.step_at_limit is None
    assert eta.line().startswith("step 450/1000 at 0.5 steps/s, ends ~")
    assert "before its time limit" in eta.line()


def test_it_will_hit_its_time_limit_and_says_the_step_it_reaches() -> None:
    eta = eta_of(progress(job_end=NOW + 600), now=NOW)
    assert eta is not None
    assert eta.before_limit is False
    assert eta.step_at_limit == 450 + 300
    assert "reaches its time limit" in eta.line()
    assert "at about step 750, then is checkpointed and requeued" in eta.line()


def test_nothing_to_tell_without_a_total_a_rate_or_a_fresh_report() -> None:
    assert eta_of(progress(total=None), now=NOW) is None
    assert eta_of(progress(), now=NOW + STALE_AFTER + 1) is None
    no_rate = eta_of(progress(steps_per_s=None), now=NOW)
    assert no_rate is not None
    assert no_rate.line() == "step 450/1000 (no rate yet)"
    unknown_limit = eta_of(progress(), now=NOW)
    assert unknown_limit is not None
    assert unknown_limit.before_limit is None
    assert "time limit" not in unknown_limit.line()
