"""Into a running job: a shell on one of its nodes (``hpclaunch shell``) and a port of one of
its nodes forwarded to a local port (``hpclaunch forward``), for Jupyter, TensorBoard or a
model endpoint the job serves.

The shell is a step of the job: ``srun --overlap --jobid=ID`` (the step shares the job's CPUs
and GPUs with the steps already running: Slurm 20.11+), so it sees the job's node, its
files and its GPUs, and ends with the job. Over SSH it runs through the system's ``ssh -t``,
which gives the terminal. A forward listens on this machine's loopback and, for each
connection, opens one from where Slurm's commands run (the login node: locally, or a
``direct-tcpip`` channel of the SSH transport) to the node's port.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import BackendError, ConnectError
from hpclaunch.slurm.cluster import expand_hosts
from hpclaunch.slurm.jobs import JobRef, JobState
from hpclaunch.transport.sshconfig import CONFIG_ENV

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context

__all__ = ["Forward", "job_node", "job_place", "open_forward", "shell_argv"]


def job_node(ctx: Context, job_id: str, node: str | None = None) -> tuple[str, str]:
    """The running job's Slurm id (an array task's own id) and the node to reach: ``node``
    if it is one of the job's, else its first.

    Raises:
        BackendError: The job is not running, or ``node`` is not one of its nodes.
    """
    info = ctx.backend.status([JobRef(job_id)])[JobRef(job_id)]
    if info.state is not JobState.RUNNING or not info.nodes:
        if info.state is JobState.UNKNOWN:
            why, hint = (
                f"job {job_id} is unknown to Slurm ({info.reason or 'no such job'})",
                "check the id: 'hpclaunch status' lists your recent jobs",
            )
        elif info.state.is_finished:
            why, hint = (
                f"job {job_id} has ended ({info.state.value}): there is no node to reach",
                f"'hpclaunch logs {job_id}' shows what it printed; 'hpclaunch rerun {job_id}' "
                "runs it again",
            )
        else:  # pending, or requeued and waiting for its next attempt
            why, hint = (
                f"job {job_id} is {info.state.value}, not running yet: there is no node to reach",
                f"'hpclaunch status {job_id}' says when Slurm expects it to start",
            )
        raise BackendError(why, hint=hint)
    nodes = expand_hosts(info.nodes)
    if node is not None and node not in nodes:
        raise BackendError(
            f"node {node} is not one of job {job_id}'s ({', '.join(nodes)})",
            hint=f"--node {nodes[0]}",
        )
    return job_id, node or nodes[0]


def job_place(ctx: Context, job_id: str, node: str | None = None) -> tuple[str, str | None]:
    """``("running", node)`` (``node`` if it is one of the job's, else its first),
    ``("waiting", None)`` while it pends (a requeue's next attempt) or ``("ended", None)``."""
    info = ctx.backend.status([JobRef(job_id)])[JobRef(job_id)]
    if info.state is JobState.RUNNING and info.nodes:
        nodes = expand_hosts(info.nodes)
        return "running", node if node in nodes else nodes[0]
    if info.state.is_finished or info.state is JobState.UNKNOWN:
        return "ended", None
    return "waiting", None


def shell_argv(
    ctx: Context, job_id: str, node: str | None = None, command: Sequence[str] = ()
) -> list[str]:
    """The argv that opens a shell (or runs ``command``) on a node of the running job, from
    this machine: srun here, or ``ssh -t`` to the login node that runs it.

    Raises:
        BackendError: See :func:`job_node`.
    """
    job, where = job_node(ctx, job_id, node)
    step = ["srun", "--overlap", f"--jobid={job}", f"--nodelist={where}", "-N1", "-n1"]
    step += list(command) if command else ["--pty", "bash", "-l"]
    if not ctx.is_remote:
        return ctx.runner.resolve(step)

    remote = ctx.settings.remote.value or ""
    config = os.environ.get(CONFIG_ENV)  # the ssh config hpclaunch itself reads
    ssh = ["ssh", *(["-F", config] if config else []), *(["-t"] if not command else [])]
    return [*ssh, remote, "--", shlex.join(ctx.runner.resolve(step))]


@dataclass
class Forward:
    """A local port forwarded to ``node:port`` through ``open`` (the runner's
    :meth:`~hpclaunch.transport.base.Runner.open_tcp`), until :meth:`close`.

    Attributes:
        node: The job's node.
        port: The port there.
        local_port: The port listening here, on 127.0.0.1.
        connections: Connections forwarded so far.
    """

    node: str
    port: int
    open: Callable[[str, int], Any]
    local_port: int = 0
    connections: int = 0
    errors: list[str] = field(default_factory=list)
    #: Where the job is now: ``("running", node)``, ``("waiting", None)`` (pending or
    #: requeued: its next attempt comes) or ``("ended", None)`` (:func:`job_place`).
    locate: Callable[[], tuple[str, str | None]] | None = None
    _server: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> int:
        """Listen (on ``local_port``; 0: any free one) and serve in a background thread;
        returns the port.

        Raises:
            ConnectError: The local port is taken.
        """
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("127.0.0.1", self.local_port))
        except OSError as exc:
            server.close()
            raise ConnectError(
                f"cannot listen on 127.0.0.1:{self.local_port}: {exc.strerror or exc}",
                hint="give another port with --local",
            ) from exc
        server.listen(16)
        server.settimeout(0.5)
        self._server = server
        self.local_port = server.getsockname()[1]
        threading.Thread(target=self._serve, name="forward", daemon=True).start()
        return self.local_port

    def follow(self) -> str:
        """Look where the job is (one status call) and forward to its node now: a requeued
        job's next attempt may run elsewhere. Returns ``running``, ``waiting`` (until
        then connections fail) or ``ended``."""
        if self.locate is None:
            return "running"
        state, where = self.locate()
        if where is not None:
            self.node = where
        return state

    def close(self) -> None:
        """Stop listening (connections under way end with their peers)."""
        self._stop.set()
        if self._server is not None:
            self._server.close()

    def _serve(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            remote = self.open(self.node, self.port)
        except ConnectError as exc:
            self.errors.append(exc.message)
            client.close()
            return
        self.connections += 1
        client.settimeout(None)
        upstream = threading.Thread(target=_pipe, args=(client, remote), daemon=True)
        upstream.start()
        _pipe(remote, client)
        upstream.join()
        for end in (client, remote):
            with contextlib.suppress(OSError):
                end.close()


def _pipe(source: Any, sink: Any) -> None:
    """Copy ``source`` to ``sink`` until EOF, then end ``sink``'s writing half (the other
    direction may still carry an answer)."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        if hasattr(sink, "shutdown_write"):  # a paramiko channel
            sink.shutdown_write()
        else:
            sink.shutdown(socket.SHUT_WR)


def open_forward(
    ctx: Context, job_id: str, port: int, *, local_port: int = 0, node: str | None = None
) -> Forward:
    """A started :class:`Forward` from ``127.0.0.1:local_port`` here to ``port`` on a node of
    the running job, kept to the job's node across a requeue (``Job.forward``)."""
    _, where = job_node(ctx, job_id, node)
    forward = Forward(
        where,
        port,
        ctx.runner.open_tcp,
        local_port=local_port,
        locate=lambda: job_place(ctx, job_id, node),
    )
    forward.start()
    return forward
