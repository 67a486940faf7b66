"""The login node's Slurm commands on the real cluster: ``site check`` names the release of
the commands PATH finds when it is not the cluster's, and a site's ``slurm_bin`` makes
hpclaunch, and the jobs it submits (their srun, the sidecar), use the cluster's own."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hpclaunch.transport.base import SLURM_COMMANDS

from .cluster import SlurmCluster
from .conftest import REPO, Cli, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat]


def _decoys(directory: Path, script: str) -> Path:
    """A directory with one shell script per Slurm command, first on a test's PATH."""
    directory.mkdir()
    for name in SLURM_COMMANDS:
        path = directory / name
        path.write_text(f"#!/bin/sh\n{script.replace('NAME', name)}\n")
        path.chmod(0o755)
    return directory


def _cli(tmp_path: Path, site: dict[str, object], decoys: Path) -> Cli:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site))
    cli = Cli(tmp_path / "state", site=str(path))
    venv_bin = str(Path(sys.executable).parent)
    cli.env["PATH"] = f"{decoys}:{venv_bin}:{os.environ['PATH']}"
    cli.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # no capabilities cached by others
    return cli


def _local_site() -> dict[str, object]:
    site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    assert isinstance(site, dict)
    return site


def test_commands_of_another_release_are_named_by_site_check(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    # PATH finds commands that say they are another release (and otherwise work).
    real = Path(shutil.which("sinfo") or "sinfo").resolve().parent
    other = "slurm-wlm 21.08.8"  # a release none of the test clusters runs
    decoys = _decoys(
        tmp_path / "other-slurm",
        f'[ "$1" = --version ] && {{ echo "{other}"; exit 0; }}; exec {real}/NAME "$@"',
    )
    check = _cli(tmp_path, _local_site(), decoys)("site", "check")
    assert check.returncode == 1, check.stdout + check.stderr
    said = other.split()[-1]
    assert f"commands on this machine: {said}" in check.stdout
    assert (
        f"the Slurm commands found on PATH are {said}, but the cluster runs "
        f"{slurm_cluster.version}" in check.stdout
    ), check.stdout


def test_slurm_bin_is_used_by_hpclaunch_and_inside_its_jobs(
    slurm_cluster: SlurmCluster, tmp_path: Path, write_spec: Callable[..., Path]
) -> None:
    # Every Slurm command PATH finds first fails: only slurm_bin's can make this work.
    real = Path(shutil.which("sinfo") or "sinfo").resolve().parent
    decoys = _decoys(
        tmp_path / "broken-slurm", 'echo "decoy NAME: not the cluster\'s" >&2; exit 97'
    )
    cli = _cli(tmp_path, {**_local_site(), "slurm_bin": str(real)}, decoys)
    check = cli("site", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"commands on this machine: {slurm_cluster.version}" in check.stdout
    # A job under the sidecar: it starts the command with srun, which the job's PATH (the
    # submitter's, decoys first) would take from the decoys without slurm_bin.
    spec = write_spec(
        command=["bash", "-c", 'echo "ran on $(hostname) with $(command -v srun)"'],
        launcher="srun",
        resources={"nodes": 2, "time": "00:05:00", "mem": "100M"},
    )
    submitted = cli("submit", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert wait_state(cli, job_id, {"COMPLETED", "FAILED", "CANCELLED"}, 90)["state"] == "COMPLETED"
    log = cli.log(job_id)
    assert log.count(f"with {real}/srun") == 2, log  # one task per node
    assert "decoy" not in log
