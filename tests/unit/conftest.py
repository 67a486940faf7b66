"""Fixtures for the unit tests: the local site, and specs and plans built from dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.plan import SubmissionPlan, build_plan

SUBMISSION_ID = "0123456789abcdef0123456789abcdef"
HOME = "/home/alice"
CWD = "/home/alice/project"
#: The sidecar's interpreter in rendered scripts (build_plan's default is sys.executable).
PYTHON = "/opt/hpclaunch/venv/bin/python"


@pytest.fixture(scope="session")
def site() -> SiteConfig:
    """site-configs/local.yaml."""
    return load_site("local")


def make_spec(**fields: Any) -> JobSpec:
    """A valid JobSpec; keyword arguments replace or add fields."""
    data: dict[str, Any] = {"name": "test", "command": ["python", "train.py"]}
    data.update(fields)
    return JobSpec.model_validate(data)


def make_site(**fields: Any) -> SiteConfig:
    """A small valid SiteConfig; keyword arguments replace fields."""
    data: dict[str, Any] = {
        "name": "testsite",
        "partitions": [
            {"name": "short", "gpus_per_node": 4, "cpus_per_node": 8, "max_time": "30"},
            {
                "name": "long",
                "gpus_per_node": 4,
                "cpus_per_node": 8,
                "max_time": "2-00:00:00",
                "default": True,
            },
        ],
        "tiers": {"medium": {"qos": "normal"}, "low": {"qos": "low", "preemptible": True}},
        "default_account": "research",
        "poll_min_interval": 0.01,
    }
    data.update(fields)
    return SiteConfig.model_validate(data)


@pytest.fixture
def plan_for(site: SiteConfig) -> Callable[..., SubmissionPlan]:
    """Build a plan for a spec (default: the local site, fixed id, home and cwd)."""

    def build(spec: JobSpec, on: SiteConfig | None = None, **kwargs: Any) -> SubmissionPlan:
        kwargs.setdefault("submission_id", SUBMISSION_ID)
        kwargs.setdefault("home", HOME)
        kwargs.setdefault("cwd", CWD)
        kwargs.setdefault("python", PYTHON)
        return build_plan(spec, on or site, **kwargs)

    return build
