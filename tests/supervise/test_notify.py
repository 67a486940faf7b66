"""Notifications from inside the job: the ledger's events as notices, sent once through the
job's outbox to a real HTTP server on loopback, by the sidecar, or later by whoever flushes
the outbox when the node could not reach the webhook."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.notify.message import MAX_TAIL_CHARS, Notice
from hpclaunch.notify.outbox import Outbox, read_config
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.notices import notice_of
from hpclaunch.supervise.sidecar import Sidecar, SidecarConfig
from hpclaunch.transport.local import LocalRunner
from tests.unit.fakes import FakeRunner, result
from tests.webhook import Webhook, webhook_server

REPO = Path(__file__).resolve().parents[2]
TRAINER = str(Path(__file__).with_name("trainer.py"))
ENV = {"SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "fit", "SLURM_GPUS_ON_NODE": "2"}


@pytest.fixture
def hook() -> Any:
    with webhook_server() as server:
        yield server


def _config(tmp_path: Path, hook: Webhook, events: list[str] | None = None) -> str:
    path = tmp_path / "notify" / "config.json"
    path.parent.mkdir(mode=0o700)
    from hpclaunch.jobspec.notify import NOTICE_EVENTS

    wanted = events or list(NOTICE_EVENTS)
    data = {"webhook": hook.url, "email": None, "smtp": None, "events": wanted}
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return str(path)


def test_ledger_events_become_notices() -> None:
    start = notice_of({"event": "attempt_start", "attempt": 0, "nodes": ["n1", "n2"]}, ENV)
    assert start is not None
    assert (start.event, start.key, start.summary) == ("started", "start-0", "started on n1, n2")
    resumed = notice_of(
        {"event": "attempt_start", "attempt": 2, "nodes": ["n3"], "progress_step": 40}, ENV
    )
    assert resumed is not None
    assert (resumed.event, resumed.summary) == (
        "resumed",
        "attempt 2 started on n3, resuming from step 40",
    )
    preempted = notice_of(
        {
            "event": "attempt_end",
            "attempt": 1,
            "reason": "preempted",
            "requeued": True,
            "last_step": 9,
        },
        ENV,
    )
    assert preempted is not None
    assert (preempted.event, preempted.key) == ("preempted", "preempted-1")
    # A time limit requeued: the job goes on, nobody is told.
    assert (
        notice_of({"event": "attempt_end", "reason": "time_limit", "requeued": True}, ENV) is None
    )
    # A failure its retry: policy requeues, an admin's requeue, a resize: told (issue 45).
    retried = notice_of(
        {"event": "attempt_end", "attempt": 0, "reason": "user_error", "requeued": True,
         "exit_code": 3, "retry": 1, "retry_wait": 20.0, "last_step": 4, "tail": ["boom"]},
        ENV,
    )  # fmt: skip
    assert retried is not None
    assert (retried.event, retried.key) == ("failed", "retried-0")
    assert retried.summary == (
        "failed (user_error, exit code 3) at step 4; retry 1 starts in 20 s (its retry: policy)"
    )
    requeued = notice_of(
        {"event": "attempt_end", "attempt": 2, "reason": "requeued", "requeued": True}, ENV
    )
    assert requeued is not None
    assert (requeued.event, requeued.key) == ("preempted", "requeued-2")
    assert requeued.summary.startswith("requeued by Slurm (scontrol requeue")
    resized = notice_of(
        {"event": "attempt_end", "attempt": 1, "reason": "resized", "requeued": True,
         "from_nodes": 1, "to_nodes": 2, "last_step": 30},
        ENV,
    )  # fmt: skip
    assert resized is not None
    assert resized.summary == "stopped at step 30 to resize from 1 to 2 nodes; requeued"
    assert (resized.facts["from_nodes"], resized.facts["to_nodes"]) == (1, 2)
    assert (
        notice_of({"event": "attempt_end", "reason": "cancelled", "requeued": False}, ENV) is None
    )
    history = [
        {"event": "attempt_start", "attempt": 0, "time": 100.0},
        {"event": "attempt_end", "attempt": 0, "time": 1900.0},
        {"event": "attempt_start", "attempt": 1, "time": 2000.0},
        {"event": "attempt_end", "attempt": 1, "time": 3800.0},
    ]
    done = notice_of(
        {"event": "attempt_end", "attempt": 1, "reason": "success", "requeued": False},
        ENV,
        history=lambda: history,
    )
    assert done is not None
    assert (done.event, done.key) == ("completed", "end")
    assert done.summary == "completed after 2 attempts, 1:00:00, 2.00 GPU-hours"
    assert done.facts["gpu_hours"] == 2.0


def test_a_failures_notice_carries_a_bounded_log_tail() -> None:
    huge = [f"line {i} " + "x" * 5000 for i in range(500)] + ["ValueError: boom\x1b[31m"]
    failed = notice_of(
        {
            "event": "attempt_end",
            "attempt": 0,
            "reason": "user_error",
            "requeued": False,
            "exit_code": 1,
            "error_line": "ValueError: boom",
            "tail": huge,
        },
        ENV,
    )
    assert failed is not None
    assert failed.summary == "failed (user_error, exit code 1): ValueError: boom"
    assert failed.details[-1] == "ValueError: boom [31m"  # no control characters
    assert sum(len(x) + 1 for x in failed.details) <= MAX_TAIL_CHARS + 1
    assert all(len(x) <= 300 for x in failed.details)
    assert len(failed.webhook_json("n1")) < 8000


def test_a_notice_goes_out_once_and_one_the_node_could_not_send_goes_from_the_login_node(
    tmp_path: Path, hook: Webhook
) -> None:
    box = Outbox.of_job(LocalRunner(), _config(tmp_path, hook))
    assert box is not None
    notice = Notice("start-0", "started", "77", "fit", "started on n1")
    sent = box.deliver(notice, "n1")
    assert sent is not None
    assert sent.ok
    assert box.deliver(notice, "n1") is None  # made before: not again
    assert hook.events() == [("77", "started")]
    assert hook.taken[0]["text"] == "hpclaunch: job 77 (fit): started on n1"
    assert hook.taken[0]["hpclaunch"]["sent_from"] == "n1"
    # The node cannot reach the webhook: the notice waits in the outbox, said why.
    hook.refuse_from = ("n1",)
    end = Notice("end", "failed", "77", "fit", "failed")
    refused = box.deliver(end, "n1")
    assert refused is not None
    assert refused.why == "webhook: HTTP 503"
    assert box.pending() == ["77.end"]
    assert hook.url not in json.dumps(
        [e for e in (tmp_path / "notify").rglob("*") if e.is_file() and e.name != "config.json"],
        default=str,
    )
    # Several login-node commands flush at once: it goes out exactly once, from one of them.
    hook.refuse_from = ()
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.extend(box.flush("login"))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert hook.events() == [("77", "started"), ("77", "failed")]
    assert [s.ok for s in results] == [True]
    assert box.pending() == []
    assert box.sent()["77.end"]["from"] == "login"
    assert box.flush("login") == []


def test_events_the_job_does_not_want_are_not_sent(tmp_path: Path, hook: Webhook) -> None:
    box = Outbox.of_job(LocalRunner(), _config(tmp_path, hook, events=["failed"]))
    assert box is not None
    assert box.deliver(Notice("start-0", "started", "77", "fit", "started"), "n1") is None
    assert hook.taken == []
    config = read_config(LocalRunner(), str(tmp_path / "notify" / "config.json"))
    assert config is not None
    assert config.events == ("failed",)


def test_the_sidecar_tells_the_start_and_the_failure_with_its_tail(
    tmp_path: Path, hook: Webhook
) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), **ENV)
    env.pop("SLURM_JOB_NODELIST", None)
    env["HPCLAUNCH_NOTIFY"] = _config(tmp_path, hook)
    env["HPCLAUNCH_JOB_DIR"] = str(tmp_path)
    log = tmp_path / "attempt-0.log"
    log.touch()
    config = SidecarConfig(
        launcher="srun",
        command=(sys.executable, TRAINER, "--fail"),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        log_path=log,
        stop_timeout=1.0,
    )
    scontrol = FakeRunner(lambda argv: result(argv))
    with log.open("ab") as out:
        fd = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            code = Sidecar(config, scontrol).run()
        finally:
            os.dup2(fd, 1)
            os.close(fd)
    assert code == 1
    assert hook.events() == [("77", "started"), ("77", "failed")]
    failed = hook.taken[1]
    assert failed["text"].startswith("hpclaunch: job 77 (fit): failed (user_error, exit code 1)")
    assert "ValueError: boom at step 3" in failed["text"]
    assert failed["hpclaunch"]["exit_code"] == 1
    kinds = [e["event"] for e in read_ledger(tmp_path)]
    assert kinds[0] == "attempt_start"
    assert kinds[-1] == "attempt_end"
    assert (tmp_path / "notify" / "sent" / "77.end").exists()


class _SmtpServer:
    """Just enough SMTP on loopback to take one mail (RFC 5321's commands, no extensions)."""

    def __init__(self) -> None:
        import socket

        self.mails: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"220 test ESMTP\r\n")
            while line := lines.readline():
                verb = line[:4].upper()
                if verb == b"DATA":
                    conn.sendall(b"354 go on\r\n")
                    body = []
                    while (data := lines.readline()) not in (b".\r\n", b""):
                        body.append(data.decode())
                    self.mails.append("".join(body))
                    conn.sendall(b"250 taken\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")


def test_a_notice_by_mail_through_smtp(tmp_path: Path) -> None:
    from hpclaunch.notify.send import NotifyConfig, send_notice

    server = _SmtpServer()
    config = NotifyConfig(None, "me@uni.edu", f"127.0.0.1:{server.port}", ("failed",))
    notice = Notice("end", "failed", "77", "fit", "failed (user_error, exit code 1)", ("boom",))
    assert send_notice(config, notice, "n1").ok
    server.thread.join(timeout=5)
    (mail,) = server.mails
    assert "Subject: [hpclaunch] job 77 (fit): failed" in mail
    assert "To: me@uni.edu" in mail
    assert "hpclaunch: job 77 (fit): failed (user_error, exit code 1)" in mail
    server.sock.close()
    down = send_notice(config, notice, "n1")  # nobody listens now
    assert not down.ok
    assert down.why.startswith(f"mail: SMTP 127.0.0.1:{server.port}: ")
