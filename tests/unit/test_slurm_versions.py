"""What hpclaunch parses, on recorded real output of the Slurm versions built from source
(tests/unit/data/cluster-<version>/, docker/slurm-cluster/record-outputs.sh), beside the 22.05
recordings the other tests use. Differences from 22.05 seen in all of them: squeue -O
exit_code is "3:0" (22.05: the raw wait status, 768); squeue %b is "gres/gpu:4" (22.05:
"gres:gpu:4"); sinfo's "mixed-" (planned); "(null)" for unset plugins in scontrol show config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.slurm_text import _wait_status, parse_squeue
from hpclaunch.discover import discover
from hpclaunch.observe import JobState
from hpclaunch.queue import parse_queue
from hpclaunch.transport.base import CommandResult

from .fakes import FakeRunner, result

#: Recorded version -> the full version its scontrol show config says.
VERSIONS = {"24.11": "24.11.7", "25.11": "25.11.7", "26.05": "26.05.3"}
RECORDED_VERSIONS = [
    v for v in VERSIONS if (Path(__file__).parent / "data" / f"cluster-{v}").is_dir()
]


@pytest.fixture(params=RECORDED_VERSIONS)
def data(request: pytest.FixtureRequest) -> Path:
    return Path(__file__).parent / "data" / f"cluster-{request.param}"


def test_the_recorded_versions() -> None:
    assert RECORDED_VERSIONS == ["24.11", "25.11", "26.05"]


RECORDED = {
    ("scontrol", "show", "config"): "scontrol_show_config.txt",
    ("scontrol", "show", "partition", "--oneliner"): "scontrol_show_partition.txt",
    ("sinfo", "-h", "-N", "-o", "%N|%R|%G|%c|%T"): "sinfo_nodes.txt",
}


def test_squeue_status_with_code_signal_exit_codes(data: Path) -> None:
    infos = parse_squeue(
        (data / "squeue_status.txt").read_text(), {i: JobRef(i) for i in "1234"}, "gpu"
    )
    seen = {r.job_id: (i.state, i.exit_code, i.reason) for r, i in infos.items()}
    assert seen == {
        "1": (JobState.FAILED, 3, "NonZeroExitCode"),  # exit 3, printed "3:0"
        "2": (JobState.COMPLETED, 0, None),
        "3": (JobState.RUNNING, None, None),  # no exit status while it runs
        "4": (JobState.PENDING, None, "Resources"),
    }
    assert _wait_status("768") == (3, None)  # 22.05's raw wait status
    assert _wait_status("0:15") == (0, 15)


def test_the_queue_reads_typed_gres(data: Path) -> None:
    rows = {r.job_id: r for r in parse_queue((data / "squeue_queue.txt").read_text())}
    assert (rows["3"].state, rows["3"].gpus_per_node) == ("RUNNING", 2)
    assert (rows["4"].state, rows["4"].gpus_per_node, rows["4"].reason) == (
        "PENDING",
        4,
        "Resources",
    )


def test_discovery_of_a_cluster_without_accounting(data: Path) -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv == ("id", "-un"):
            return result(argv, out="root\n")
        for prefix, name in RECORDED.items():
            if argv[: len(prefix)] == prefix:
                return result(argv, out=(data / name).read_text())
        return result(argv, 1, err="sacctmgr: error: Problem talking to the database")

    caps = discover(FakeRunner(answer), now=lambda: 1.0)
    version = VERSIONS[data.name.removeprefix("cluster-")]
    assert (caps.slurm_version, caps.cluster, caps.max_array_size) == (version, "record", 1001)
    assert caps.slurmctld_parameters == ("preempt_send_user_signal",)
    assert caps.preempt_type == "preempt/none"  # printed "(null)"
    assert [(p.name, p.default, p.max_time) for p in caps.partitions] == [
        ("gpu", True, 3600),
        ("debug", False, 600),
    ]
    assert caps.accounting_problem is not None
