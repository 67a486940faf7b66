"""SSH link cuts during ``submit --sync`` (issue 19, fault 5), shared by test_ssh.py (a few
cut points, in the suite) and bench/faults.py (``--cuts`` of them, counted).

A :class:`CuttingProxy` sits on a loopback port between the client and a real sshd and
resets the first connection after a given number of bytes (both directions counted); later
connections pass, so the client's own reconnect and the user's retry reach the server.
:func:`link_cut_trial` submits a fresh code tree through it with a submission id, retries
once with the same id if the cut made the first call fail, and reports what the cluster
and the snapshot store hold afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import socket
import struct
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import yaml

from hpclaunch.transport.sync import scan, snapshot_dir

from .sshd import Client, Sshd


class CuttingProxy:
    """127.0.0.1:``port`` → 127.0.0.1:``target``; the first connection is reset (RST, as a
    dead link or a NAT timeout looks to both ends) once ``cut_after`` bytes have passed.
    :meth:`silence` makes every connection silent instead: bytes are taken and dropped,
    nothing is closed (a NAT that forgot the connection, a sleeping laptop).

    Attributes:
        passed: Bytes that went through the first connection.
        cut: Whether the first connection was cut (a short submission may end before).
    """

    def __init__(self, target: int, cut_after: int | None) -> None:
        self.target = target
        self.cut_after = cut_after
        self.passed = 0
        self.cut = False
        self.connections = 0
        self.silent = False
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                first = self.connections == 0
                self.connections += 1
                self._sockets += [client, server]
            pair = (client, server)
            for src, dst in (pair, pair[::-1]):
                threading.Thread(
                    target=self._pump, args=(src, dst, pair, first), daemon=True
                ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: tuple[socket.socket, ...], first: bool
    ) -> None:
        try:
            while data := src.recv(65536):
                if self.silent:
                    continue
                if first and self.cut_after is not None:
                    with self._lock:
                        allowed = max(0, min(len(data), self.cut_after - self.passed))
                        self.passed += allowed
                        cut = self.passed >= self.cut_after
                    dst.sendall(data[:allowed])
                    if cut:
                        self.cut = True
                        _reset(*pair)
                        return
                else:
                    if first:
                        self.passed += len(data)
                    dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def silence(self) -> None:
        """From now on nothing passes, either way, and nothing is closed."""
        self.silent = True

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            _reset(*self._sockets)


def _reset(*sockets: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP reset, not an orderly end.

    The other pump thread is blocked in recv() on these sockets, which keeps the kernel's
    socket alive past close() (no reset is sent then: the client hung until its own
    timeout, 15 s, measured). shutdown(SHUT_RD) wakes that recv first and sends nothing.
    """
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RD)
        with contextlib.suppress(OSError):
            sock.close()


def proxy_hosts(client: Client, server: Sshd, proxy: CuttingProxy) -> None:
    """Point the client's alias ``cluster`` at the proxy, trusting the server's key there."""
    client.config.write_text(
        f"Host cluster\n  HostName 127.0.0.1\n  Port {proxy.port}\n  User hpcuser\n"
        f"  IdentityFile {client.key}\n  UserKnownHostsFile {client.known_hosts}\n"
        "  HashKnownHosts no\n"
    )
    kind, pub = server.host_pub.read_text().split()[:2]
    client.known_hosts.write_text(f"[127.0.0.1]:{proxy.port} {kind} {pub}\n")


@dataclass
class CutTrial:
    """One submission through a cut link, and what it left.

    Attributes:
        cut_after: The byte the link died at (``None``: the uncut calibration run).
        cut: Whether the link was cut before the submission ended.
        first_rc, first_err: The cut submission's exit code and stderr.
        retried: Whether it was retried (the first call failed).
        retry_rc, retry_err, retry_seconds: The retry's.
        jobs: Slurm jobs carrying the submission id (exactly one is right).
        bytes_total: Bytes the first connection carried.
        bad_objects: Store objects whose content is not their name's hash.
        snapshot_ok: The job's snapshot holds the tree, file for file.
        leftovers: Temporary files a cut left in the store (never taken as objects).
    """

    cut_after: int | None
    cut: bool = False
    first_rc: int = 0
    first_err: str = ""
    retried: bool = False
    retry_rc: int = 0
    retry_err: str = ""
    retry_seconds: float = 0.0
    jobs: list[str] = field(default_factory=list)
    bytes_total: int = 0
    bad_objects: list[str] = field(default_factory=list)
    snapshot_ok: bool = False
    leftovers: int = 0

    @property
    def survived(self) -> bool:
        ok = self.first_rc == 0 or (self.retried and self.retry_rc == 0)
        return ok and len(self.jobs) == 1 and not self.bad_objects and self.snapshot_ok


def uncut_bytes(client: Client, server: Sshd, directory: Path) -> int:
    """Bytes an uncut submission surely moves: the smaller of two uncut runs (the first
    also fetches what later ones find cached), less 2% (runs differ by a few hundred).
    Raises AssertionError if an uncut submission fails."""
    totals = []
    for n in range(2):
        trial = link_cut_trial(client, server, make_tree(directory / f"uncut{n}"), None)
        assert trial.survived, trial
        totals.append(trial.bytes_total)
    return min(totals) * 98 // 100


def cut_points(total: int, count: int, seed: int) -> list[int]:
    """``count`` byte offsets in ``[1, total)``, one drawn at random from each of ``count``
    equal slices: every phase of a submission (handshake, listing, upload, sbatch) gets
    cuts, not just the upload that carries most of the bytes."""
    rng = random.Random(seed)
    edges = [1 + (total - 1) * k // count for k in range(count + 1)]
    return [rng.randrange(lo, max(hi, lo + 1)) for lo, hi in pairwise(edges)]


def make_tree(directory: Path, files: int = 12) -> Path:
    """A fresh code tree (contents unique to this call, so every object is new) with a job
    spec ``job.yaml`` that runs ``true``."""
    directory.mkdir(parents=True)
    salt = uuid.uuid4().hex
    for n in range(files):
        sub = directory / f"pkg{n % 4}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{n}.py").write_text(f"# {salt} {n}\n" + "x = 1\n" * (20 * n))
    spec = {
        "name": f"cut-{salt[:6]}",
        "project": "research",
        "command": ["true"],
        "resources": {"time": "00:01:00", "mem": "50M"},
    }
    (directory / "job.yaml").write_text(yaml.safe_dump(spec))
    return directory


def link_cut_trial(client: Client, server: Sshd, tree: Path, cut_after: int | None) -> CutTrial:
    """Submit ``tree`` (see :func:`make_tree`) with ``--sync`` through a link cut after
    ``cut_after`` bytes; retry once with the same submission id if that failed."""
    trial = CutTrial(cut_after)
    sid = f"it-cut-{uuid.uuid4().hex[:10]}"
    proxy = CuttingProxy(server.port, cut_after)
    try:
        proxy_hosts(client, server, proxy)
        args = ("submit", "--sync", "--no-check", "--submission-id", sid, "job.yaml")
        first = client(*args, cwd=tree)
        trial.first_rc, trial.first_err = first.returncode, first.stderr
        trial.cut, trial.bytes_total = proxy.cut, proxy.passed
        if first.returncode != 0:
            trial.retried = True
            start = time.monotonic()
            again = client(*args, cwd=tree)
            trial.retry_seconds = time.monotonic() - start
            trial.retry_rc, trial.retry_err = again.returncode, again.stderr
    finally:
        proxy.close()
    trial.jobs = jobs_with(sid)
    store = client.job_root_top / "snapshots"
    trial.bad_objects, trial.leftovers = check_store(store)
    trial.snapshot_ok = snapshot_holds(store, tree)
    return trial


def jobs_with(submission_id: str) -> list[str]:
    """Every Slurm job (any state) whose comment carries ``submission_id``."""
    out = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%i %k", "--user=hpcuser"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split()[0] for line in out.splitlines() if f"hpclaunch:{submission_id}" in line]


def check_store(store: Path) -> tuple[list[str], int]:
    """Objects whose content does not hash to their name, and the temporary files left."""
    objects = store / "objects"
    bad: list[str] = []
    leftovers = 0
    for path in objects.iterdir() if objects.is_dir() else ():
        if path.name.startswith("."):
            leftovers += 1
        elif hashlib.sha256(path.read_bytes()).hexdigest() != path.name:
            bad.append(path.name)
    leftovers += sum(1 for p in store.iterdir() if ".tmp." in p.name)
    return bad, leftovers


def snapshot_holds(store: Path, tree: Path) -> bool:
    """Whether ``tree``'s snapshot in ``store`` has every file of the tree, byte for byte."""
    scanned = scan(tree)
    snap = Path(snapshot_dir(str(store), scanned))
    return snap.is_dir() and all(
        (snap / f.path).is_file() and (snap / f.path).read_bytes() == (tree / f.path).read_bytes()
        for f in scanned.files
    )


__all__ = [
    "CutTrial",
    "CuttingProxy",
    "cut_points",
    "jobs_with",
    "link_cut_trial",
    "make_tree",
    "uncut_bytes",
]
