"""Guaranteed quotas: where a job runs (account, QOS, requeue) given the project's usage."""

from __future__ import annotations

from typing import Any

import pytest

from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.errors import BackendUnavailable, ConfigError, PlanError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.ops.plan_job import read_usage
from hpclaunch.planning.quota import (
    USAGE_STATES,
    classify,
    in_quota_usage,
)
from hpclaunch.slurm.queue import QueueQuery, parse_queue, queue_argv
from tests.unit.fakes import FakeRunner, result

PlanFor = Any


def spec(tier: str = "medium", gpus: int = 4, nodes: int = 1, **extra: Any) -> JobSpec:
    fields: dict[str, Any] = {
        "name": "q",
        "command": ["python", "train.py"],
        "tier": tier,
        "project": "research",
        "resources": {"gpus_per_node": gpus, "nodes": nodes, "time": 10},
        **extra,
    }
    return JobSpec.model_validate(fields)


def test_in_quota_job_runs_in_the_project_account_and_is_never_requeued(
    plan_for: PlanFor,
) -> None:
    plan = plan_for(spec(gpus=4), quota_used=4)  # research: 8 guaranteed GPUs
    assert (plan.account, plan.qos, plan.quota, plan.preemptible) == (
        "research",
        "normal",
        "in-quota",
        False,
    )
    assert plan.option("--no-requeue") is None
    with pytest.raises(KeyError):
        plan.option("--nice")
    assert any("holds 4 of its 8 guaranteed GPUs" in note for note in plan.notes)


def test_over_quota_job_runs_preemptible_in_the_sibling_account(plan_for: PlanFor) -> None:
    plan = plan_for(spec(tier="high", gpus=4, nodes=2, launcher="torchrun"), quota_used=4)
    assert (plan.account, plan.qos, plan.quota, plan.preemptible) == (
        "research-oq",
        "overquota",
        "over-quota",
        True,
    )
    assert plan.option("--requeue") is None
    assert plan.option("--signal") == "B:USR1@120"  # the spec default lead time
    assert plan.option("--nice") == "1000"  # high: one nice step behind critical
    assert dict(plan.runtime_env)["HPCLAUNCH_GRACE"] == "10"  # the over-quota QOS's grace


def test_over_quota_keeps_tier_order_with_nice(plan_for: PlanFor) -> None:
    nice = {}
    for tier in ("critical", "high", "medium"):
        plan = plan_for(spec(tier=tier, gpus=4), quota_used=8)
        assert plan.quota == "over-quota"
        nice[tier] = int(dict(plan.sbatch_options).get("--nice") or 0)
    assert nice["critical"] < nice["high"] < nice["medium"]


def test_exact_fit_is_in_quota(plan_for: PlanFor) -> None:
    assert plan_for(spec(gpus=4, nodes=2), quota_used=0).quota == "in-quota"
    assert plan_for(spec(gpus=1), quota_used=8).quota == "over-quota"


def test_cpu_job_is_always_in_quota(plan_for: PlanFor) -> None:
    assert plan_for(spec(gpus=0), quota_used=8).quota == "in-quota"


def test_preemptible_tier_never_uses_the_guarantee(plan_for: PlanFor) -> None:
    plan = plan_for(spec(tier="low", gpus=1), quota_used=0)
    assert (plan.account, plan.qos, plan.quota) == ("research-oq", "low", "over-quota")


def test_unknown_usage_is_taken_as_zero_and_said(plan_for: PlanFor) -> None:
    plan = plan_for(spec(gpus=4))
    assert plan.quota == "in-quota"
    assert any("usage not read: taken as 0" in note for note in plan.notes)


def test_a_project_without_quota_is_refused_with_the_known_ones(plan_for: PlanFor) -> None:
    with pytest.raises(PlanError, match=r"project: project 'physics' has no GPU quota") as err:
        plan_for(spec(project="physics"))
    assert "research, vision" in str(err.value)


def test_without_quotas_the_tier_alone_decides(plan_for: PlanFor, site: SiteConfig) -> None:
    plain = site.model_copy(update={"quotas": {}})
    plan = plan_for(spec(tier="high", gpus=4, nodes=4), plain, quota_used=100)
    assert (plan.account, plan.qos, plan.quota) == ("research", "high", "none")
    low = plan_for(spec(tier="low"), plain)
    assert (low.account, low.qos) == ("research", "low")


def queue_line(qos: str, nodes: int, tres: str, job_id: str = "7") -> str:
    """A line of squeue in :data:`hpclaunch.slurm.queue.QUEUE_FORMAT` (only QOS and GPUs
    vary; ``tres``: tres-per-node)."""
    return (
        f"{job_id}|alice|research|{qos}|RUNNING|None|100|2026-11-25T10:00:00|{nodes}|1|N/A|N/A|"
        f"{tres}|N/A|0|gpu|1:00|2026-11-25T10:00:05|train"
    )


def test_usage_counts_only_non_preemptible_qos(site: SiteConfig) -> None:
    squeue = "\n".join(
        [
            queue_line("normal", 2, "gres:gpu:4"),  # 8
            queue_line("critical", 1, "gres:gpu:a100:2"),  # 2
            queue_line("high", 1, "gres/gpu:1"),  # 1 (later Slurm spelling)
            queue_line("low", 4, "gres:gpu:4"),  # preemptible: not counted
            queue_line("overquota", 1, "gres:gpu:4"),  # over-quota: not counted
            queue_line("normal", 1, "N/A"),  # no GPUs
            "garbage line",
        ]
    )
    jobs = [(row.qos, row.gpus) for row in parse_queue(squeue)]
    assert in_quota_usage(site, jobs) == 11


def usage_argv(project: str) -> list[str]:
    return queue_argv(QueueQuery(account=project, states=USAGE_STATES))


def test_read_usage_is_one_squeue_of_the_project(site: SiteConfig) -> None:
    out = queue_line("normal", 1, "gres:gpu:4") + "\n" + queue_line("low", 1, "gres:gpu:4")
    runner = FakeRunner(lambda argv: result(argv, out=out))
    assert read_usage(CliBackend(runner, site), site, "vision") == 4
    assert runner.calls == [tuple(usage_argv("vision"))]
    assert "--account=vision" in runner.calls[0]
    assert (
        "--states=PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED,REQUEUE_HOLD"
        in (runner.calls[0])
    )


def test_read_usage_counts_each_pending_task_of_a_folded_array(site: SiteConfig) -> None:
    # squeue folds an array's pending tasks into one line (recorded on 25.11: 6_[2-5%2]).
    out = queue_line("normal", 1, "gres/gpu:1", job_id="6_[2-5,9%2]") + "\n"
    out += queue_line("normal", 1, "gres/gpu:1", job_id="6_0")
    runner = FakeRunner(lambda argv: result(argv, out=out))
    assert read_usage(CliBackend(runner, site), site, "research") == 5 + 1


def test_read_usage_failure_is_a_backend_error(site: SiteConfig) -> None:
    runner = FakeRunner(
        lambda argv: result(argv, 1, err="slurm_load_jobs error: Unable to contact")
    )
    with pytest.raises(BackendUnavailable, match="Unable to contact"):
        read_usage(CliBackend(runner, site), site, "research")


def test_classify(site: SiteConfig) -> None:
    assert classify(site, "research", "normal") == "in-quota"
    assert classify(site, None, "critical") == "in-quota"
    assert classify(site, "research-oq", "overquota") == "over-quota"
    assert classify(site, None, "low") == "over-quota"
    assert classify(site, "physics", "normal") is None
    assert classify(site.model_copy(update={"quotas": {}}), "research", "normal") is None


@pytest.mark.parametrize(
    ("overquota", "message"),
    [
        ({"qos": "low"}, "overquota.qos 'low' is also a tier's QOS"),
        ({"account": "spare"}, "must contain {project}"),
    ],
)
def test_site_overquota_checks(tmp_path: Any, overquota: dict[str, str], message: str) -> None:
    import yaml

    from hpclaunch.config.site import site_search_dirs

    data = yaml.safe_load((site_search_dirs()[0] / "local.yaml").read_text())
    data["overquota"] = overquota
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message):
        load_site(path)


def test_a_preemptible_tier_may_not_preempt(tmp_path: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: x\npartitions: [{name: p, cpus_per_node: 1}]\n"
        "tiers: {low: {qos: low, preemptible: true, preempts: true}}\n"
    )
    with pytest.raises(ConfigError, match="a preemptible tier may not preempt"):
        load_site(path)


# -- submit reads the usage (CLI) ------------------------------------------------------------


@pytest.fixture
def cli_env(env: dict[str, str]) -> dict[str, str]:
    """conftest's private env, with sbatch/squeue through the fake runner below."""
    return {**env, "HPCLAUNCH_BACKEND": "cli"}


def _dry_run(
    cli_env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch, squeue: Any
) -> tuple[Any, FakeRunner]:
    from tests.unit.conftest import run

    runner = FakeRunner(squeue)
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: j\ncommand: ['true']\nproject: research\ntier: high\n"
        "resources: {gpus_per_node: 4, time: 10}\n"
    )
    return run(cli_env, "submit", "--dry-run", "--no-check", str(path), runner=runner), runner


def test_submit_places_by_live_usage(
    cli_env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = queue_line("normal", 2, "gres:gpu:4")  # research already holds its 8 GPUs
    res, runner = _dry_run(cli_env, tmp_path, monkeypatch, lambda argv: result(argv, out=full))
    assert res.exit_code == 0, res.output
    assert "--account=research-oq" in res.stdout
    assert "--qos=overquota" in res.stdout
    assert "over-quota: project research holds 8 of its 8 guaranteed GPUs" in res.stdout
    assert runner.calls == [tuple(usage_argv("research"))]  # one squeue, nothing else

    res, _ = _dry_run(cli_env, tmp_path, monkeypatch, lambda argv: result(argv, out=""))
    assert "#SBATCH --account=research\n" in res.stdout
    assert "--qos=high" in res.stdout


def test_submit_warns_when_usage_cannot_be_read(
    cli_env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = lambda argv: result(argv, 1, err="slurm_load_jobs error")  # noqa: E731
    res, _ = _dry_run(cli_env, tmp_path, monkeypatch, down)
    assert res.exit_code == 0, res.output
    assert "Warning: project research's GPU usage not read" in res.stderr
    assert "usage not read: taken as 0" in res.stdout


def test_a_non_preemptible_job_over_quota_gets_a_one_line_warning(plan_for: PlanFor) -> None:
    plan = plan_for(spec(tier="critical", gpus=4, nodes=2), quota_used=8)
    assert plan.quota == "over-quota"
    assert plan.quota_warning == (
        "project research holds 8 of its 8 guaranteed GPUs; this job asks 8: it runs "
        "over-quota on idle GPUs and may be preempted (--quota=strict waits in-quota instead)"
    )
    assert "\n" not in plan.quota_warning
    # In quota, or a preemptible tier (over-quota by the user's own choice): no warning.
    assert plan_for(spec(tier="critical", gpus=4), quota_used=4).quota_warning is None
    assert plan_for(spec(tier="low", gpus=4), quota_used=8).quota_warning is None


def test_strict_keeps_the_job_in_quota_waiting(plan_for: PlanFor) -> None:
    plan = plan_for(spec(tier="critical", gpus=4), quota_used=8, quota_mode="strict")
    assert (plan.account, plan.qos, plan.quota, plan.preemptible) == (
        "research",
        "critical",
        "in-quota",
        False,
    )
    assert plan.quota_warning is None
    assert any("--quota=strict" in n and "AssocGrpGRES" in n for n in plan.notes)
    # A preemptible tier is not affected: it never uses the guarantee.
    assert plan_for(spec(tier="low"), quota_used=8, quota_mode="strict").quota == "over-quota"


def test_strict_refuses_a_job_larger_than_the_whole_guarantee(plan_for: PlanFor) -> None:
    big = spec(tier="high", gpus=4, nodes=3)  # 12 GPUs; research's guarantee is 8
    with pytest.raises(PlanError, match="more than project research's whole guarantee of 8"):
        plan_for(big, quota_used=0, quota_mode="strict")
    warning = plan_for(big, quota_used=0).quota_warning
    assert warning is not None
    assert "more than the whole guarantee of 8" in warning


def test_submit_prints_the_warning_and_strict_places_in_quota(
    cli_env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.conftest import run

    full = queue_line("normal", 2, "gres:gpu:4")  # research already holds its 8 GPUs
    runner = FakeRunner(lambda argv: result(argv, out=full))
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: j\ncommand: ['true']\nproject: research\ntier: critical\n"
        "resources: {gpus_per_node: 4, time: 10}\n"
    )
    res = run(cli_env, "submit", "--dry-run", "--no-check", str(path), runner=runner)
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("Warning:")]
    assert warnings == [
        f"Warning: {path}: project research holds 8 of its 8 guaranteed GPUs; this job asks 4: "
        "it runs over-quota on idle GPUs and may be preempted (--quota=strict waits in-quota "
        "instead)"
    ]
    for how in (["--quota=strict"], []):
        env = dict(cli_env, HPCLAUNCH_QUOTA="strict") if not how else cli_env
        res = run(env, "submit", "--dry-run", "--no-check", *how, str(path), runner=runner)
        assert res.exit_code == 0, res.output
        assert "#SBATCH --account=research\n" in res.stdout
        assert "#SBATCH --qos=critical\n" in res.stdout
        assert "Warning:" not in res.stderr


def test_tier_takes_a_jobs_own_gpus_out_as_the_usage_counted_them(site: SiteConfig) -> None:
    # `hpclaunch tier` subtracts the moving job from its project's usage: every pending task
    # of a folded array line, as read_usage counted them (4 tasks x 2 GPUs).
    from hpclaunch.planning.retier import counted_gpus

    (row,) = parse_queue(queue_line("normal", 1, "gres/gpu:2", job_id="6_[2-5%2]"))
    assert counted_gpus(site, row, "research") == 8
    assert counted_gpus(site, row, "vision") == 0
    (low,) = parse_queue(queue_line("low", 1, "gres/gpu:2"))
    assert counted_gpus(site, low, "research") == 0  # preemptible: never counted
