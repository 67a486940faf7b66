"""Run commands and move files on a cluster's login node over SSH (paramiko, the [ssh] extra).

One :class:`paramiko.Transport` per runner, opened on first use and reused by every call
of the CLI command (one channel per command; paramiko channels may be opened from several
threads). ``ProxyJump`` hops are chained by ``direct-tcpip`` channels through the previous
hop's transport. Host keys are checked against known_hosts (:mod:`.hostkeys`); keys come
from ssh-agent, then the ``IdentityFile`` list. Every paramiko or socket failure becomes a
:class:`~hpclaunch.errors.TransportError` naming what failed, with a hint.

Commands run through the remote user's login shell (sshd runs ``$SHELL -c COMMAND``), so each
word is quoted with :func:`shlex.join`: user values are never interpreted. That quoting is
POSIX-shell quoting (sh, bash, zsh, dash); a login shell of the csh or fish family would
misread some values.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

from hpclaunch.errors import (
    CommandTimeout,
    ConfigError,
    ConnectError,
    ConnectionDropped,
    ProgramNotFound,
    TransportError,
)
from hpclaunch.transport.base import Command, CommandResult, Runner
from hpclaunch.transport.hostkeys import (
    HostKeyChanged,
    HostKeyStatus,
    UnknownHostKey,
    accept_host_key,
    check_host_key,
    fingerprint,
    known_key_types,
)
from hpclaunch.transport.liveness import Liveness
from hpclaunch.transport.sshconfig import SSHTarget, resolve_target

if TYPE_CHECKING:
    import paramiko

__all__ = ["SSHRunner"]

T = TypeVar("T")

#: How long :meth:`SSHRunner.run` waits in one select() before checking the link again.
_POLL = 0.5
#: Where paramiko's own log records go (see _paramiko).
_SILENT = logging.NullHandler()


def _paramiko() -> Any:
    try:
        import paramiko  # noqa: PLC0415 (optional)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "remote access needs paramiko, which is not installed",
            hint="pip install 'hpclaunch[ssh]'",
        ) from exc
    # paramiko logs a dropped link ("Socket exception: Connection reset by peer") at ERROR;
    # with no handler configured, Python prints that bare line to stderr beside hpclaunch's
    # own error. An application that wants paramiko's log configures logging itself.
    logging.getLogger("paramiko").addHandler(_SILENT)
    return paramiko


def _link_errors() -> tuple[type[BaseException], ...]:
    """What a failed or cut link raises: paramiko's SSHException, the socket's OSError, and
    the bare EOFError paramiko raises from any call that sends on a reset link."""
    return (_paramiko().SSHException, OSError, EOFError)


class SSHRunner(Runner):
    """A :class:`~hpclaunch.transport.base.Runner` on a remote machine, over SSH.

    Args:
        destination: ``[user@]host[:port]`` or a ``Host`` alias of the ssh config.
        accept_new_host_key: Record an unknown host key in known_hosts (once) instead of
            refusing it. A changed key is refused regardless.
        resolve: Turns a destination into an :class:`SSHTarget` (default: read the ssh
            config files; tests pass their own).
    """

    is_local = False

    def __init__(
        self,
        destination: str,
        *,
        accept_new_host_key: bool = False,
        resolve: Callable[[str], SSHTarget] = resolve_target,
    ) -> None:
        self.destination = destination
        self.accept_new_host_key = accept_new_host_key
        self._resolve = resolve
        self.target = resolve(destination)
        self.where = str(self.target)
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._transports: list[paramiko.Transport] = []
        self._liveness: list[Liveness] = []  # one watcher per hop of the connection
        self._sftp: paramiko.SFTPClient | None = None
        self._home: str | None = None
        #: Channels opened so far (one per command, one per SFTP session): for benchmarks.
        self.channels_opened = 0
        #: Connections made so far (more than one: a reconnect after a drop).
        self.connects = 0

    def _count_channel(self) -> None:
        with self._count_lock:
            self.channels_opened += 1

    # -- connection -----------------------------------------------------------------------

    def _transport(self) -> paramiko.Transport:
        """The live transport, connecting (again) if there is none."""
        with self._lock:
            if self._transports and self._transports[-1].is_active():
                return self._transports[-1]
            self._close_locked()
            self._transports = self._connect_chain(self.target, depth=0)
            self.connects += 1
            return self._transports[-1]

    def _connect_chain(self, target: SSHTarget, depth: int) -> list[paramiko.Transport]:
        """Transports for every hop, the last one reaching ``target``."""
        if depth > 8:
            raise ConfigError(f"ProxyJump of {self.destination!r} loops or is too deep")
        chain: list[paramiko.Transport] = []
        for jump in target.proxy_jump:
            jump_target = self._resolve(jump)
            if chain:  # later hops are reached through the earlier ones
                jump_target = _without_jump(jump_target)
                chain.append(self._handshake(jump_target, self._tunnel(chain[-1], jump_target)))
            else:
                chain.extend(self._connect_chain(jump_target, depth + 1))
        sock = self._tunnel(chain[-1], target) if chain else self._dial(target)
        chain.append(self._handshake(target, sock))
        return chain

    def _dial(self, target: SSHTarget) -> socket.socket:
        where = f"{target.hostname}:{target.port}"
        try:
            return socket.create_connection(
                (target.hostname, target.port), timeout=target.connect_timeout
            )
        except socket.gaierror as exc:
            raise ConnectError(
                f"cannot resolve host {target.hostname!r} (remote {target.destination!r}): "
                f"{exc.strerror or exc}",
                hint="check the name, your network/VPN, and HostName in ~/.ssh/config",
            ) from exc
        except ConnectionRefusedError as exc:
            raise ConnectError(
                f"connection to {where} refused (remote {target.destination!r})",
                hint="is sshd running there, and is the port right (Port in ~/.ssh/config)?",
            ) from exc
        except TimeoutError as exc:
            raise ConnectError(
                f"connection to {where} timed out after {target.connect_timeout:g} s",
                hint="check your network or VPN; a firewall may drop the packets",
            ) from exc
        except OSError as exc:
            raise ConnectError(
                f"cannot connect to {where}: {exc.strerror or exc}",
                hint="check your network or VPN",
            ) from exc

    def _tunnel(self, via: paramiko.Transport, target: SSHTarget) -> Any:
        """A ``direct-tcpip`` channel through ``via`` to ``target`` (ProxyJump)."""
        try:
            channel = via.open_channel(
                "direct-tcpip",
                (target.hostname, target.port),
                ("127.0.0.1", 0),
                timeout=target.connect_timeout,
            )
        except _link_errors() as exc:
            raise ConnectError(
                f"jump host could not open a tunnel to {target.hostname}:{target.port}: {exc}",
                hint="check ProxyJump and HostName in ~/.ssh/config, and that the jump host "
                "allows TCP forwarding (AllowTcpForwarding)",
            ) from exc
        self._count_channel()
        return channel

    def _handshake(self, target: SSHTarget, sock: Any) -> paramiko.Transport:
        """SSH handshake on ``sock``, host key check, authentication, keepalive."""
        p = _paramiko()
        transport: paramiko.Transport = p.Transport(sock)
        try:
            preferred = known_key_types(
                target.known_hosts_name, [*target.known_hosts, *target.global_known_hosts]
            )
            if preferred:  # like ssh: negotiate a key type we can verify
                options = transport.get_security_options()
                options.key_types = [
                    *[k for k in options.key_types if k in preferred],
                    *[k for k in options.key_types if k not in preferred],
                ]
            transport.banner_timeout = target.connect_timeout
            transport.start_client(timeout=target.connect_timeout)
            self._verify_host_key(target, transport.get_remote_server_key())
            self._authenticate(target, transport)
        except TransportError:
            transport.close()
            raise
        except _link_errors() as exc:
            transport.close()
            compare = f"'ssh {shlex.quote(target.destination)} true'"
            reset = isinstance(exc, (EOFError, ConnectionResetError))
            raise ConnectError(
                f"SSH handshake with {target} failed: {exc or type(exc).__name__}",
                hint=f"the link was cut: check the network and retry ({compare} to compare)"
                if reset
                else f"is it an SSH server? Try {compare} to compare",
            ) from exc
        if target.alive_interval > 0:
            self._liveness.append(
                Liveness(transport, target.alive_interval, target.alive_count_max)
            )
        return transport

    def _verify_host_key(self, target: SSHTarget, key: paramiko.PKey) -> None:
        name = target.known_hosts_name
        files = [*target.known_hosts, *target.global_known_hosts]
        status, where = check_host_key(name, key, files)
        if status is HostKeyStatus.KNOWN:
            return
        fp = fingerprint(key)
        kind = key.get_name()
        if status is HostKeyStatus.CHANGED:
            raise HostKeyChanged(
                f"HOST KEY CHANGED for {name}: it now offers {kind} {fp}, which differs "
                f"from the key recorded in {where}. Someone may be intercepting the "
                "connection (or the server was reinstalled). Refusing to connect.",
                hint="ask the cluster's admins for the new fingerprint; only if it matches, "
                f"remove the old entry with: ssh-keygen -f {shlex.quote(str(where))} -R "
                f"{shlex.quote(name)}",
            )
        if self.accept_new_host_key:
            accept_host_key(name, key, target.known_hosts[0], hashed=target.hash_known_hosts)
            return
        raise UnknownHostKey(
            f"the host key of {name} is not known: it offers {kind} {fp} (checked: "
            f"{', '.join(files)})",
            fingerprint=fp,
            hint="compare that fingerprint with the one your cluster publishes, then "
            f"accept it once with: hpclaunch --remote {shlex.quote(self.destination)} "
            f"--accept-new-host-key status 1 (it is written to {target.known_hosts[0]})",
        )

    def _authenticate(self, target: SSHTarget, transport: paramiko.Transport) -> None:
        p = _paramiko()
        tried: list[str] = []
        for label, key in self._keys(target, tried):
            try:
                transport.auth_publickey(target.user, key)
            except p.AuthenticationException:
                continue
            except p.SSHException as exc:
                raise ConnectError(f"authentication with {target} failed: {exc}") from exc
            if transport.is_authenticated():
                return
            tried.append(f"{label} (partial: more factors needed)")
        raise ConnectError(
            f"authentication failed for {target.user}@{target.hostname}: no key was accepted "
            f"(tried: {', '.join(tried) or 'no keys found'})",
            hint=f"is your public key in ~{target.user}/.ssh/authorized_keys there? Load the "
            "key into ssh-agent (ssh-add), or set IdentityFile for this host in ~/.ssh/config",
        )

    def _keys(self, target: SSHTarget, tried: list[str]) -> Any:
        """(label, key) to try: the agent's keys, then the readable IdentityFile keys."""
        p = _paramiko()
        try:
            agent_keys = list(p.Agent().get_keys())
        except p.SSHException:
            agent_keys = []
        for n, key in enumerate(agent_keys):
            tried.append(f"agent key {n + 1} ({fingerprint(key)})")
            yield tried[-1], key
        for path in target.identity_files:
            try:
                key = p.PKey.from_path(path)
            except FileNotFoundError:
                continue
            except p.PasswordRequiredException:
                tried.append(f"{path} (encrypted: load it with ssh-add)")
                continue
            except (p.SSHException, OSError, ValueError) as exc:
                tried.append(f"{path} (unreadable: {exc})")
                continue
            tried.append(path)
            yield path, key

    def close(self) -> None:
        """Close the connection (and its jump hosts). The next call reconnects."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        # Closing sends a message: on a link that was reset paramiko raises EOFError, which
        # from the atexit hook printed "Exception ignored in atexit callback" and a traceback
        # under hpclaunch's own error (seen with the link-cut test, 1 cut in 6).
        if self._sftp is not None:
            with contextlib.suppress(*_link_errors()):
                self._sftp.close()
            self._sftp = None
        for watcher in self._liveness:
            watcher.stop()
        self._liveness = []
        for transport in reversed(self._transports):
            with contextlib.suppress(*_link_errors()):
                transport.close()
        self._transports = []

    # -- commands -------------------------------------------------------------------------

    def _execute(self, command: Command) -> CommandResult:
        """See :meth:`Runner.run`. Raises ConnectionDropped if the link dies meanwhile."""
        args, timeout, env = list(command.argv), command.timeout, command.env
        stdin = None if command.stdin is None else command.stdin.encode("utf-8")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *args] if env else args
        start = time.monotonic()
        transport = self._transport()
        try:
            channel = transport.open_session(timeout=self.target.connect_timeout)
            self._count_channel()
            channel.exec_command(shlex.join(words))
        except _link_errors() as exc:
            raise ConnectionDropped(args, self.where, detail=self._why(str(exc))) from exc
        try:
            out, err, status = _communicate(channel, transport, stdin, timeout, start)
        except _Timeout as exc:
            raise CommandTimeout(
                args, timeout or 0.0, stdout=exc.stdout, stderr=exc.stderr
            ) from None
        except _Dropped as exc:
            raise ConnectionDropped(args, self.where, detail=self._why(exc.detail)) from None
        except _link_errors() as exc:  # paramiko's own word for a reset
            detail = self._why(str(exc) or "reset")
            raise ConnectionDropped(args, self.where, detail=detail) from exc
        finally:
            with contextlib.suppress(*_link_errors()):
                channel.close()  # sends a close message: fails on a dead link
        stderr_text = err.decode("utf-8", "replace")
        if status == 127 and _not_found(stderr_text):
            raise ProgramNotFound(args[0], where=f"on PATH on {self.where}")
        return CommandResult(
            argv=tuple(args),
            returncode=status,
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr_text,
            duration=time.monotonic() - start,
        )

    def _why(self, detail: str) -> str:
        """Why the link dropped: the liveness watcher's word when it closed it."""
        return next((w.why for w in self._liveness if w.why), detail)

    def user(self) -> str:
        """The login name on the login node (``user@`` of the target, or ~/.ssh/config's)."""
        return self.target.user

    def home(self) -> str:
        """The remote user's home directory (asked once per runner)."""
        if self._home is None:
            result = self.run(["printenv", "HOME"], timeout=self.target.connect_timeout)
            home = result.stdout.strip()
            if not result.ok or not home.startswith("/"):
                raise TransportError(
                    f"cannot learn the home directory on {self.where}: "
                    f"{(result.stderr or result.stdout).strip() or 'empty answer'}"
                )
            self._home = home
        return self._home

    # -- files ----------------------------------------------------------------------------

    def open_tcp(self, host: str, port: int, *, timeout: float = 10) -> Any:
        """See :meth:`Runner.open_tcp`: a ``direct-tcpip`` channel, so the connection is
        made from the login node (sshd's AllowTcpForwarding must allow it)."""
        transport = self._transport()
        try:
            channel = transport.open_channel(
                "direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout
            )
        except _link_errors() as exc:
            raise ConnectError(
                f"{self.where} could not open a connection to {host}:{port}: {exc}",
                hint="is something listening there, and does the login node's sshd allow TCP "
                "forwarding (AllowTcpForwarding)?",
            ) from exc
        self._count_channel()
        return channel

    def _sftp_client(self) -> paramiko.SFTPClient:
        p = _paramiko()
        transport = self._transport()
        with self._lock:
            channel = self._sftp.get_channel() if self._sftp is not None else None
            if channel is None or channel.get_transport() is not transport:
                try:
                    self._sftp = p.SFTPClient.from_transport(transport)
                except _link_errors() as exc:
                    raise ConnectError(
                        f"cannot open SFTP on {self.where}: {exc}",
                        hint="the server must allow the sftp subsystem (Subsystem sftp)",
                    ) from exc
                self._count_channel()
            assert self._sftp is not None
            return self._sftp

    def put_file(self, path: str, content: str, mode: int) -> None:
        """See :meth:`Runner.put_file` (SFTP: temporary file, chmod, then rename)."""
        self.put_bytes(path, content.encode("utf-8"), mode)

    def put_bytes(self, path: str, data: bytes, mode: int) -> None:
        """Write ``data`` to ``path`` atomically with mode ``mode`` (parents made 0700)."""
        sftp = self._sftp_client()
        parent, name = posixpath.split(path)
        tmp = posixpath.join(parent, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            self._makedirs(sftp, parent)
            with sftp.open(tmp, "wb") as handle:
                handle.set_pipelined(True)
                handle.write(data)
            sftp.chmod(tmp, mode)  # before the rename: the file never exists with looser bits
            sftp.posix_rename(tmp, path)
        except _link_errors() as exc:
            with contextlib.suppress(*_link_errors()):
                sftp.remove(tmp)
            why = (
                str(exc).rstrip(": ") or "the connection was reset"
            )  # paramiko ends some with ": "
            raise TransportError(f"cannot write {path} on {self.where}: {why}") from exc

    @staticmethod
    def _makedirs(sftp: paramiko.SFTPClient, directory: str) -> None:
        missing: list[str] = []
        current = directory
        while current not in ("", "/"):
            try:
                sftp.stat(current)
                break
            except FileNotFoundError:
                missing.append(current)
                current = posixpath.dirname(current)
        for new in reversed(missing):
            try:
                sftp.mkdir(new, 0o700)
            except OSError:
                sftp.stat(new)  # made meanwhile by someone else: fine; else raise
            sftp.chmod(new, 0o700)

    def listdir(self, path: str) -> list[str]:
        """Names in the directory ``path`` (``FileNotFoundError`` if it is missing)."""
        sftp = self._sftp_client()
        try:
            names: list[str] = sftp.listdir(path)
        except FileNotFoundError:
            raise
        except _link_errors() as exc:
            raise TransportError(f"cannot list {path} on {self.where}: {exc}") from exc
        return names

    def read_file(self, path: str) -> str:
        """See :meth:`Runner.read_file` (over SFTP)."""
        return self.read_bytes(path).decode("utf-8", "replace")

    def read_bytes(self, path: str, offset: int = 0) -> bytes:
        """The bytes of ``path`` from ``offset`` on."""
        sftp = self._sftp_client()
        try:
            with sftp.open(path, "rb") as handle:
                handle.seek(offset)
                data: bytes = handle.read()
                return data
        except _link_errors() as exc:
            raise TransportError(f"cannot read {path} on {self.where}: {exc}") from exc

    def read_with(self, path: str, read: Callable[[IO[bytes]], T]) -> T:
        """See :meth:`Runner.read_with`: streamed over SFTP (read ahead, as ``get`` does)."""
        sftp = self._sftp_client()
        try:
            handle = sftp.open(path, "rb")
            handle.prefetch()
        except _link_errors() as exc:
            raise TransportError(f"cannot read {path} on {self.where}: {exc}") from exc
        with handle:
            try:
                return read(cast("IO[bytes]", handle))  # SFTPFile: read/readline as a file's
            # The link broke while reading (not EOFError here: that is how a reader says
            # the file itself ended early).
            except (_paramiko().SSHException, OSError) as exc:
                raise TransportError(f"cannot read {path} on {self.where}: {exc}") from exc


class _Timeout(Exception):
    def __init__(self, stdout: bytes, stderr: bytes) -> None:
        self.stdout = stdout.decode("utf-8", "replace")
        self.stderr = stderr.decode("utf-8", "replace")


class _Dropped(Exception):
    def __init__(self, detail: str) -> None:
        self.detail = detail


def _communicate(
    channel: Any, transport: Any, stdin: bytes | None, timeout: float | None, start: float
) -> tuple[bytes, bytes, int]:
    """Feed stdin, collect stdout/stderr until the exit status; raise _Timeout/_Dropped."""
    try:
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
    except (OSError, EOFError) as exc:  # paramiko raises a bare EOFError on a reset link
        # A command may end before it read all its input: sshd sends its exit status and
        # closes the channel, and sending fails ("Socket is closed"). That is a broken pipe,
        # which subprocess ignores too, not a drop: the link is up and the status came.
        ended = channel.exit_status_ready() and channel.recv_exit_status() != -1
        if not (ended and transport.is_active()):
            detail = str(exc) or "the connection was reset"
            raise _Dropped(f"while sending input: {detail}") from exc
    out: list[bytes] = []
    err: list[bytes] = []
    deadline = None if timeout is None else start + timeout
    while True:
        got = False
        while channel.recv_ready():
            out.append(channel.recv(65536))
            got = True
        while channel.recv_stderr_ready():
            err.append(channel.recv_stderr(65536))
            got = True
        done = channel.exit_status_ready() and (channel.eof_received or channel.closed)
        if done and not channel.recv_ready() and not channel.recv_stderr_ready():
            # A dying channel also sets the status event, with paramiko's -1 placeholder.
            if channel.recv_exit_status() == -1 and not transport.is_active():
                raise _Dropped("the SSH connection closed")
            return b"".join(out), b"".join(err), channel.recv_exit_status()
        if not transport.is_active():
            raise _Dropped("the SSH connection closed")
        if deadline is not None and time.monotonic() > deadline:
            raise _Timeout(b"".join(out), b"".join(err))
        if got:
            continue
        wait = _POLL if deadline is None else max(0.0, min(_POLL, deadline - time.monotonic()))
        if channel.eof_received:  # the output is complete: only the exit status is missing
            channel.status_event.wait(wait)
        else:
            select.select([channel], [], [], wait)


def _not_found(stderr: str) -> bool:
    """Whether a 127 exit means "no such program" (the shell's or env's wording)."""
    lowered = stderr.lower()
    return "not found" in lowered or "no such file or directory" in lowered


def _without_jump(target: SSHTarget) -> SSHTarget:
    return replace(target, proxy_jump=())
