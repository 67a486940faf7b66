"""A study in a few figures, for ``hpclaunch sweep status``: its trials by state and its
best trial so far (plain data: the caller prints it or puts it in JSON)."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["not_started", "study_summary", "summary_line"]


def not_started(metric: str, direction: str) -> dict[str, Any]:
    """The summary of a study no task has made yet (every task still pending)."""
    return {"metric": metric, "direction": direction, "trials": {}, "best": None, "history": []}


def study_summary(study: Any, metric: str) -> dict[str, Any]:
    """Trials by state (lower case: ``complete``, ``pruned``, ``running``, ``fail``), the
    best completed trial (``None`` before one completed) and every trial in order (its
    state, value, last step reported, parameters) of ``study`` (an ``optuna.Study``)."""
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state.name.lower() for t in trials)
    done = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    best = None
    if done:
        pick = min if study.direction.name == "MINIMIZE" else max
        top = pick(done, key=lambda t: t.value)
        best = {"trial": top.number, "value": top.value, "params": dict(top.params)}
    return {
        "metric": metric,
        "direction": study.direction.name.lower(),
        "trials": dict(states.most_common()),
        "best": best,
        "history": [
            {
                "trial": t.number,
                "state": t.state.name.lower(),
                "value": t.value,
                "last_step": t.last_step,
                "params": dict(t.params),
            }
            for t in trials
        ],
    }


def summary_line(summary: dict[str, Any]) -> str:
    """``study: 8 trials (5 complete, 3 pruned); best val_loss 0.0312 (trial 4: lr=0.03,
    width=16)``."""
    counts = summary["trials"]
    total = sum(counts.values())
    if not total:
        return "study: no trial started yet (its tasks are pending)"
    states = ", ".join(f"{n} {state}" for state, n in counts.items())
    best = summary["best"]
    if best is None:
        return f"study: {total} trials ({states}); none completed yet"
    params = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()
    )
    return (
        f"study: {total} trials ({states}); best {summary['metric']} {best['value']:g} "
        f"(trial {best['trial']}: {params})"
    )


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
