"""Real OpenSSH servers on loopback ports, for the SSH transport's integration tests.

Each :class:`Sshd` runs ``/usr/sbin/sshd -D`` with its own config, host key, authorized keys
and pid file in a private directory, listening on 127.0.0.1 only. It serves the test user
``hpcuser`` (who exists on the login node and on the compute nodes), so the Slurm commands
run through it reach the local cluster. Needs root (sshd changes user) and Debian's
openssh-server (``scripts/lib.sh`` ensure_sshd_package installs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from .conftest import HPCLAUNCH, REPO

SSHD = "/usr/sbin/sshd"
USER = "hpcuser"
HOME = "/home/hpcuser"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def keygen(path: Path, kind: str = "ed25519") -> str:
    """Make a key pair at ``path`` (+ ``.pub``); return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "hpclaunch-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def fingerprint_of(pub: Path) -> str:
    """``SHA256:...`` of a public key file, as ssh-keygen -l prints it."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(pub)], check=True, capture_output=True, text=True
    ).stdout
    return out.split()[1]


def public_dir() -> Path:
    """A fresh directory under /tmp that sshd, running as hpcuser, can read."""
    path = Path(tempfile.mkdtemp(prefix="hpclaunch-sshd-"))
    path.chmod(0o755)
    return path


class Sshd:
    """One sshd on 127.0.0.1:``port``.

    Args:
        authorized_keys: Public key lines accepted for every user.
        set_env: Variables for every session (sshd_config ``SetEnv``), e.g. a PATH.
    """

    def __init__(self, authorized_keys: list[str], set_env: dict[str, str] | None = None) -> None:
        self.dir = public_dir()
        self.port = free_port()
        self.host_key = self.dir / "ssh_host_ed25519_key"
        keygen(self.host_key)
        self.host_key.chmod(0o600)
        keys = self.dir / "authorized_keys"
        keys.write_text("".join(k + "\n" for k in authorized_keys))
        keys.chmod(0o644)
        env = " ".join(f'"{k}={v}"' for k, v in (set_env or {}).items())
        self.config = self.dir / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.host_key}\n"
            f"PidFile {self.dir / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {keys}\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "UsePAM yes\n"  # with "no", a locked account (hpcuser: "!") is refused
            "StrictModes no\n"
            "AllowTcpForwarding yes\n"
            "MaxStartups 50\n"
            "Subsystem sftp internal-sftp\n" + (f"SetEnv {env}\n" if env else "")
        )
        self.log = self.dir / "sshd.log"
        # sshd's privilege separation directory; the package's service unit makes it.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=log
            )
        self._wait_listening()

    @property
    def host_pub(self) -> Path:
        """The server's public host key file."""
        return self.host_key.with_suffix(".pub")

    def known_hosts_line(self) -> str:
        """The known_hosts line for this server (``[127.0.0.1]:port type key``)."""
        kind, key = self.host_pub.read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {key}\n"

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.port}: {self.log.read_text()}")

    def session_pids(self) -> list[int]:
        """The processes serving connections (descendants of the listening sshd)."""
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        found: list[int] = []
        frontier = [self.proc.pid]
        while frontier:
            pid = frontier.pop()
            children = [child for child, parent in parents.items() if parent == pid]
            found += children
            frontier += children
        return found

    def kill_sessions(self) -> int:
        """SIGKILL every process serving a connection (the listener stays); return how many."""
        pids = self.session_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def stop(self) -> None:
        """Stop the server and its sessions; remove its directory."""
        self.kill_sessions()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Client:
    """The client side: a directory with the key, ssh config, known_hosts and site."""

    dir: Path
    key: Path
    config: Path
    known_hosts: Path
    site: Path
    job_root_top: Path

    @classmethod
    def of(cls, server: Sshd, key: Path, directory: Path) -> Client:
        """A client in ``directory`` using ``key``, with alias ``cluster`` for ``server``
        (whose key it knows), and the local site with its job root in a fresh directory
        of hpcuser's home."""
        top = Path(HOME) / f".hpclaunch-it-{uuid.uuid4().hex[:8]}"
        site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
        site["job_root"] = f"~/{top.name}/jobs"
        site_path = directory / "site.yaml"
        site_path.write_text(yaml.safe_dump(site))
        client = cls(
            directory,
            key,
            directory / "ssh_config",
            directory / "known_hosts",
            site_path,
            top,
        )
        client.known_hosts.write_text(server.known_hosts_line())
        client.hosts(cluster=(server, ""))
        return client

    def hosts(self, user: str = USER, **servers: tuple[Sshd, str]) -> None:
        """Write the ssh config: alias → (server, extra lines); ``user`` logs in."""
        text = ""
        for alias, (server, extra) in servers.items():
            text += (
                f"Host {alias}\n  HostName 127.0.0.1\n  Port {server.port}\n  User {user}\n"
                f"  IdentityFile {self.key}\n  UserKnownHostsFile {self.known_hosts}\n"
                f"  HashKnownHosts no\n{extra}"
            )
        self.config.write_text(text)

    def environ(self, remote: str = "cluster") -> dict[str, str]:
        """The environment of a process on this client (no ssh-agent)."""
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        env.update(
            HPCLAUNCH_SSH_CONFIG=str(self.config),
            HPCLAUNCH_REMOTE=remote,
            XDG_STATE_HOME=str(self.dir / "state"),
            XDG_DATA_HOME=str(self.dir / "state"),
            XDG_CONFIG_HOME=str(self.dir / "config"),
        )
        return env

    def __call__(
        self, *args: str, remote: str = "cluster", cwd: Path = REPO, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HPCLAUNCH, "--site", str(self.site), *args],
            cwd=cwd,
            env=self.environ(remote),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
