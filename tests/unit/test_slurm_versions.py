"""What hpclaunch parses, on recorded real output of Slurm 25.11.7 (tests/unit/data/cluster-
25.11/, docker/slurm-cluster/record-outputs.sh), beside the 22.05 recordings the other tests
use. Differences seen: squeue -O exit_code is "3:0" (22.05: the raw wait status, 768);
squeue %b is "gres/gpu:4" (22.05: "gres:gpu:4"); sinfo's "mixed-" (planned)."""

from __future__ import annotations

from pathlib import Path

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.slurm_text import _wait_status, parse_squeue
from hpclaunch.discover import discover
from hpclaunch.observe import JobState
from hpclaunch.queue import parse_queue
from hpclaunch.transport.base import CommandResult

from .fakes import FakeRunner, result

DATA = Path(__file__).parent / "data" / "cluster-25.11"
RECORDED = {
    ("scontrol", "show", "config"): "scontrol_show_config.txt",
    ("scontrol", "show", "partition", "--oneliner"): "scontrol_show_partition.txt",
    ("sinfo", "-h", "-N", "-o", "%N|%R|%G|%c|%T"): "sinfo_nodes.txt",
}


def test_squeue_status_with_25_11_exit_codes() -> None:
    infos = parse_squeue(
        (DATA / "squeue_status.txt").read_text(), {i: JobRef(i) for i in "1234"}, "gpu"
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


def test_the_queue_reads_25_11_gres() -> None:
    rows = {r.job_id: r for r in parse_queue((DATA / "squeue_queue.txt").read_text())}
    assert (rows["3"].state, rows["3"].gpus_per_node) == ("RUNNING", 2)
    assert (rows["4"].state, rows["4"].gpus_per_node, rows["4"].reason) == (
        "PENDING",
        4,
        "Resources",
    )


def test_discovery_of_a_25_11_cluster_without_accounting() -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv == ("id", "-un"):
            return result(argv, out="root\n")
        for prefix, name in RECORDED.items():
            if argv[: len(prefix)] == prefix:
                return result(argv, out=(DATA / name).read_text())
        return result(argv, 1, err="sacctmgr: error: Problem talking to the database")

    caps = discover(FakeRunner(answer), now=lambda: 1.0)
    assert (caps.slurm_version, caps.cluster, caps.max_array_size) == ("25.11.7", "record", 1001)
    assert caps.slurmctld_parameters == ("preempt_send_user_signal",)
    assert caps.preempt_type == "preempt/none"  # printed "(null)" by 25.11
    assert [(p.name, p.default, p.max_time) for p in caps.partitions] == [
        ("gpu", True, 3600),
        ("debug", False, 600),
    ]
    assert caps.accounting_problem is not None
