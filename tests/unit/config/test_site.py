"""Site configs: the local cluster's file, lookup by name, and error texts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.errors import ConfigError
from hpclaunch.planning.plan import SubmissionPlan, build_plan
from tests.unit.conftest import make_site, make_spec

REPO = Path(__file__).resolve().parents[3]


def test_local_site_matches_the_test_cluster(site: SiteConfig) -> None:
    # docker/slurm-cluster/etc/*/slurm.conf: ClusterName=hpclaunch, n[1-4] with CPUs=8 and
    # Gres=gpu:4, partitions gpu (default, MaxTime=60) and debug (MaxTime=10).
    assert site.name == "hpclaunch"
    assert [p.name for p in site.partitions] == ["gpu", "debug"]
    gpu, debug = site.partitions
    assert (gpu.default, gpu.gpus_per_node, gpu.cpus_per_node, gpu.gpu_type) == (True, 4, 8, None)
    assert gpu.max_time == "01:00:00"
    assert debug.max_time_seconds == 600
    assert {t: p.qos for t, p in site.tiers.items()} == {
        "critical": "critical",
        "high": "high",
        "medium": "normal",
        "low": "low",
    }
    assert [t for t, p in site.tiers.items() if p.preemptible] == ["low"]
    assert site.tiers["low"].grace == 10
    assert site.default_account == "research"
    assert site.gres_style == "gres"
    assert site.job_root == "~/.hpclaunch/jobs"


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        yaml.safe_dump({"name": "mine", "partitions": [{"name": "p", "cpus_per_node": 2}]})
    )
    site = load_site(str(path))
    assert site.name == "mine"
    assert site.partitions[0].max_time is None  # no limit


def test_unknown_name_lists_known_sites() -> None:
    with pytest.raises(ConfigError, match="unknown site 'nope'") as info:
        load_site("nope")
    assert info.value.hint is not None
    assert "local" in info.value.hint


def test_unknown_key_in_a_partition_lists_partition_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump({"name": "s", "partitions": [{"name": "p", "cpus_per_node": 2, "gpus": 1}]})
    )
    with pytest.raises(ConfigError) as info:
        load_site(path)
    text = str(info.value)
    assert str(path) in text
    assert "partitions[0].gpus: unknown key 'gpus'" in text
    assert "valid keys at partitions[0]: name, gpu_type, gpus_per_node, cpus_per_node" in text


def test_unknown_key_in_a_tier_lists_tier_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    data = {
        "name": "s",
        "partitions": [{"name": "p", "cpus_per_node": 2}],
        "tiers": {"low": {"qos": "low", "preemptable": True}},
    }
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError,
        match=r"tiers.low.preemptable: unknown key 'preemptable' \(did you "
        r"mean 'preemptible'\?\); valid keys at tiers.low: qos, partition",
    ):
        load_site(path)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {"partitions": [{"name": "a", "cpus_per_node": 1}, {"name": "a", "cpus_per_node": 1}]},
            "unique",
        ),
        (
            {
                "partitions": [
                    {"name": "a", "cpus_per_node": 1, "default": True},
                    {"name": "b", "cpus_per_node": 1, "default": True},
                ]
            },
            "at most one",
        ),
        ({"tiers": {"low": {"qos": "low", "partition": "nope"}}}, "not among the partitions"),
        ({"gres_style": "gpus"}, "gres_style"),
        ({"quotas": {"vision": -1, "nlp": 2}}, r"GPUs must be >= 0 \(projects: vision\)"),
        (
            {"prices": {"gpu_hour": 1, "gpu_types": {"a100": -2.0, "h100": 3.0}}},
            r"prices must be >= 0 \(GPU types: a100\)",
        ),
        ({"partitions": []}, "partitions"),
        ({"tiers": {"low": {"qos": "low", "usage_factor": -0.5}}}, "tiers.low.usage_factor"),
        ({"overquota": {"usage_factor": -1}}, "overquota.usage_factor"),
    ],
)
def test_invalid_sites(fields: dict[str, object], words: str) -> None:
    with pytest.raises(Exception, match=words):
        make_site(**fields)


def test_usage_factors_half_for_preemptible_work_unless_set() -> None:
    """What fair share is charged per QOS: preemptible tiers and over-quota work half by
    default, other tiers as the admins set them (1 here), a tier's own factor as given."""
    site = load_site("local")
    assert site.usage_factor_of("low") == 0.5
    assert site.usage_factor_of("overquota") == 0.5
    assert site.usage_factor_of("normal") == 1.0
    assert site.tiers["medium"].charged_factor is None  # site plan leaves it alone
    assert site.usage_factor_of("someone-elses-qos") == 1.0
    tiers = {"low": {"qos": "low", "preemptible": True, "usage_factor": 0}}
    own = make_site(tiers=tiers, overquota={"usage_factor": 0.25}, quotas={"p": 1})
    assert (own.usage_factor_of("low"), own.usage_factor_of("overquota")) == (0.0, 0.25)
    assert make_site(tiers=tiers).usage_factor_of("overquota") == 1.0  # no quotas: no such QOS


def _flags(plan: SubmissionPlan) -> dict[str, str | None]:
    return dict(plan.sbatch_options)


@pytest.mark.parametrize("name", ["example-university", "example-national"])
def test_example_sites_are_labelled_examples(name: str) -> None:
    first = (REPO / "site-configs" / f"{name}.yaml").read_text().splitlines()[0]
    assert first.startswith("# EXAMPLE ONLY")
    assert load_site(name).name.endswith("-example")


def test_example_university_plans() -> None:
    site = load_site("example-university")
    one = _plan(site, resources={"gpus_per_node": 1, "gpu_type": "A100", "time": "12:00:00"})
    assert (one["--partition"], one["--qos"], one["--gres"]) == ("gpu", "short", "gpu:a100:1")
    two = _plan(site, tier="high", resources={"nodes": 2, "gpus_per_node": 4, "gpu_type": "a100"})
    assert (two["--partition"], two["--qos"], two["--nodes"], two["--gres"]) == (
        "gpu",
        "medium",
        "2",
        "gpu:a100:4",
    )
    assert "--account" not in two  # no default account: Slurm uses the user's
    mig = _plan(site, resources={"gpus_per_node": 1, "gpu_type": "1g.10gb"})
    assert (mig["--partition"], mig["--gres"]) == ("mig", "gpu:1g.10gb:1")
    cpu = _plan(site, resources={"cpus_per_task": 4})
    assert cpu["--partition"] == "cpu"
    assert "--gres" not in cpu


def test_example_national_plans() -> None:
    site = load_site("example-national")
    one = _plan(site, project="m1234_g", resources={"gpus_per_node": 1})
    assert "--partition" not in one  # Perlmutter: selected by -C gpu, not by partition
    assert (one["--constraint"], one["--qos"], one["--gpus-per-node"], one["--account"]) == (
        "gpu",
        "regular",
        "1",
        "m1234_g",
    )
    two = _plan(
        site,
        tier="low",
        resources={"nodes": 2, "gpus_per_node": 4, "gpu_type": "a100", "constraint": "hbm80g"},
    )
    assert (two["--constraint"], two["--qos"], two["--nodes"], two["--gpus-per-node"]) == (
        "gpu&hbm80g",
        "preempt",
        "2",
        "a100:4",
    )
    assert "--requeue" in two
    plan = build_plan(make_spec(), site, submission_id="s1", home="/h")
    assert plan.scratch_var == ("PSCRATCH", "/hpclaunch")
    assert plan.module_system == "lmod"


def _plan(site: SiteConfig, **fields: object) -> dict[str, str | None]:
    return _flags(build_plan(make_spec(**fields), site, submission_id="s1", home="/h", cwd="/c"))


def test_module_system_and_scratch_are_checked() -> None:
    with pytest.raises(Exception, match="module_system is none"):
        make_site(modules=["gcc"])
    assert make_site(module_system="lmod", modules=["gcc"]).modules == ("gcc",)
    with pytest.raises(Exception, match="scratch"):
        make_site(scratch="relative/dir")
    with pytest.raises(Exception, match="select_by constraint needs a constraint"):
        make_site(partitions=[{"name": "p", "cpus_per_node": 1, "select_by": "constraint"}])
