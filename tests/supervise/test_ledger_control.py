"""The ledger and the control files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch.supervise import control
from hpclaunch.supervise.ledger import Ledger, read_ledger


def test_ledger_appends_one_object_per_line(tmp_path: Path) -> None:
    Ledger(tmp_path, 0).append("attempt_start", nodes=["n1"])
    Ledger(tmp_path, 1).append("attempt_end", reason="success")
    with (tmp_path / "events.jsonl").open("a") as fh:
        fh.write('{"event": "torn')  # a node died mid-write
    events = read_ledger(tmp_path)
    assert [(e["event"], e["attempt"]) for e in events] == [
        ("attempt_start", 0),
        ("attempt_end", 1),
    ]
    assert events[0]["nodes"] == ["n1"]
    assert oct((tmp_path / "events.jsonl").stat().st_mode & 0o777) == "0o600"
    assert read_ledger(tmp_path / "nothing") == []


def test_control_files(tmp_path: Path) -> None:
    ctl = control.prepare(tmp_path / "control")
    assert oct(ctl.stat().st_mode & 0o777) == "0o700"
    control.write_json_atomic(ctl / jobdir.REQUEST, {"reason": "manual"})
    control.write_json_atomic(ctl / jobdir.PROGRESS, {"step": 7})
    assert json.loads((ctl / jobdir.REQUEST).read_text()) == {"reason": "manual"}
    assert control.read_step(ctl / jobdir.PROGRESS) == 7
    assert [p for p in os.listdir(ctl) if p.startswith(".")] == []  # no temp file left
    removed = control.clear_stale(ctl)
    assert removed == [(jobdir.REQUEST, {"reason": "manual"})]
    assert not (ctl / jobdir.REQUEST).exists()
    assert (ctl / jobdir.PROGRESS).exists()  # progress survives attempts
