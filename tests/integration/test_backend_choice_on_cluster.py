"""Which backend ``auto`` takes on the running cluster, and what ``--backend pyslurm`` says
where it cannot work. On the 25.11 cluster with pyslurm 25.11 installed, auto takes pyslurm;
on the 22.05 leg of scripts/test the same venv holds a pyslurm built for 25.11, which must be
refused naming both releases (a 25.11 libslurm gets only "Zero Bytes were transmitted or
received" from a 22.05 slurmctld)."""

from __future__ import annotations

import importlib.util
import subprocess

import pytest

from .conftest import Run

pytestmark = [pytest.mark.slurm, pytest.mark.compat]


def releases() -> tuple[str, str | None]:
    """(the cluster's Slurm major.minor, pyslurm's or None when not installed)."""
    said = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=True)
    cluster = ".".join(said.stdout.split()[-1].split(".")[:2])
    if importlib.util.find_spec("pyslurm") is None:
        return cluster, None
    import pyslurm

    return cluster, ".".join(pyslurm.__version__.split(".")[:2])


def test_auto_says_which_backend_it_took_and_why(hpclaunch: Run) -> None:
    cluster, built = releases()
    result = hpclaunch("--backend", "auto", "site", "check")
    line = next(x for x in result.stdout.splitlines() if x.startswith("backend 'auto'"))
    if built == cluster:
        assert "pyslurm: built for the cluster's Slurm (pyslurm " in line
    elif built is None:
        assert "cli: pyslurm not usable (the pyslurm backend needs the Python package" in line
    else:
        assert f"cli: pyslurm not usable (pyslurm is built for Slurm {built}, but the " in line
        assert f"cluster runs Slurm {cluster}." in line


def test_pyslurm_for_another_release_is_refused_naming_both(hpclaunch: Run) -> None:
    cluster, built = releases()
    result = hpclaunch("--backend", "pyslurm", "site", "check")
    if built == cluster:
        assert result.returncode == 0, result.stderr
        assert f"backend 'pyslurm' (from the --backend option): pyslurm: pyslurm {built}." in (
            result.stdout
        )
        return
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    if built is None:
        assert "needs the Python package 'pyslurm', which is not installed" in result.stderr
    else:
        assert f"pyslurm is built for Slurm {built}, but the cluster runs Slurm {cluster}." in (
            result.stderr
        )
        assert f"'pyslurm=={cluster}.*'" in result.stderr
    assert "--backend cli" in result.stderr
