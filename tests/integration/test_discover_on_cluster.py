"""Capability discovery, ``site check`` and the pre-submit check on the real local cluster."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, Run

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]


@pytest.fixture
def fresh(hpclaunch: Run, tmp_path: Path) -> Run:
    """The CLI with an empty capability cache of its own."""
    hpclaunch.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return hpclaunch


def wrong_site(tmp_path: Path) -> Path:
    """A copy of site-configs/local.yaml with one mistake of each kind."""
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    gpu = data["partitions"][0]
    assert gpu["name"] == "gpu"
    gpu.update(max_time=120, gpus_per_node=8)
    data["partitions"][1]["name"] = "debugx"
    data["tiers"]["high"]["qos"] = "urgent"
    data["tiers"]["low"]["preemptible"] = False
    data["default_account"] = "physics"
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_site_show_reads_the_cluster_and_caches_it(fresh: Run, tmp_path: Path) -> None:
    shown = fresh("site", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    caps = json.loads(shown.stdout)
    version = subprocess.run(["scontrol", "--version"], capture_output=True, text=True).stdout
    assert caps["slurm_version"] in version
    assert caps["preempt_type"] == "preempt/qos"
    assert {p["name"] for p in caps["partitions"]} == {"gpu", "debug"}
    assert {q["name"] for q in caps["qos"]} >= {"low", "normal", "high", "critical"}
    cache = tmp_path / "cache" / "hpclaunch" / "hpclaunch.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert json.loads(cache.read_text())["discovered_at"] == caps["discovered_at"]
    again = json.loads(fresh("site", "show", "--json").stdout)
    assert again["discovered_at"] == caps["discovered_at"]  # served from the cache
    refreshed = json.loads(fresh("site", "show", "--json", "--refresh").stdout)
    assert refreshed["discovered_at"] > caps["discovered_at"]


def test_local_site_is_in_sync(fresh: Run) -> None:
    checked = fresh("site", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "matches cluster hpclaunch" in checked.stdout


def test_wrong_site_copy_names_each_mismatch(fresh: Run, tmp_path: Path) -> None:
    checked = fresh("--site", str(wrong_site(tmp_path)), "site", "check", "--json")
    assert checked.returncode == 1, checked.stderr
    problems = {p["where"]: p for p in json.loads(checked.stdout)["problems"]}
    assert set(problems) == {
        "partitions.gpu.max_time",
        "partitions.gpu.gpus_per_node",
        "partitions.debugx",
        "partitions.debug",
        "tiers.high.qos",
        "tiers.low.preemptible",
        "default_account",
        "site plan (sacctmgr)",  # e.g. tier high's QOS would have to be created
    }
    assert "MaxTime 01:00:00" in problems["partitions.gpu.max_time"]["what"]
    assert problems["default_account"]["allowed"] == sorted(problems["default_account"]["allowed"])
    assert "research" in problems["default_account"]["allowed"]


def test_submit_refuses_before_sbatch_what_the_cluster_would_reject(
    fresh: Run, tmp_path: Path, write_spec: Callable[..., Path]
) -> None:
    # The wrong site claims gpu allows 120 min and 8 GPUs per node: build_plan accepts it.
    spec = write_spec(command=["true"], resources={"time": 90, "gpus_per_node": 8, "mem": "100M"})
    site = str(wrong_site(tmp_path))
    refused = fresh("--site", site, "submit", str(spec))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "MaxTime 01:00:00" in refused.stderr
    assert "no node of partition gpu has gpu:8" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert fresh.submitted() == {}  # nothing reached sbatch
    dry = fresh("--site", site, "submit", "--dry-run", str(spec))
    assert dry.returncode == 2
    unchecked = fresh("--site", site, "submit", "--dry-run", "--no-check", str(spec))
    assert unchecked.returncode == 0, unchecked.stderr
    assert "--gres=gpu:8" in unchecked.stdout
