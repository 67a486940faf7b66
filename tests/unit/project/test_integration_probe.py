"""The integration suite's cluster probe: skip locally, fail under CI=true."""

from __future__ import annotations

import pytest

from hpclaunch.errors import ProgramNotFound
from hpclaunch.transport.base import CommandResult
from tests.integration.cluster import probe_cluster, require_cluster
from tests.unit.fakes import FakeRunner, result


def no_sinfo(argv: tuple[str, ...]) -> CommandResult:
    raise ProgramNotFound(argv[0])


def test_probe_lists_nodes() -> None:
    cluster, why = probe_cluster(FakeRunner(lambda argv: result(argv, out="n2\nn1\nn1\n")))
    assert cluster is not None
    assert cluster.nodes == ("n1", "n2")
    assert why == ""


def test_probe_reports_why_not() -> None:
    down = FakeRunner(lambda argv: result(argv, 1, err="sinfo: error: Unable to contact slurm"))
    assert probe_cluster(down) == (None, "sinfo exit code 1: sinfo: error: Unable to contact slurm")
    assert probe_cluster(FakeRunner(no_sinfo))[1] == "program 'sinfo' not found on PATH"


def test_missing_cluster_skips_locally() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"cluster\.sh up"):
        require_cluster(FakeRunner(no_sinfo), {})


def test_missing_cluster_fails_under_ci() -> None:
    with pytest.raises(pytest.fail.Exception, match="no Slurm cluster reachable"):
        require_cluster(FakeRunner(no_sinfo), {"CI": "true"})
