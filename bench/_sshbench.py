"""Shared by the SSH benchmarks: a private sshd serving hpcuser, and a runner through it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpclaunch.transport.ssh import SSHRunner
from hpclaunch.transport.sshconfig import SSHTarget
from tests.integration.sshd import Sshd, keygen, public_dir


@contextmanager
def ssh_runner() -> Iterator[SSHRunner]:
    """An SSHRunner to hpcuser@127.0.0.1 through a fresh sshd (known host key, own key)."""
    keys = public_dir()
    pub = keygen(keys / "id_ed25519")
    server = Sshd([pub])
    known = keys / "known_hosts"
    known.write_text(server.known_hosts_line())
    os.environ.pop("SSH_AUTH_SOCK", None)
    target = SSHTarget(
        destination="bench",
        hostname="127.0.0.1",
        user="hpcuser",
        port=server.port,
        identity_files=(str(keys / "id_ed25519"),),
        known_hosts=(str(known),),
    )
    runner = SSHRunner("bench", resolve=lambda _: target)
    try:
        yield runner
    finally:
        runner.close()
        server.stop()
