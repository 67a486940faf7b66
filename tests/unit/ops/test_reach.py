"""``hpclaunch shell`` and ``forward`` against the fake Slurm: which node, the srun step, and
a real forward of a real HTTP server through this machine (the cluster test reaches a
server inside a job, here and through the SSH test server)."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import hpclaunch
from hpclaunch.errors import BackendError, ConnectError
from hpclaunch.ops.reach import Forward
from hpclaunch.transport.local import LocalRunner
from tests.unit.fakes import FakeSlurm

Env = dict[str, str]


@pytest.fixture
def http_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"served {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_shell_is_a_step_of_the_job_on_its_node(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    slurm.new_job_states = ["RUNNING"]
    job = session.submit(
        {"name": "s", "command": ["sleep", "60"], "resources": {"nodes": 2}}, check=False
    )
    slurm.jobs[job.id].nodes = "n[3-4]"
    assert session.job(job.id).shell_argv() == [
        "srun",
        "--overlap",
        f"--jobid={job.id}",
        "--nodelist=n3",
        "-N1",
        "-n1",
        "--pty",
        "bash",
        "-l",
    ]
    assert session.job(job.id).shell_argv(node="n4", command=["nvidia-smi"])[-4:] == [
        "--nodelist=n4",
        "-N1",
        "-n1",
        "nvidia-smi",
    ]
    with pytest.raises(BackendError, match="node n9 is not one of job"):
        session.job(job.id).shell_argv(node="n9")
    slurm.jobs[job.id].states = ["PENDING"]
    with pytest.raises(BackendError, match="is PENDING, not running") as caught:
        session.job(job.id).shell_argv()
    assert "says when Slurm expects it to start" in (caught.value.hint or "")
    # Issue 45: an ended or unknown job was told to wait for its start.
    slurm.jobs[job.id].states = ["COMPLETED"]
    with pytest.raises(BackendError, match="has ended \\(COMPLETED\\)") as caught:
        session.job(job.id).shell_argv()
    assert "hpclaunch logs" in (caught.value.hint or "")
    with pytest.raises(BackendError, match="unknown to Slurm") as caught:
        session.job("99999").shell_argv()
    assert "starts" not in (caught.value.hint or "")


def test_a_forward_carries_http_both_ways_and_says_when_the_far_end_is_closed(
    http_server: int,
) -> None:
    forward = Forward("127.0.0.1", http_server, LocalRunner().open_tcp)
    port = forward.start()
    try:
        for path in ("/a", "/b"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
                assert answer.read() == f"served {path}".encode()
        assert forward.connections == 2
        taken = Forward("127.0.0.1", http_server, LocalRunner().open_tcp, local_port=port)
        with pytest.raises(ConnectError, match="give another port with --local"):
            taken.start()
    finally:
        forward.close()
    nowhere = Forward("127.0.0.1", 1, LocalRunner().open_tcp)
    port = nowhere.start()
    try:
        with pytest.raises(
            (ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError)
        ):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert nowhere.errors
        assert nowhere.errors[0].startswith("cannot connect to 127.0.0.1:1")
    finally:
        nowhere.close()


def test_a_forward_keeps_to_the_job_across_a_requeue(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    """Issue 45: forward stopped at a requeue instead of waiting for the next attempt."""
    slurm.new_job_states = ["RUNNING"]
    job = session.submit({"name": "f", "command": ["sleep", "60"]}, check=False)
    slurm.jobs[job.id].nodes = "n3"
    forward = session.job(job.id).forward(8888, local_port=0)
    try:
        assert (forward.node, forward.follow()) == ("n3", "running")
        slurm.jobs[job.id].states = ["PENDING"]  # requeued: its next attempt comes
        assert forward.follow() == "waiting"
        assert forward.node == "n3"
        slurm.jobs[job.id].states = ["RUNNING"]
        slurm.jobs[job.id].nodes = "n2"
        assert (forward.follow(), forward.node) == ("running", "n2")
        slurm.jobs[job.id].states = ["COMPLETED"]
        assert forward.follow() == "ended"
    finally:
        forward.close()
