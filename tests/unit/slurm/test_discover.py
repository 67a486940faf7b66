"""Capability discovery and the checks against it, from recorded outputs of the local
cluster (tests/unit/data/cluster-22.05/, real Slurm 22.05.8 output)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli import cli
from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.errors import ConfigError, PlanError, ProgramNotFound
from hpclaunch.planning.checks import Problem, check_plan, check_site, raise_for_problems
from hpclaunch.slurm.capabilities import (
    Capabilities,
    Gres,
    discover,
    parse_gres,
)
from hpclaunch.store.capabilities import cache_path, load_capabilities, max_age_from_env
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import CWD, HOME, SUBMISSION_ID, make_spec
from tests.unit.fakes import FakeRunner, recorded, result

DATA = Path(__file__).parents[1] / "data" / "cluster-22.05"


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return discover(recorded(), now=lambda: 1000.0)


def test_discovers_the_local_cluster(caps: Capabilities) -> None:
    assert (caps.cluster, caps.slurm_version, caps.user) == ("hpclaunch", "22.05.8", "root")
    assert (caps.max_array_size, caps.min_job_age, caps.job_requeue) == (1001, 300, True)
    assert caps.max_job_count == 10000
    assert (caps.preempt_type, caps.preempt_mode) == ("preempt/qos", "REQUEUE")
    assert "sched_interval=2" in caps.scheduler_parameters
    assert caps.slurmctld_parameters == ("preempt_send_user_signal",)
    gpu = caps.partition("gpu")
    assert gpu is not None
    assert gpu.default
    assert gpu.state == "UP"
    assert (gpu.max_time, gpu.max_nodes, gpu.total_nodes, gpu.node_limit) == (3600, None, 4, 4)
    assert gpu.allow_qos is None
    assert gpu.allow_accounts is None
    debug = caps.partition("debug")
    assert debug is not None
    assert debug.max_time == 600
    assert not debug.default
    assert [n.name for n in caps.nodes_of("gpu")] == ["n1", "n2", "n3", "n4"]
    assert caps.nodes[0].partitions == ("gpu", "debug")
    assert caps.nodes[0].gres == (Gres("gpu", None, 4),)
    assert caps.nodes[0].cpus == 8
    low = caps.qos_named("low")
    assert low is not None
    assert (low.grace_time, low.preempt_mode, low.priority) == (10, "requeue", 0)
    high = caps.qos_named("high")
    assert high is not None
    assert high.preempt == ("low",)
    assert caps.default_account == "research"
    assert caps.associations is not None
    assert {a.account for a in caps.associations} == {"research", "root", "vision"}
    assert all(a.qos == ("critical", "high", "low", "normal") for a in caps.associations)


def test_discovery_uses_the_runner_only(caps: Capabilities) -> None:
    runner = recorded()
    discover(runner)
    assert runner.calls[0] == ("id", "-un")  # the user names the association query
    programs = sorted(c[0] for c in runner.calls)
    assert programs == ["id", "sacctmgr", "sacctmgr", "scontrol", "scontrol", "sinfo", "sinfo"]


def test_missing_sacctmgr_makes_accounting_unknown() -> None:
    inner = recorded()

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "sacctmgr":
            raise ProgramNotFound("sacctmgr")
        return inner.answer(argv)

    caps = discover(FakeRunner(answer))
    assert caps.qos is None
    assert caps.associations is None
    assert caps.accounting_problem is not None
    assert "sacctmgr" in caps.accounting_problem
    assert caps.partition("gpu") is not None
    # Without accounting, QOS and account checks are skipped, not failed.
    assert check_site(load_site("local"), caps) == []


def test_slurmdbd_down_makes_accounting_unknown() -> None:
    inner = recorded()

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "sacctmgr":
            return result(argv, 1, err="sacctmgr: error: Problem talking to the database\n")
        return inner.answer(argv)

    caps = discover(FakeRunner(answer))
    assert caps.qos is None
    assert "database" in (caps.accounting_problem or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:4", (Gres("gpu", None, 4),)),
        ("gpu:a100:4(S:0-1)", (Gres("gpu", "a100", 4),)),
        ("gpu:a100:2(S:0),gpu:v100:2(S:1)", (Gres("gpu", "a100", 2), Gres("gpu", "v100", 2))),
        ("gpu:tesla:2,mps:100K", (Gres("gpu", "tesla", 2), Gres("mps", None, 100))),
        ("gpu", (Gres("gpu", None, 1),)),
        ("(null)", ()),
    ],
)
def test_parse_gres(text: str, expected: tuple[Gres, ...]) -> None:
    assert parse_gres(text) == expected


# -- cache ------------------------------------------------------------------------------


def test_cache_is_private_fresh_then_stale(tmp_path: Path) -> None:
    path = tmp_path / "c" / "local.json"
    clock = [1000.0]
    runner = recorded()
    first = load_capabilities(runner, "local", max_age=300, path=path, now=lambda: clock[0])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    calls = len(runner.calls)
    clock[0] = 1299.0
    again = load_capabilities(runner, "local", max_age=300, path=path, now=lambda: clock[0])
    assert again == first
    assert len(runner.calls) == calls
    load_capabilities(runner, "local", max_age=300, path=path, now=lambda: clock[0], refresh=True)
    assert len(runner.calls) == 2 * calls
    clock[0] = 1700.0
    load_capabilities(runner, "local", max_age=300, path=path, now=lambda: clock[0])
    assert len(runner.calls) == 3 * calls


def test_corrupt_cache_is_rediscovered(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    path.write_text("{not json")
    caps = load_capabilities(recorded(), "local", path=path)
    assert json.loads(path.read_text())["cluster"] == caps.cluster == "hpclaunch"


def test_cache_path_and_max_age_from_env(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert cache_path("my site", env) == tmp_path / "hpclaunch" / "my_site.json"
    assert max_age_from_env({"HPCLAUNCH_CAPS_MAX_AGE": "5"}) == 5.0
    assert max_age_from_env({}) == 300.0
    with pytest.raises(ConfigError, match="HPCLAUNCH_CAPS_MAX_AGE"):
        max_age_from_env({"HPCLAUNCH_CAPS_MAX_AGE": "soon"})


# -- check_plan -------------------------------------------------------------------------


def plan_for(site: SiteConfig, **spec: object):  # type: ignore[no-untyped-def]
    from hpclaunch.planning.plan import build_plan

    return build_plan(make_spec(**spec), site, submission_id=SUBMISSION_ID, home=HOME, cwd=CWD)


def test_a_good_plan_has_no_problems(caps: Capabilities, site: SiteConfig) -> None:
    plan = plan_for(site, resources={"gpus_per_node": 4, "nodes": 2, "time": 60}, tier="high")
    assert check_plan(plan, caps) == []


def test_plan_problems_against_reality(caps: Capabilities) -> None:
    # A site YAML that is wrong about the cluster lets build_plan accept what Slurm refuses.
    site = load_site(DATA / "mismatch-site.yaml")
    plan = plan_for(
        site,
        resources={"gpus_per_node": 8, "gpu_type": "a100", "time": 90},
        tier="high",
        project="physics",
    )
    problems = {p.where: p for p in check_plan(plan, caps)}
    assert set(problems) == {"resources.time", "resources.gpus_per_node", "qos", "project"}
    assert "MaxTime 01:00:00" in problems["resources.time"].what
    assert problems["resources.gpus_per_node"].allowed == ("gpu:4",)
    assert "gpu:a100:8" in problems["resources.gpus_per_node"].what
    assert problems["qos"].allowed == ("critical", "high", "low", "normal")
    assert problems["project"].allowed == ("research", "root", "vision")


def test_plan_on_a_missing_partition(caps: Capabilities) -> None:
    site = load_site(DATA / "mismatch-site.yaml")
    plan = plan_for(site, resources={"time": 600}, tier="critical", project="research")
    assert plan.partition == "long"
    [problem] = check_plan(plan, caps)
    assert problem.where == "partition"
    assert problem.allowed == ("debug", "gpu")


def test_plan_partition_down_and_qos_not_allowed(caps: Capabilities, site: SiteConfig) -> None:
    from dataclasses import replace

    gpu = caps.partition("gpu")
    assert gpu is not None
    down = replace(gpu, state="DOWN", allow_qos=("high",))
    caps2 = replace(caps, partitions=(down, *caps.partitions[1:]))
    problems = check_plan(plan_for(site, tier="medium"), caps2)
    assert [p.where for p in problems] == ["partition", "qos"]
    assert "DOWN" in problems[0].what
    assert problems[1].allowed == ("high",)


def test_raise_for_problems_is_a_config_error(caps: Capabilities) -> None:
    problem = Problem("time 02:00:00 is over MaxTime", "ask for less", "resources.time")
    with pytest.raises(PlanError) as info:
        raise_for_problems([problem], caps)
    assert "resources.time: time 02:00:00 is over MaxTime; fix: ask for less" in info.value.message
    assert info.value.hint is not None
    assert "--no-check" in info.value.hint
    raise_for_problems([], caps)  # nothing to raise


# -- check_site -------------------------------------------------------------------------


def test_local_site_matches_the_cluster(caps: Capabilities, site: SiteConfig) -> None:
    assert check_site(site, caps) == []


def test_over_quota_nice_steps_that_eat_the_qos_share_are_a_problem(
    caps: Capabilities, site: SiteConfig
) -> None:
    # The recorded cluster: PriorityWeightQOS 100000, QOS priorities up to 1000, overquota 50:
    # a share of 5000, so nice steps of 1000 keep medium over-quota (3000) above low (0).
    assert caps.priority_weight_qos == 100000
    big = site.model_copy(
        update={"overquota": site.overquota.model_copy(update={"nice_step": 3000})}
    )
    (problem,) = check_site(big, caps)
    assert problem.where == "overquota.nice_step"
    assert "priority share is only 5000" in problem.what
    assert problem.fix.startswith("set overquota.nice_step below 2500")
    from dataclasses import replace

    weak = replace(caps, priority_weight_qos=1000)  # a share of 50 < 2 steps of 1000
    assert [p.where for p in check_site(site, weak)] == ["overquota.nice_step"]


def test_mismatching_site_names_every_mismatch(caps: Capabilities) -> None:
    problems = check_site(load_site(DATA / "mismatch-site.yaml"), caps)
    assert sorted(p.where for p in problems) == sorted(
        [
            "partitions.long",
            "partitions.debug",
            "partitions.gpu.max_time",
            "partitions.gpu.gpus_per_node",
            "partitions.gpu.gpu_type",
            "partitions.gpu.cpus_per_node",
            "tiers.high.qos",
            "tiers.medium.preemptible",
            "tiers.medium.grace",
            "tiers.low.preemptible",
            "default_account",
        ]
    )
    text = "\n".join(map(str, problems))
    assert "max_time 02:00:00 differs from the cluster's MaxTime 01:00:00" in text
    assert "QOS 'urgent' does not exist (cluster has: critical, high, low, normal)" in text
    assert "QOS critical, high, normal can preempt low" in text


def test_cluster_preemption_settings_checked(site: SiteConfig) -> None:
    def edit(name: str, text: str) -> str:
        if name != "scontrol_show_config.txt":
            return text
        text = text.replace("preempt/qos", "preempt/none").replace(
            "SlurmctldParameters     = preempt_send_user_signal", "SlurmctldParameters     = (null)"
        )
        return text.replace("PreemptMode             = REQUEUE", "PreemptMode             = OFF")

    caps = discover(recorded(edit))
    assert caps.slurmctld_parameters == ()
    problems = check_site(site, caps)
    # low's own QOS PreemptMode is requeue, so only the two cluster-wide settings are wrong.
    assert [p.where for p in problems] == ["tiers", "tiers"]
    assert "PreemptType is preempt/none" in problems[0].what
    assert "preempt_send_user_signal" in problems[1].what


# -- CLI --------------------------------------------------------------------------------


def _cached(tmp_path: Path, caps: Capabilities) -> dict[str, str]:
    """Env for the CLI with ``caps`` fresh in a private cache."""
    import time
    from dataclasses import replace

    from hpclaunch.store.capabilities import write_cache

    write_cache(tmp_path / "hpclaunch" / "hpclaunch.json", replace(caps, discovered_at=time.time()))
    return {"XDG_CACHE_HOME": str(tmp_path), "HPCLAUNCH_CAPS_MAX_AGE": "3600"}


def test_cli_site_check(tmp_path: Path, caps: Capabilities) -> None:
    # No sacctmgr on PATH: the accounting state (not cached) cannot be read, so only the
    # cached capabilities are compared; tests/unit/planning/test_siteplan.py covers the plan part.
    env = {**_cached(tmp_path, caps), "PATH": str(tmp_path / "empty")}
    ok = CliRunner().invoke(cli, ["--site", "local", "site", "check"], env=env)
    assert ok.exit_code == 0, ok.output
    assert "site hpclaunch matches cluster hpclaunch" in ok.output
    assert "Note: site plan not checked" in ok.stderr
    bad = CliRunner().invoke(
        cli, ["--site", str(DATA / "mismatch-site.yaml"), "site", "check", "--json"], env=env
    )
    assert bad.exit_code == 1
    data = json.loads(bad.stdout)
    assert not data["in_sync"]
    assert len(data["problems"]) == 11


def test_cli_site_show_json(tmp_path: Path, caps: Capabilities) -> None:
    env = _cached(tmp_path, caps)
    out = CliRunner().invoke(cli, ["--site", "local", "site", "show", "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert Capabilities.from_dict(json.loads(out.output)) == caps
    table = CliRunner().invoke(cli, ["--site", "local", "site", "show"], env=env)
    assert table.exit_code == 0
    assert "preempt/qos" in table.output
    assert "critical" in table.output


def test_cli_dry_run_refuses_what_the_cluster_would(tmp_path: Path, caps: Capabilities) -> None:
    env = _cached(tmp_path, caps)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: ['true']\nresources: {time: 90}\nproject: physics\n")
    site = str(DATA / "mismatch-site.yaml")
    out = CliRunner().invoke(cli, ["--site", site, "submit", "--dry-run", str(spec)], env=env)
    assert out.exit_code == 2, out.output
    assert "resources.time" in out.output
    assert "project" in out.output
    assert "research, root, vision" in out.output
    skipped = CliRunner().invoke(
        cli, ["--site", site, "submit", "--dry-run", "--no-check", str(spec)], env=env
    )
    assert skipped.exit_code == 0, skipped.output
    assert "# sbatch argv" in skipped.output


# -- Slurm versions: the login node's commands against the controller's release -----------


def test_client_commands_of_another_release_are_a_site_check_problem(
    site: SiteConfig, caps: Capabilities
) -> None:
    import dataclasses

    assert caps.client_version == "unknown"  # the 22.05 recording has no sinfo --version
    mixed = dataclasses.replace(caps, slurm_version="25.11.7", client_version="22.05.8")
    problems = [p for p in check_site(site, mixed) if p.where == "slurm_bin"]
    assert len(problems) == 1
    assert "are 22.05.8, but the cluster runs 25.11.7" in problems[0].what
    assert "slurm_bin" in problems[0].fix
    same = dataclasses.replace(caps, slurm_version="25.11.7", client_version="25.11.3")
    assert not [p for p in check_site(site, same) if p.where == "slurm_bin"]


def test_a_client_the_controller_refuses_is_named_with_its_version() -> None:
    from hpclaunch.errors import CommandFailed

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv == ("id", "-un"):
            return result(argv, out="root\n")
        if argv == ("sinfo", "--version"):
            return result(argv, out="slurm 25.11.7\n")
        # What a 25.11.7 scontrol says to a 22.05.8 slurmctld (seen on the test cluster).
        return result(
            argv, 1, err="slurm_load_ctl_conf error:Zero Bytes were transmitted or received\n"
        )

    with pytest.raises(CommandFailed) as info:
        discover(FakeRunner(answer))
    assert "the Slurm commands here are 25.11.7" in (info.value.hint or "")
