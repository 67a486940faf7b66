"""Issue 48: Slurm 25.11's expedited requeue (``--requeue=expedite``) where the site asks for
it and the cluster offers it; today's ``--requeue`` everywhere else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.planning.checks import check_plan, check_site
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import render
from hpclaunch.planning.siteplan import _slurm_conf_changes
from hpclaunch.slurm.capabilities import Capabilities, discover
from tests.unit.conftest import make_spec
from tests.unit.fakes import recorded

PlanFor = Callable[..., SubmissionPlan]
TRAP = 'scontrol update "JobId=${SLURM_JOB_ID:-0}" Requeue=0'


@pytest.fixture
def expedited(site: SiteConfig) -> SiteConfig:
    return site.model_copy(update={"expedited_requeue": True})


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return discover(recorded(), now=lambda: 1000.0)


def offering(caps: Capabilities, version: str = "25.11.7", *params: str) -> Capabilities:
    return replace(caps, slurm_version=version, slurmctld_parameters=params)


def test_a_sidecar_job_asks_for_it_and_is_told_to_clear_it(
    plan_for: PlanFor, expedited: SiteConfig
) -> None:
    plan = plan_for(make_spec(tier="low", launcher="torchrun"), expedited)
    assert plan.expedited
    assert plan.option("--requeue") == "expedite"
    assert plan.option("--signal") == "B:USR1@120"
    assert dict(plan.runtime_env)["HPCLAUNCH_EXPEDITED_REQUEUE"] == "1"
    assert any(n.startswith("site expedited_requeue: --requeue=expedite") for n in plan.notes)
    script = render(plan).script
    assert "#SBATCH --requeue=expedite\n" in script
    assert TRAP in script  # a failure before the sidecar runs ends the job, not held


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"launcher": "none"}, "--requeue"),  # nobody would clear it before a failing exit
        ({"launcher": "srun", "checkpoint": {"max_requeues": 0}}, "--no-requeue"),
    ],
)
def test_jobs_without_a_sidecar_or_requeues_never_ask(
    plan_for: PlanFor, expedited: SiteConfig, fields: dict[str, object], flag: str
) -> None:
    plan = plan_for(make_spec(tier="low", **fields), expedited)
    assert not plan.expedited
    assert flag in [f for f, _ in plan.sbatch_options]
    assert plan.option(flag) is None
    assert "HPCLAUNCH_EXPEDITED_REQUEUE" not in dict(plan.runtime_env)
    assert TRAP not in render(plan).script
    assert not any("expedited_requeue" in n for n in plan.notes)


def test_a_backend_that_cannot_ask_says_so(plan_for: PlanFor, expedited: SiteConfig) -> None:
    plan = plan_for(make_spec(tier="low", launcher="srun"), expedited, can_expedite=False)
    assert plan.option("--requeue") is None
    assert "HPCLAUNCH_EXPEDITED_REQUEUE" not in dict(plan.runtime_env)
    assert any("not with this backend" in n and "plain --requeue" in n for n in plan.notes)


def test_the_default_site_keeps_todays_requeue(plan_for: PlanFor) -> None:
    assert not load_site("local").expedited_requeue
    plan = plan_for(make_spec(tier="low", launcher="srun"))
    assert plan.option("--requeue") is None
    assert TRAP not in render(plan).script


def test_the_capability_needs_25_11_and_the_parameter(caps: Capabilities) -> None:
    assert not offering(caps, "24.11.7", "enable_expedited_requeue").expedited_requeue
    assert not offering(caps, "25.11.7").expedited_requeue
    assert offering(caps, "25.11.7", "enable_expedited_requeue").expedited_requeue
    assert offering(caps, "26.05.3", "x", "enable_expedited_requeue").expedited_requeue


def test_checks_refuse_it_where_the_cluster_does_not_offer_it(
    plan_for: PlanFor, expedited: SiteConfig, caps: Capabilities
) -> None:
    plan = plan_for(make_spec(tier="low", launcher="srun"), expedited)
    old = offering(caps, "24.11.7")
    [problem] = [p for p in check_plan(plan, old) if "expedite" in p.what]
    assert "runs Slurm 24.11.7, older than 25.11" in problem.what
    assert problem.fix == "set expedited_requeue: false in the site config"
    off = offering(caps, "25.11.7")
    [problem] = [p for p in check_plan(plan, off) if "expedite" in p.what]
    assert "lack enable_expedited_requeue" in problem.what
    assert "hpclaunch site plan shows the line" in problem.fix
    on = offering(caps, "25.11.7", "enable_expedited_requeue")
    assert not [p for p in check_plan(plan, on) if "expedite" in p.what]
    # the site check says the same of the site config itself
    assert [p.where for p in check_site(expedited, off) if "expedite" in p.what] == [
        "expedited_requeue"
    ]
    assert not [p for p in check_site(expedited, on) if "expedite" in p.what]
    assert not [p for p in check_site(load_site("local"), off) if "expedite" in p.what]


def test_site_plan_lists_the_slurm_conf_line_on_25_11_only(
    expedited: SiteConfig, caps: Capabilities
) -> None:
    def conf(c: Capabilities) -> list[str]:
        return [ch.command for ch in _slurm_conf_changes(expedited, c) if "Slurmctld" in ch.command]

    assert conf(offering(caps, "25.11.7", "idle_on_node_suspend")) == [
        "slurm.conf: SlurmctldParameters=idle_on_node_suspend,enable_expedited_requeue  "
        "(now: idle_on_node_suspend)"
    ]
    assert conf(offering(caps, "25.11.7", "enable_expedited_requeue")) == []
    assert conf(offering(caps, "24.11.7")) == []  # no line makes 24.11 offer it
