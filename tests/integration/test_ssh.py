"""The CLI over SSH, against real OpenSSH servers in front of the local Slurm cluster.

Each server (tests/integration/sshd.py) runs on a loopback port and serves ``hpcuser``, so
jobs run as hpcuser from /home/hpcuser (which the nodes share). The client side is the real
``hpclaunch`` console script with its own ssh config (HPCLAUNCH_SSH_CONFIG), known_hosts and
key, and no ssh-agent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hpclaunch.errors import ConnectionDropped
from hpclaunch.store.history import find_record, history_path, recent_submissions
from hpclaunch.transport.ssh import SSHRunner
from hpclaunch.transport.sshconfig import resolve_target

from .conftest import HPCLAUNCH, REPO, start_in_background, stop_by_ctrl_c
from .linkcut import (
    CuttingProxy,
    cut_points,
    jobs_with,
    link_cut_trial,
    make_tree,
    proxy_hosts,
    uncut_bytes,
)
from .sshd import HOME, Client, Sshd, fingerprint_of, keygen, public_dir

pytestmark = [pytest.mark.slurm, pytest.mark.ssh, pytest.mark.compat]


@pytest.fixture(scope="module")
def key_dir() -> Iterator[Path]:
    path = public_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def client_key(key_dir: Path) -> str:
    return keygen(key_dir / "id_ed25519")


@pytest.fixture(scope="module")
def server(slurm_cluster: object, client_key: str) -> Iterator[Sshd]:
    sshd = Sshd([client_key])
    yield sshd
    sshd.stop()


@pytest.fixture
def client(key_dir: Path, server: Sshd, tmp_path: Path) -> Iterator[Client]:
    """A client whose known_hosts knows ``server`` as alias ``cluster``."""
    c = Client.of(server, key_dir / "id_ed25519", tmp_path)
    yield c
    history = history_path({"XDG_DATA_HOME": str(tmp_path / "state")})
    jobs = [r.job_id for r in recent_submissions(limit=sys.maxsize, path=history)]
    if jobs:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False)
    shutil.rmtree(c.job_root_top, ignore_errors=True)


def spec(path: Path, command: list[str], **fields: object) -> Path:
    data = {"name": f"ssh-{uuid.uuid4().hex[:6]}", "project": "research", "command": command}
    data["resources"] = {"time": "00:05:00", "mem": "100M"}
    data.update(fields)
    path.write_text(yaml.safe_dump(data))
    return path


def submit(client: Client, spec_path: Path, *args: str, cwd: Path = REPO) -> str:
    result = client("submit", str(spec_path), *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def wait_done(client: Client, job_id: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        out = client("status", job_id, "--json")
        assert out.returncode == 0, out.stderr
        state = str(yaml.safe_load(out.stdout)[0]["state"])
        if state in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}:
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.3)


def test_submit_status_logs_cancel_over_ssh(client: Client, tmp_path: Path) -> None:
    job = submit(client, spec(tmp_path / "a.yaml", ["bash", "-c", "echo hi from $USER; sleep 1"]))
    assert wait_done(client, job) == "COMPLETED"
    logs = client("logs", job)
    assert logs.returncode == 0, logs.stderr
    assert "hi from hpcuser" in logs.stdout  # ran as the SSH user, log read over SFTP
    history = history_path({"XDG_DATA_HOME": str(client.dir / "state")})
    record = find_record(job_id=job, path=history)  # the history lives on the laptop
    assert record is not None
    assert record.user == "hpcuser"  # the SSH login name: Slurm's user
    assert record.job_dir.startswith(f"{client.job_root_top}/jobs/")  # the remote ~
    # Its report, read through the link (sacct there, its files over SFTP; no server).
    report = client("report", job, "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert (data["state"], len(data["attempts"])) == ("COMPLETED", 1)
    assert data["usage"]["ran_s"] >= 1
    assert data["usage"]["gpu_hours"] == 0  # a CPU job
    page = tmp_path / "report.html"
    assert client("report", job, "--html", str(page)).returncode == 0
    assert f"Job {job}" in page.read_text()  # written on the laptop
    # Slurm's estimate, the script sent on sbatch --test-only's stdin over the link.
    estimate = client("estimate", str(tmp_path / "a.yaml"), "--json")
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["slurm"]["start"]

    # Long enough to be cancelled however slow the link (with 5 s it had ended first on the
    # side host under load: clean-clone run 24); the cancel ends it.
    sleeper = submit(client, spec(tmp_path / "b.yaml", ["sleep", "300"]))
    cancel = client("cancel", sleeper)
    assert cancel.returncode == 0, cancel.stderr
    assert wait_done(client, sleeper) == "CANCELLED"


def test_forward_and_shell_reach_into_a_job_through_the_login_node(
    client: Client, tmp_path: Path
) -> None:
    """Issue 32: ``forward`` from the laptop opens each connection from the login node (a
    direct-tcpip channel of the SSH link) to the job's node; ``shell`` runs its step there
    through the system's ssh with hpclaunch's ssh config."""
    import socket
    import urllib.request

    def free_port() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    port, local = free_port(), free_port()
    serve = ["python3", "-m", "http.server", str(port), "--bind", "0.0.0.0"]
    job = submit(client, spec(tmp_path / "serve.yaml", serve))
    deadline = time.monotonic() + 60
    while json.loads(client("status", job, "--json").stdout)[0]["state"] != "RUNNING":
        assert time.monotonic() < deadline, "the serving job never ran"
        time.sleep(0.5)
    forward = start_in_background(
        [HPCLAUNCH, "--site", str(client.site), "forward", job, str(port), "--local", str(local)],
        client.environ(),
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10) as answer:
                    listing = answer.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "nothing answered through the forward"
                time.sleep(0.5)
        assert "job.sbatch" in listing  # the job's directory on the cluster, served in the job
    finally:
        said = stop_by_ctrl_c(forward)
    assert f"forwarding 127.0.0.1:{local} to n" in said, said
    ran = client("shell", job, "--", "bash", "-c", "echo $USER in $SLURM_JOB_ID")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"hpcuser in {job}"
    assert client("cancel", job).returncode == 0


def test_a_sidecar_job_over_ssh_runs_the_sites_python(client: Client, tmp_path: Path) -> None:
    job_spec = spec(tmp_path / "s.yaml", ["bash", "-c", "echo rank $RANK"], launcher="srun")
    refused = client("submit", str(job_spec))
    assert refused.returncode == 2, refused.stderr  # the laptop's python means nothing there
    assert "python: in the site config" in refused.stderr
    site = yaml.safe_load(client.site.read_text())
    site["python"] = "~/venvs/hpclaunch/bin/python"
    client.site.write_text(yaml.safe_dump(site))
    # The script execs the site's interpreter, ~ expanded with the remote user's home. (Not
    # run here: hpcuser cannot execute this machine's interpreters, which live under /root.)
    dry = client("submit", "--dry-run", str(job_spec))
    assert dry.returncode == 0, dry.stderr
    assert f"exec {HOME}/venvs/hpclaunch/bin/python -m hpclaunch.supervise run" in dry.stdout


def test_paths_are_checked_on_the_login_node(client: Client, tmp_path: Path) -> None:
    # The remote user's home is not this machine's: the check runs there, in one command.
    client.job_root_top.mkdir(parents=True, exist_ok=True)
    (client.job_root_top / "run.sh").write_text("#!/bin/sh\necho ran\n")
    there = f"~/{client.job_root_top.name}/run.sh"
    ok = client("submit", "--dry-run", str(spec(tmp_path / "ok.yaml", ["bash", there])))
    assert ok.returncode == 0, ok.stderr
    missing = spec(tmp_path / "no.yaml", ["bash", "~/nope.sh"], venv="~/no-venv")
    refused = client("submit", "--dry-run", str(missing))
    assert refused.returncode == 2, refused.stderr
    assert f"{missing}: paths do not exist:" in refused.stderr
    login = f"hpcuser@127.0.0.1:{client_port(client)}"
    assert f"command[1]: '~/nope.sh' ({HOME}/nope.sh) is not a file on {login}" in refused.stderr
    assert f"venv: '~/no-venv' ({HOME}/no-venv) is not a directory on {login}" in refused.stderr


def client_port(client: Client) -> str:
    """The sshd port the client's config names for alias ``cluster``."""
    for line in client.config.read_text().splitlines():
        if line.strip().startswith("Port "):
            return line.split()[1]
    raise AssertionError("no Port in the ssh config")


def test_proxyjump_through_a_second_sshd(client: Client, client_key: str, server: Sshd) -> None:
    jump = Sshd([client_key])
    try:
        client.known_hosts.write_text(server.known_hosts_line() + jump.known_hosts_line())
        client.hosts(cluster=(server, "  ProxyJump jump\n"), jump=(jump, ""))
        result = client("status", "1")
        assert result.returncode == 0, result.stderr
        assert "Accepted publickey for hpcuser" in jump.log.read_text()  # went through it
    finally:
        jump.stop()


def test_unknown_host_key_is_refused_then_accepted_once(client: Client, client_key: str) -> None:
    fresh = Sshd([client_key])
    try:
        client.hosts(cluster=(fresh, ""))
        refused = client("status", "1")
        assert refused.returncode == 1
        assert fingerprint_of(fresh.host_pub) in refused.stderr
        assert "--accept-new-host-key" in refused.stderr
        assert "Traceback" not in refused.stderr

        accepted = client("--accept-new-host-key", "status", "1")
        assert accepted.returncode == 0, accepted.stderr
        assert client.known_hosts.read_text().count(f"[127.0.0.1]:{fresh.port}") == 1
        again = client("status", "1")
        assert again.returncode == 0, again.stderr
        assert client.known_hosts.read_text().count(f"[127.0.0.1]:{fresh.port}") == 1
    finally:
        fresh.stop()


def test_changed_host_key_is_refused_even_when_accepting(client: Client, server: Sshd) -> None:
    other = public_dir() / "other"
    keygen(other)
    kind, key = other.with_suffix(".pub").read_text().split()[:2]
    client.known_hosts.write_text(f"[127.0.0.1]:{server.port} {kind} {key}\n")
    for flags in ((), ("--accept-new-host-key",)):
        result = client(*flags, "status", "1")
        assert result.returncode == 1
        assert "HOST KEY CHANGED" in result.stderr
        assert fingerprint_of(server.host_pub) in result.stderr
    shutil.rmtree(other.parent)


def test_wrong_key_is_refused_clearly(client: Client, server: Sshd) -> None:
    wrong = client.dir / "wrong_key"
    keygen(wrong)
    client.key = wrong
    client.hosts(cluster=(server, ""))
    result = client("status", "1")
    assert result.returncode == 1
    assert "authentication failed for hpcuser@127.0.0.1" in result.stderr
    assert "authorized_keys" in result.stderr


def test_connection_killed_mid_submission_makes_exactly_one_job(
    client: Client, client_key: str, tmp_path: Path
) -> None:
    bin_dir = public_dir()
    bin_dir.chmod(0o777)  # hpcuser's wrapper leaves its marker here
    marker = bin_dir / "submitted"
    wrapper = bin_dir / "sbatch"
    # sbatch that submits, says so, then hangs: the reply never reaches the client. The
    # real sbatch is the cluster's own (/usr/local/bin for a source build, /usr/bin for 22.05).
    sbatch = shutil.which("sbatch")
    assert sbatch is not None
    wrapper.write_text(
        f'#!/bin/sh\nout=$({sbatch} "$@")\nrc=$?\ntouch {marker}\nsleep 30\necho "$out"; exit $rc\n'
    )
    wrapper.chmod(0o755)
    hung = Sshd([client_key], set_env={"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"})
    proc: subprocess.Popen[str] | None = None
    try:
        client.known_hosts.write_text(hung.known_hosts_line())
        client.hosts(cluster=(hung, ""))
        spec_path = spec(tmp_path / "once.yaml", ["sleep", "2"])
        sid = f"it-ssh-drop-{uuid.uuid4().hex[:8]}"
        env_client = client
        proc = subprocess.Popen(
            [
                HPCLAUNCH,
                "--site",
                str(client.site),
                "submit",
                "--no-check",
                str(spec_path),
                "--submission-id",
                sid,
            ],
            cwd=REPO,
            env={
                **{k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"},
                "HPCLAUNCH_SSH_CONFIG": str(env_client.config),
                "HPCLAUNCH_REMOTE": "cluster",
                "XDG_STATE_HOME": str(client.dir / "state"),
                "XDG_DATA_HOME": str(client.dir / "state"),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert hung.kill_sessions() > 0
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        job_id = out.strip()
        assert jobs_with(sid) == [job_id]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        hung.stop()
        shutil.rmtree(bin_dir, ignore_errors=True)


def test_sync_sends_only_changed_files_and_freezes_the_job(client: Client, tmp_path: Path) -> None:
    tree = Path(tempfile_tree())
    try:
        salt = uuid.uuid4().hex
        for n in range(1000):
            (tree / f"d{n % 10}").mkdir(exist_ok=True)
            (tree / f"d{n % 10}" / f"f{n}.txt").write_text(f"{salt} {n}\n")
        (tree / "msg.txt").write_text("original\n")
        job_spec = spec(tree / "job.yaml", ["bash", "-c", "sleep 2; cat msg.txt"])

        first = client("submit", "--sync", str(job_spec), cwd=tree)
        assert first.returncode == 0, first.stderr
        assert "1002 files, 1002 sent" in first.stderr
        (tree / "msg.txt").write_text("edited after submit\n")  # the queued job must not see it
        assert wait_done(client, first.stdout.strip()) == "COMPLETED"
        log = client("logs", first.stdout.strip()).stdout
        assert "original" in log
        assert "edited" not in log

        (tree / "d3" / "f3.txt").write_text("changed\n")
        second = client("submit", "--sync", str(job_spec), cwd=tree)
        assert second.returncode == 0, second.stderr
        assert "1002 files, 2 sent" in second.stderr  # msg.txt and f3.txt
        assert wait_done(client, second.stdout.strip()) == "COMPLETED"
        assert "edited after submit" in client("logs", second.stdout.strip()).stdout
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def test_a_command_that_ends_before_reading_its_input_is_no_dropped_link(
    client: Client,
) -> None:
    """sshd closes the channel when the command exits; input still being sent then is a
    broken pipe, as with a local process, not a drop (CI, stop 35: the first sync to a new
    store failed so, under load)."""
    runner = SSHRunner("cluster", resolve=lambda d: resolve_target(d, config_files=[client.config]))
    try:
        ended = runner.run(["sh", "-c", "echo early; exit 3"], stdin="x" * (8 << 20))
        assert (ended.returncode, ended.stdout) == (3, "early\n")
        assert runner.run(["echo", "after"]).stdout == "after\n"  # the link is still good
    finally:
        runner.close()


def tempfile_tree() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="hpclaunch-synctree-")


def test_link_cut_anywhere_in_a_sync_submit_makes_one_job_and_whole_snapshots(
    client: Client, server: Sshd, tmp_path: Path
) -> None:
    """The SSH link reset at 6 points of ``submit --sync`` (one drawn from each sixth of the
    bytes an uncut submission moves: handshake, listing, upload, script, sbatch), each time
    on a fresh tree, retried once with the same submission id if the call failed: exactly
    one job each time, every object in the store is whole, the snapshot holds the tree;
    the failed calls said what happened and what to do (bench/faults.py: 25 cuts)."""
    for n, point in enumerate(cut_points(uncut_bytes(client, server, tmp_path), 6, seed=19)):
        trial = link_cut_trial(client, server, make_tree(tmp_path / f"cut{n}"), point)
        said = trial.first_err + trial.retry_err
        assert trial.cut, point
        assert trial.survived, (point, trial)
        assert not re.search("Traceback|Aborted", said), said
        if trial.retried:
            assert trial.first_rc == 1, said
            assert re.search(r"^Error: .*\n(.*\n)*Hint: ", trial.first_err, re.M), said


def test_a_link_gone_silent_fails_the_command_within_the_alive_bound(
    client: Client, server: Sshd
) -> None:
    """A link that drops everything without a reset (no RST: a NAT forgot it): a command
    waiting on it fails within ServerAliveInterval x (ServerAliveCountMax + 1), saying the
    link went silent, instead of waiting for TCP (~15 min). The runner then reconnects."""
    proxy = CuttingProxy(server.port, None)
    try:
        proxy_hosts(client, server, proxy)
        with client.config.open("a") as config:
            config.write("  ServerAliveInterval 1\n  ServerAliveCountMax 2\n")
        runner = SSHRunner(
            "cluster", resolve=lambda d: resolve_target(d, config_files=[client.config])
        )
        assert runner.run(["true"]).ok
        started = time.monotonic()
        threading.Timer(1.0, proxy.silence).start()  # while the command runs
        with pytest.raises(ConnectionDropped, match="the link went silent"):
            runner.run(["sleep", "30"], timeout=25)  # unfixed: CommandTimeout after 25 s
        assert time.monotonic() - started < 7
        proxy.silent = False  # a new connection passes again
        assert runner.run(["echo", "back"]).stdout == "back\n"
        assert runner.connects == 2
        runner.close()
    finally:
        proxy.close()


FUNCTIONS = """
import json, sys
import hpclaunch

def double(x):
    return 2 * x

def fails(x):
    raise ValueError(f"no {x}")

options = {"project": "research", "resources": {"time": "00:02:00", "mem": "100M"}}
with hpclaunch.Session(site=sys.argv[1], remote="cluster") as session:
    value, error = session.submit(double, 21, **options), session.submit(fails, 7, **options)
    seen = {"ids": [value.id, error.id], "dirs": [value.job_dir, error.job_dir]}
    seen["value"] = value.result(timeout=180)
    caught = error.exception(timeout=180)
    seen["error"] = [type(caught).__name__, str(caught), getattr(caught, "__notes__", [])]
print(json.dumps(seen))
"""


def test_a_function_over_ssh_travels_by_sftp_and_comes_back(
    client: Client, server: Sshd, tmp_path: Path
) -> None:
    """``Session(remote=...).submit(fn)``: the call is written into the remote job directory
    and its result read back over SFTP; a raised exception comes back as itself. Logged in
    as root, whose jobs can run this machine's interpreter (hpcuser cannot reach /root/.pyenv):
    the site's ``python`` is the one running the tests, as a cluster's site config names
    its own."""
    client.hosts(user="root", cluster=(server, ""))
    site = yaml.safe_load(client.site.read_text())
    site["python"] = sys.executable
    client.site.write_text(yaml.safe_dump(site))
    script = tmp_path / "functions.py"
    script.write_text(FUNCTIONS)
    done = subprocess.run(
        [sys.executable, str(script), str(client.site)],
        cwd=REPO,
        env=client.environ(),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    remote_root = Path("/root") / client.job_root_top.name
    try:
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.splitlines()[-1])
        assert seen["value"] == 42
        kind, text, notes = seen["error"]
        assert (kind, text) == ("ValueError", "no 7")
        assert "in fails" in notes[0]  # the job's traceback, as a note
        for job_dir in seen["dirs"]:  # in the remote user's home, where SFTP put the call
            assert job_dir.startswith(f"{remote_root}/jobs/")
            assert (Path(job_dir) / "call" / "call.pkl").stat().st_mode & 0o077 == 0
        history = history_path({"XDG_DATA_HOME": str(client.dir / "state")})
        record = find_record(job_id=seen["ids"][0], path=history)
        assert record is not None  # the history lives on the laptop
        assert record.user == "root"
    finally:
        shutil.rmtree(remote_root, ignore_errors=True)
