from __future__ import annotations

from pathlib import Path

from hpclaunch.ops.logtail import LogTail, attempt_logs


def test_attempt_logs_in_attempt_order_not_name_order(tmp_path: Path) -> None:
    for n in (10, 2, 0):
        (tmp_path / f"attempt-{n}.log").write_text("")
    (tmp_path / "slurm-5.out").write_text("")
    assert [p.name for p in attempt_logs(tmp_path)] == [
        "attempt-0.log",
        "attempt-2.log",
        "attempt-10.log",
    ]


def test_missing_log_dir_has_no_logs(tmp_path: Path) -> None:
    assert attempt_logs(tmp_path / "not-yet") == []
    assert LogTail(tmp_path / "not-yet").read_new() == []


def test_tail_returns_only_new_whole_lines_across_attempts(tmp_path: Path) -> None:
    tail = LogTail(tmp_path)
    first = tmp_path / "attempt-0.log"
    first.write_text("a\nb")
    assert tail.read_new() == ["a"]
    with first.open("a") as f:
        f.write("c\n")
    assert tail.read_new() == ["bc"]
    assert tail.read_new() == []
    (tmp_path / "attempt-1.log").write_text("after requeue\nno newline")
    assert tail.read_new() == ["after requeue"]
    assert tail.read_new(final=True) == ["no newline"]


def test_tail_survives_undecodable_bytes(tmp_path: Path) -> None:
    (tmp_path / "attempt-0.log").write_bytes(b"ok \xff\n")
    assert tail_lines(tmp_path) == ["ok \ufffd"]


def tail_lines(log_dir: Path) -> list[str]:
    return LogTail(log_dir).read_new()
