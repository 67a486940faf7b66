"""Issue 32 on the cluster: the idle guard stopping a job that holds its GPU and sleeps (told
to a real webhook server on loopback, whose URL holds shell characters), and a shell and a
forwarded port into a running job (from the login node; over SSH: test_ssh.py). The
notifications across a preemption are in test_sidecar_on_cluster.py (its preempted job)."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webhook import Webhook, webhook_server

from .conftest import (
    HPCLAUNCH,
    REPO,
    Cli,
    start_in_background,
    stop_by_ctrl_c,
    wait_running,
    wait_state,
)

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat]

VENV = str(REPO / ".venv")
STUBS = str(Path(__file__).resolve().parent / "stubs" / "nvml")


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with webhook_server() as server:
        yield server


def _submit(cli: Cli, tmp_path: Path, name: str, **fields: object) -> str:
    spec = {"name": f"it-{name}-{tmp_path.name[-6:]}", "project": "research", **fields}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(spec))
    out = cli("submit", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_the_idle_guard_stops_a_job_that_holds_its_gpu_and_sleeps(
    hpclaunch: Cli, tmp_path: Path, hook: Webhook
) -> None:
    hpclaunch.env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    saved = hpclaunch("notify", "add", "lab", input_text=hook.url + "\n")
    assert saved.returncode == 0, saved.stderr
    # The GPU sampler reads the NVML stand-in (the cluster's GPUs are fake), which says 0 %.
    hpclaunch.env.update(HPCLAUNCH_GPU_INTERVAL="1", HPCLAUNCH_TEST_NVML="idle")
    job = _submit(
        hpclaunch,
        tmp_path,
        "idle",
        command=["sleep", "600"],
        launcher="srun",
        venv=VENV,
        env={"PYTHONPATH": STUBS},
        resources={"gpus_per_node": 1, "time": "10", "mem": "100M"},
        idle={"notify_after": 0.05, "stop_after": 0.15},  # 3 s, then 9 s
        checkpoint={"signal_lead_time": 5},  # the checkpoint a sleeper never commits
        notify={"webhook": "lab"},
    )
    end = wait_state(hpclaunch, job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=120)
    assert (end["state"], end["exit_code"], end["restarts"]) == ("FAILED", 79, 0), end
    events = json.loads(hpclaunch("events", job, "--json").stdout)["ledger"]
    kinds = [e["event"] for e in events]
    assert "gpu_idle" in kinds
    assert kinds.index("gpu_idle") < kinds.index("idle_stop")
    stop = next(e for e in events if e["event"] == "idle_stop")
    assert "every GPU of the job below 5 %" in stop["why"]
    last = next(e for e in reversed(events) if e["event"] == "attempt_end")
    assert (last["reason"], last["requeued"]) == ("stopped_idle", False)
    assert "not requeued: every GPU of the job below 5 %" in hpclaunch.log(job)
    # Told once each, from the node; the URL's shell characters ran nothing.
    deadline = time.monotonic() + 30
    while [e for _, e in hook.events()].count("stopped_idle") < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    told = [e for j, e in hook.events() if j == job]
    assert told == ["started", "gpu_idle", "stopped_idle"], told
    assert all(b["hpclaunch"]["sent_from"].startswith("n") for b in hook.of_job(job))
    assert not (REPO / "pwned").exists()
    job_dir = Path(hpclaunch.submitted()[job]["job_dir"])
    assert not (job_dir / "pwned").exists()
    for path in (job_dir / "job.sbatch", job_dir / "events.jsonl", hpclaunch.history):
        assert hook.url.encode() not in path.read_bytes(), path
    assert hook.url not in hpclaunch.log(job)


def _serve_in_a_job(hpclaunch: Cli, tmp_path: Path) -> tuple[str, int]:
    """A job serving HTTP on a free port of its node (host networking: the nodes share the
    host's ports); its id and the port, once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "hello.txt").write_text("hello from inside the job\n")
    job = _submit(
        hpclaunch,
        tmp_path,
        "serve",
        command=["python3", "-m", "http.server", str(port), "--bind", "0.0.0.0"],
        workdir=str(tmp_path / "www"),
        resources={"time": "10", "mem": "100M"},
    )
    wait_running(job, timeout=60)
    return job, port


def test_forward_and_shell_reach_into_a_running_job(hpclaunch: Cli, shared_dir: Path) -> None:
    _forward_and_shell(hpclaunch, shared_dir)  # the job's directory: one the nodes see


def _forward_and_shell(hpclaunch: Cli, shared: Path) -> None:
    job, port = _serve_in_a_job(hpclaunch, shared)
    local = _free_port()
    forward = start_in_background(
        [HPCLAUNCH, "--site", "local", "forward", job, str(port), "--local", str(local)],
        hpclaunch.env,
    )
    try:
        body = _get(f"http://127.0.0.1:{local}/hello.txt", timeout=60)
        assert body == "hello from inside the job\n"
    finally:
        said = stop_by_ctrl_c(forward)
    assert f"forwarding 127.0.0.1:{local} to n" in said
    assert "forward stopped" in said
    # A command in the job's allocation, beside its running step (srun --overlap).
    ran = hpclaunch("shell", job, "--", "bash", "-c", "echo $SLURM_JOB_ID on $SLURMD_NODENAME")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().startswith(f"{job} on n")
    # An interactive shell, in a real terminal.
    said = _in_a_terminal(
        [HPCLAUNCH, "--site", "local", "shell", job],
        hpclaunch.env,
        b"echo in-$SLURM_JOB_ID\nexit\n",
    )
    assert f"in-{job}" in said
    hpclaunch("cancel", job)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, timeout: float) -> str:
    """GET ``url``, trying again until it answers (the forward and the server start)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return str(answer.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _in_a_terminal(argv: list[str], env: dict[str, str], typed: bytes) -> str:
    """Run ``argv`` on a pseudo-terminal, type ``typed`` once it prompts, and return what it
    printed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.chdir(REPO)
        os.execve(argv[0], argv, env)
    out = b""
    sent = False
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if not ready:
                if not sent and out:
                    os.write(fd, typed)
                    sent = True
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: the shell exited
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return out.decode(errors="replace")
