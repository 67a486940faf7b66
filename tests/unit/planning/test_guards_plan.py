"""What the spec's retry:, idle: (or the site's idle:) and notify: put in the plan: the
environment the sidecar and the GPU sampler read, and never a webhook's URL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from hpclaunch.planning.plan import SubmissionPlan
from tests.unit.conftest import make_site, make_spec

Build = Callable[..., SubmissionPlan]
GPU = {"resources": {"gpus_per_node": 1}, "launcher": "srun"}


def _env(plan: SubmissionPlan) -> dict[str, str]:
    return dict(plan.runtime_env)


def test_the_idle_guard_from_the_spec_or_else_the_site(plan_for: Build) -> None:
    spec = make_spec(**GPU, idle={"notify_after": 2, "stop_after": 5, "threshold": 10})
    env = _env(plan_for(spec))
    assert (env["HPCLAUNCH_GPU_IDLE_SECONDS"], env["HPCLAUNCH_IDLE_STOP_SECONDS"]) == ("120", "300")
    assert env["HPCLAUNCH_GPU_IDLE_UTIL"] == "10"
    site = make_site(idle={"notify_after": 15, "stop_after": 60})
    from_site = _env(plan_for(make_spec(**GPU), on=site))
    assert (from_site["HPCLAUNCH_GPU_IDLE_SECONDS"], from_site["HPCLAUNCH_IDLE_STOP_SECONDS"]) == (
        "900",
        "3600",
    )
    assert _env(plan_for(spec, on=site))["HPCLAUNCH_IDLE_STOP_SECONDS"] == "300"  # the spec's wins
    cpu = _env(plan_for(make_spec(launcher="srun"), on=site))  # no GPU: nothing to watch
    assert "HPCLAUNCH_IDLE_STOP_SECONDS" not in cpu


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"idle": {"notify_after": 10, "stop_after": 5}}, "stop_after (5 min) comes before"),
        ({"launcher": "none", "idle": {"stop_after": 30}}, "launcher none has no sidecar"),
        ({"launcher": "none", "retry": {"times": 1, "when": ["oom"]}}, "launcher none"),
        ({"retry": {"times": 0, "when": ["oom"]}}, "greater than or equal to 1"),
        ({"retry": {"times": 1, "when": ["segfault"]}}, "segfault"),
    ],
)
def test_guards_that_cannot_work_are_refused(fields: dict[str, Any], words: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=re.escape(words)):
        make_spec(**{"launcher": "srun", **fields})


def test_notify_and_retry_reach_the_sidecar_as_settings_not_secrets(plan_for: Build) -> None:
    spec = make_spec(
        **GPU,
        notify={"webhook": "lab", "events": ["failed"]},
        retry={"times": 2, "when": ["job_lost", {"exit_code": [3]}], "backoff": 30},
    )
    plan = plan_for(spec)
    env = _env(plan)
    assert env["HPCLAUNCH_NOTIFY"] == f"{plan.job_dir}/notify/config.json"
    assert env["HPCLAUNCH_RETRY"] == (
        '{"times":2,"endings":["job_lost"],"exit_codes":[3],"backoff":30,"max_backoff":3600}'
    )
    assert plan.notify is not None
    assert plan.notify.webhook == "lab"
