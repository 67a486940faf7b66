"""Finding the Slurm cluster the integration tests run against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from hpclaunch.errors import TransportError
from hpclaunch.slurm.capabilities import slurm_release, version_said
from hpclaunch.transport.base import Runner

NO_CLUSTER = "no Slurm cluster reachable: start one with docker/slurm-cluster/cluster.sh up"


@dataclass(frozen=True)
class SlurmCluster:
    """What the probe found: the node names ``sinfo`` lists, and the Slurm version of the
    commands here (the test cluster's own: docker/slurm-cluster/cluster.sh)."""

    nodes: tuple[str, ...]
    version: str = "unknown"

    @property
    def release(self) -> tuple[int, int]:
        """``(25, 11)`` for 25.11.7: where Slurm's behaviour differs by release."""
        return slurm_release(self.version)


def probe_cluster(runner: Runner) -> tuple[SlurmCluster | None, str]:
    """Ask ``sinfo -h -o %n`` for the node names; return (cluster or None, why not)."""
    try:
        result = runner.run(["sinfo", "-h", "-o", "%n"], timeout=15)
    except TransportError as exc:
        return None, exc.message
    nodes = tuple(sorted({line.strip() for line in result.stdout.splitlines() if line.strip()}))
    if not result.ok or not nodes:
        detail = result.stderr.strip() or "sinfo listed no nodes"
        return None, f"sinfo exit code {result.returncode}: {detail}"
    version = version_said(runner.run(["sinfo", "--version"], timeout=15).stdout)
    return SlurmCluster(nodes, version), ""


def require_cluster(runner: Runner, env: Mapping[str, str]) -> SlurmCluster:
    """The reachable cluster; otherwise skip the test, or fail it when ``CI=true``."""
    cluster, why = probe_cluster(runner)
    if cluster is None:
        message = f"{NO_CLUSTER} ({why})"
        if env.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return cluster
