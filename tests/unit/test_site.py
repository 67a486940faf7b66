"""Site configs: the local cluster's file, lookup by name, and error texts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.errors import ConfigError

from .conftest import make_site


def test_local_site_matches_the_test_cluster(site: SiteConfig) -> None:
    # docker/slurm-cluster/etc/slurm.conf: ClusterName=hpclaunch, n[1-4] with CPUs=8 and
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
        "tiers": {"low": {"qos": "low", "preempt": True}},
    }
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError,
        match=r"tiers.low.preempt: unknown key 'preempt' \(did you "
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
        ({"quotas": {"vision": -1}}, ">= 0"),
        ({"partitions": []}, "partitions"),
    ],
)
def test_invalid_sites(fields: dict[str, object], words: str) -> None:
    with pytest.raises(Exception, match=words):
        make_site(**fields)
