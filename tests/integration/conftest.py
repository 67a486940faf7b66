"""Fixtures for tests against a real Slurm cluster (docker/slurm-cluster/).

Mark such test modules with ``pytestmark = pytest.mark.slurm``. Without a reachable cluster
the ``slurm_cluster`` fixture skips them locally, and fails them under ``CI=true``: in CI a
missing cluster is a broken setup, not a reason to pass.
"""

from __future__ import annotations

import os

import pytest

from hpclaunch.transport.local import LocalRunner

from .cluster import SlurmCluster, require_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The reachable cluster (``.nodes``); skips, or fails under CI=true, without one."""
    return require_cluster(LocalRunner(), os.environ)
