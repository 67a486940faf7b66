"""docker/slurm-cluster/side-host.sh, run for real: what a second test cluster beside the
first relies on (scripts/test's 22.05 leg) — its own ports on the same loopback addresses,
a private /etc and /usr/local/bin, Slurm's passive bind working, nothing left running."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "docker" / "slurm-cluster" / "side-host.sh"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="side-host.sh needs root and unshare(1) (namespaces and mounts)",
)


@pytest.fixture
def name() -> Iterator[str]:
    side = f"test-{uuid.uuid4().hex[:8]}"
    yield side
    # All side-host.sh made for it: its state, its pytest temp root and its cluster lock.
    shutil.rmtree(Path("/var/lib/hpclaunch-side") / side, ignore_errors=True)
    shutil.rmtree(f"/tmp/hpclaunch-side-{side}-pytest", ignore_errors=True)
    Path(f"/tmp/hpclaunch-cluster-{side}.lock").unlink(missing_ok=True)


def side(name: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), name, "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_port_taken_here_is_free_there_and_slurms_passive_bind_works(name: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Slurm's own lookup (AF_INET, AI_PASSIVE | AI_ADDRCONFIG) finds an address there.
        code = (
            "import socket, sys; p = int(sys.argv[1]);"
            " socket.getaddrinfo(None, p, socket.AF_INET, socket.SOCK_STREAM, 0,"
            " socket.AI_PASSIVE | socket.AI_ADDRCONFIG);"
            " s = socket.socket(); s.bind(('127.0.0.1', p)); s.listen(); print('bound')"
        )
        out = side(name, f'python3 -c "{code}" {port}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "bound"


def test_etc_and_the_slurm_links_changed_there_stay_as_they_are_here(name: str) -> None:
    marker = f"hpclaunch-side-test-{uuid.uuid4().hex}"
    link = Path("/usr/local/bin") / marker
    link.symlink_to("/bin/true")
    try:
        out = side(
            name,
            f"echo {marker} >>/etc/hosts && rm {link} && test ! -e {link}"
            " && echo STATE=$HPCLAUNCH_CLUSTER_STATE DOCKER=$HPCLAUNCH_DOCKER_ROOT"
            " LOCK=$HPCLAUNCH_CLUSTER_LOCK && ls /run",
        )
        assert out.returncode == 0, out.stderr
        assert marker not in Path("/etc/hosts").read_text()
        assert link.is_symlink()  # removed there only
    finally:
        link.unlink(missing_ok=True)
    side_dir = f"/var/lib/hpclaunch-side/{name}"
    assert f"STATE={side_dir}/state DOCKER={side_dir}/docker" in out.stdout
    assert f"LOCK=/tmp/hpclaunch-cluster-{name}.lock" in out.stdout
    assert "docker.sock" not in out.stdout  # an empty /run: no engine of this host answers there


def test_what_it_leaves_running_ends_with_it(name: str) -> None:
    tag = f"sleep {300 + int(uuid.uuid4().hex[:4], 16)}"  # a command line of its own
    # A daemon-like child that outlives the command (setsid, in the background).
    out = side(name, f"setsid {tag} </dev/null >/dev/null 2>&1 & sleep 0.2; pgrep -fx '{tag}'")
    assert out.returncode == 0, out.stderr  # it was running there
    deadline = time.monotonic() + 5
    while subprocess.run(["pgrep", "-fx", tag], capture_output=True, check=False).returncode == 0:
        assert time.monotonic() < deadline, f"'{tag}' outlived its side host"
        time.sleep(0.1)


def test_killing_it_ends_what_runs_there(name: str) -> None:
    tag = f"sleep {300 + int(uuid.uuid4().hex[:4], 16)}"
    proc = subprocess.Popen(
        [str(SCRIPT), name, "bash", "-c", f"setsid {tag} </dev/null >/dev/null 2>&1 & sleep 60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(["pgrep", "-fx", tag], capture_output=True, check=False).returncode:
            assert time.monotonic() < deadline, "the side host's command did not start"
            time.sleep(0.1)
        proc.kill()  # as scripts/test's exit trap does (unshare ignores SIGTERM)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while (
            subprocess.run(["pgrep", "-fx", tag], capture_output=True, check=False).returncode == 0
        ):
            assert time.monotonic() < deadline, f"'{tag}' outlived its killed side host"
            time.sleep(0.1)
    finally:
        proc.kill()
