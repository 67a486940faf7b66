"""The sidecar: starts the launch, turns Slurm's signals into checkpoint-and-requeue.

It runs in the batch shell (the rendered script ``exec``\\ s it) and:

1. records and removes stale control files, writes ``attempt_start`` to the ledger (unless
   an earlier attempt already ran the job to its end: then it records ``restart_refused``
   and exits with that attempt's code, launching nothing; see
   :func:`~hpclaunch.supervise.requeue.finished_attempt`);
2. starts the launch (:mod:`hpclaunch.supervise.launchers`) in a process group of its own;
3. on USR1/USR2 (``--signal=B:SIG@lead``: time limit, or preemption with
   ``preempt_send_user_signal``; also one the batch script's trap caught while it set up,
   ``HPCLAUNCH_EARLY_SIGNAL``, handled as if it came at the start): writes the checkpoint
   request, waits for the trainer's ``checkpoint-done.json`` until the deadline (time limit:
   the time left minus a margin; preemption: ``HPCLAUNCH_GRACE`` minus a margin, 30 s when
   unknown), asks the retry policy, runs ``scontrol requeue``, stops the launch and exits 0.
   Only a commit made knowing of the request answers it: a periodic one that ends just after
   the request is followed by the requested one, which stopping the launch then would cut
   short (unless the launch exits after the periodic one);
4. on SIGTERM without a warning (scancel, ``scontrol requeue``, preemption without a user
   signal, the end of the grace): asks for a checkpoint with the little time left
   (``HPCLAUNCH_KILL_WAIT``, 5 s by default), stops the launch and leaves the requeue to
   Slurm; the attempt ends ``requeued`` when Slurm's restart count already went up
   (:func:`~hpclaunch.supervise.requeue.job_now`), ``node_failure`` when it also names a
   failed node (a requeue that counts against ``max_requeues``: past it the requeued job is
   cancelled), ``time_limit`` when Slurm says ``Reason=TimeLimit``, ``preempted`` when it
   has a ``PreemptTime``, else ``cancelled``;
5. otherwise passes the launch's exit code through, recording success or user error.

Stopping is SIGTERM to the group, a wait (``HPCLAUNCH_STOP_TIMEOUT``, 3 s), then SIGKILL to
whatever of the group is left: no process of the launch survives the sidecar.

Exit codes: the launch's own, or :data:`EXIT_REQUEUED` (0) after a requeue,
:data:`EXIT_REQUEUE_FAILED` (75, EX_TEMPFAIL) when a requeue was wanted but ``scontrol`` is
missing or refused, :data:`EXIT_NOT_REQUEUED` (76) when the policy refused it (cap reached or
crash loop) and :data:`EXIT_STOPPED` (143) after a plain SIGTERM/SIGINT, which the command
line turns into an end by that signal (:func:`end_by`), as a plain job's.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpclaunch.errors import TransportError
from hpclaunch.runtime.checkpoint import resume_point
from hpclaunch.slurm.times import parse_time
from hpclaunch.supervise import control
from hpclaunch.supervise.idle import clear_idle_state, idle_for
from hpclaunch.supervise.launchers import LauncherName, container_step, exec_argv, step_argv
from hpclaunch.supervise.ledger import Ledger
from hpclaunch.supervise.notices import Notifier
from hpclaunch.supervise.output import OutputGate
from hpclaunch.supervise.rendezvous import Rendezvous, derive_port, port_in_use
from hpclaunch.supervise.requeue import (
    JobNow,
    cancel_requeued,
    decide,
    delay_start,
    finished_attempt,
    forbid_requeue,
    issue_requeue,
    job_now,
    requeue_target,
    slurm_requeue_delay,
    slurm_requeues_on_exit,
)
from hpclaunch.supervise.resize import (
    elastic_interval,
    elastic_sizes,
    read_request,
    resize_at_requeue,
)
from hpclaunch.supervise.retry import OOM, RetryPolicy, decide_retry
from hpclaunch.supervise.signals import Received, SignalCatcher
from hpclaunch.transport.base import Runner

__all__ = [
    "EXIT_NOT_REQUEUED",
    "EXIT_REQUEUED",
    "EXIT_REQUEUE_FAILED",
    "EXIT_STOPPED",
    "EXIT_STOPPED_IDLE",
    "Sidecar",
    "SidecarConfig",
    "stop_group",
    "wandb_env",
]

EXIT_REQUEUED = 0
EXIT_REQUEUE_FAILED = 75
EXIT_NOT_REQUEUED = 76
EXIT_STOPPED = 143
#: The idle guard stopped the job (``idle.stop_after``): not requeued, Slurm says FAILED (78 is
#: the batch script's own: no workdir on the node, planning/script_start.py).
EXIT_STOPPED_IDLE = 79
#: Seconds between two looks at the nodes' idle states.
IDLE_CHECK = 5.0
#: Seconds kept back from a deadline for the requeue and the stop.
MARGIN = 2.0
#: Seconds kept, after SIGTERM, to write the attempt's end before Slurm's SIGKILL.
END_RESERVE = 1.0
#: The warning the batch script's trap caught before the sidecar ran (templates/sbatch.sh.j2).
EARLY_SIGNAL_ENV = "HPCLAUNCH_EARLY_SIGNAL"
#: Slurm may send the --signal up to 60 s early (sbatch(1)); a warning this close to the end
#: (lead + slack) is read as the time limit, anything earlier as preemption.
TIME_LIMIT_SLACK = 60
_POLL = 0.1
_ERROR_LINE = re.compile(
    r"^(?:\[[^\]]*\]:?\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$"
)
#: Exceptions that follow another rank's failure rather than cause it.
_AFTERMATH = re.compile(
    r"ChildFailedError|SignalException|KeyboardInterrupt|Connection closed by peer|"
    r"Connection reset by peer|got signal: ?\d+|Signal \d+ \(SIG"
)
_NODE_FAILURE = re.compile(r"node failure|NODE_FAIL|Node .* not responding", re.IGNORECASE)
#: srun's words when slurmctld no longer knows the job it runs in: killed within its
#: state-save delay (<= 5 s) after starting it, it restarts without that start (25.11).
_JOB_LOST = re.compile(r"Unable to confirm allocation for job \d+: Invalid job id")
#: srun's words when it could not ask slurmctld about the job or create the step, because
#: slurmctld did not answer (killed and restarting: seen on 25.11 in the fault tests). The
#: step was never created, so nothing ran: the launch is tried again.
_CONTROLLER_MISSED = re.compile(
    r"Unable to (?:confirm allocation|create step) for job \d+: (?:Unexpected missing "
    r"socket error|Unable to contact slurm controller|Socket timed out|Zero Bytes were "
    r"transmitted|Connection refused|Communication connection failure)"
)
#: Seconds before each new launch after :data:`_CONTROLLER_MISSED` (about 1.5 min in all:
#: a controller restart or failover).
LAUNCH_RETRY_WAITS = (2.0, 4.0, 8.0, 16.0, 30.0, 30.0)


@dataclass(frozen=True)
class SidecarConfig:
    """What one attempt of the sidecar needs; see :meth:`from_env`.

    Attributes:
        launcher: One of :data:`~hpclaunch.supervise.launchers.LAUNCHERS`.
        command: The user's argv.
        python: The interpreter that runs ``hpclaunch.supervise`` on the nodes.
        job_dir: ``HPCLAUNCH_JOB_DIR`` (ledger, control directory).
        attempt: ``SLURM_RESTART_COUNT``.
        max_requeues: ``HPCLAUNCH_MAX_REQUEUES``.
        grace: Seconds a preempted job has (``HPCLAUNCH_GRACE``; 30 when unknown).
        preemptible: The job's tier may be preempted (the plan sets ``HPCLAUNCH_GRACE``
            only then).
        lead: The ``--signal`` lead time (``HPCLAUNCH_SIGNAL_LEAD``).
        kill_wait: Seconds between SIGTERM and SIGKILL from Slurm (``HPCLAUNCH_KILL_WAIT``).
        stop_timeout: Seconds between our SIGTERM and SIGKILL to the launch.
        nproc_per_node: Processes per node; ``None``: from the GPUs.
        log_path: This attempt's log (its tail explains a user error).
        env: The environment the launch inherits.
        resize_wait: Seconds the trainer has to checkpoint before a resize
            (``HPCLAUNCH_RESIZE_WAIT``).
    """

    launcher: LauncherName
    command: tuple[str, ...]
    python: str
    job_dir: Path
    attempt: int = 0
    max_requeues: int = 5
    grace: float = 30.0
    preemptible: bool = True
    lead: float = 120.0
    kill_wait: float = 5.0
    stop_timeout: float = 3.0
    nproc_per_node: int | None = None
    log_path: Path | None = None
    env: Mapping[str, str] | None = None
    resize_wait: float = 120.0

    @property
    def control_dir(self) -> Path:
        """``HPCLAUNCH_CONTROL_DIR``."""
        return self.job_dir / "control"

    @classmethod
    def from_env(
        cls,
        launcher: LauncherName,
        command: Sequence[str],
        *,
        python: str,
        env: Mapping[str, str],
        nproc_per_node: int | None = None,
    ) -> SidecarConfig:
        """Read the ``HPCLAUNCH_*`` variables the batch script exports."""

        def num(name: str, default: float) -> float:
            try:
                return float(env.get(name, "") or default)
            except ValueError:
                return default

        job_dir = Path(env.get("HPCLAUNCH_JOB_DIR") or Path.cwd())
        attempt = int(env.get("HPCLAUNCH_ATTEMPT") or env.get("SLURM_RESTART_COUNT") or 0)
        log_dir = env.get("HPCLAUNCH_LOG_DIR")
        grace = num("HPCLAUNCH_GRACE", 0) or 30.0
        return cls(
            launcher=launcher,
            command=tuple(command),
            python=python,
            job_dir=job_dir,
            attempt=attempt,
            max_requeues=int(num("HPCLAUNCH_MAX_REQUEUES", 5)),
            grace=grace,
            preemptible=bool(env.get("HPCLAUNCH_GRACE")),
            lead=num("HPCLAUNCH_SIGNAL_LEAD", 120),
            kill_wait=num("HPCLAUNCH_KILL_WAIT", 5),
            stop_timeout=num("HPCLAUNCH_STOP_TIMEOUT", 3),
            nproc_per_node=nproc_per_node,
            log_path=Path(log_dir) / f"attempt-{attempt}.log" if log_dir else None,
            env=dict(env),
            resize_wait=num("HPCLAUNCH_RESIZE_WAIT", 120),
        )


class Sidecar:
    """One attempt of the sidecar. ``Sidecar(config, runner).run()`` returns the exit code.

    Args:
        config: See :class:`SidecarConfig`.
        runner: Runs ``scontrol``/``squeue`` (a fake in tests).
    """

    def __init__(self, config: SidecarConfig, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        self.env: dict[str, str] = dict(config.env if config.env is not None else os.environ)
        # The job's notify: hears of what the ledger records (supervise/notices.py).
        notifier = Notifier.from_env(self.env, config.log_path)
        self.ledger = Ledger(config.job_dir, config.attempt, observer=notifier)
        self.output: OutputGate  # made by run(): the launch's output, see _stop
        self.control = config.control_dir
        self.start_step: int | None = None
        #: ``TERM`` or ``INT`` when that signal stopped the attempt (see :func:`end_by`).
        self.stopped_by: str | None = None
        self.committed: dict[str, Any] | None = None
        self.failed_seen: int | None = None  # mtime of the checkpoint-failed.json recorded
        self.failed: dict[str, Any] | None = None  # what it said
        self._requeue_why: str | None = None
        self._launch_start = 0  # the attempt log's size when the last launch started
        self.sizes = elastic_sizes(self.env)  # () unless the job is elastic
        self._resize: tuple[int, int] | None = None  # (from, to) once a resize is under way
        stop = self.env.get("HPCLAUNCH_IDLE_STOP_SECONDS", "")
        #: The idle guard's stop, in seconds (``None``: never stopped for idling).
        self.idle_stop = float(stop) if stop.replace(".", "", 1).isdigit() else None
        self._idle_checked = 0.0
        self._idle_why: str | None = None
        self._started = time.time()

    # -- the attempt --------------------------------------------------------------------
    def run(self, signals: SignalCatcher | None = None) -> int:
        """Run the attempt to its end and return the sidecar's exit code.

        Args:
            signals: A catcher already in place (``python -m hpclaunch.supervise`` enters
                one before its imports, so a warning in those first moments is kept);
                ``None``: one is entered here.
        """
        with contextlib.ExitStack() as stack:
            caught = signals if signals is not None else stack.enter_context(SignalCatcher())
            return self._run(caught)

    def _run(self, signals: SignalCatcher) -> int:
        cfg = self.config
        history = self.ledger.history()
        finished = finished_attempt(history)
        if finished is not None:
            return self._refuse_restart(finished)
        control.prepare(self.control)
        stale = dict(control.clear_stale(self.control))
        clear_idle_state(self.control)
        if stale:  # one event per attempt: a resume finds the request and the commit
            self.ledger.append("stale_control_files", files=stale)
        self.start_step = control.read_step(self.control / control.PROGRESS)
        rdzv, argv = self._launch_argv()
        self.ledger.append(
            "attempt_start",
            nodes=list(rdzv.nodes),
            master_addr=rdzv.master_addr,
            master_port=rdzv.master_port,
            launcher=cfg.launcher,
            argv=argv,
            progress_step=self.start_step,
            resize_seconds=_resize_seconds(history),
        )
        for retry in range(len(LAUNCH_RETRY_WAITS) + 1):
            self.output = OutputGate()
            start = self._launch_start = self._log_size()
            try:
                proc = subprocess.Popen(
                    argv,
                    env=self._child_env(),
                    start_new_session=True,
                    stdout=self.output.write_fd,
                    stderr=self.output.write_fd,
                )
            except OSError as exc:
                self.output.close()
                self._end("launch_failed", exit_code=127, requeued=False, why=str(exc))
                return 127
            self.output.child_started()
            if retry == 0:
                self._replay_early_signal()
            while proc.poll() is None:
                got = signals.wait(_POLL)
                self._note_failed_checkpoint()
                if got is not None:
                    code = self._on_signal(got, proc, signals, history)
                    if code == EXIT_STOPPED:
                        self.stopped_by = got.name
                    return code
                if self.sizes and (request := read_request(self.control)) is not None:
                    resized = self._on_resize(request, proc, signals, history)
                    if resized is not None:
                        return resized
                if self._idle_too_long(rdzv.nodes):
                    return self._on_idle(proc, signals)
            self._note_failed_checkpoint()
            code = proc.returncode
            stop_group(proc, cfg.stop_timeout)  # leftovers of the group, if any
            self.output.close()  # every line is in the log before its tail is read
            if code == 0 or retry == len(LAUNCH_RETRY_WAITS):
                break
            if not any(_CONTROLLER_MISSED.search(x) for x in self._log_lines(start)):
                break
            wait = LAUNCH_RETRY_WAITS[retry]
            self.ledger.append(
                "launch_retry",
                retry=retry + 1,
                wait=wait,
                why="srun could not reach slurmctld before it started the step "
                "(restarting?): nothing ran; launching again",
            )
            signals.wait_pending(wait)  # a signal now is handled with the next launch
        return self._on_exit(code, history)

    def _refuse_restart(self, finished: Mapping[str, Any]) -> int:
        """End a run Slurm started after the job had already run to its end (requeue.py's
        docstring): nothing is launched, and the finished attempt's exit code is this one's,
        so the job ends as it did (COMPLETED, or FAILED)."""
        code = finished.get("exit_code")
        code = code if isinstance(code, int) and 0 <= code <= 255 else 1
        after = finished.get("attempt")
        why = (
            f"attempt {after} already ran the job to its end ({finished.get('reason')}, "
            f"exit code {code}): Slurm started it again without a requeue of hpclaunch's "
            "(a preemption's grace flag Slurm left set, or scontrol requeue); nothing is run"
        )
        self.ledger.append(
            "restart_refused", after_attempt=after, reason=finished.get("reason"), why=why
        )
        print(f"hpclaunch: {why}; submit the job again to run it again", flush=True)
        return code

    def _log_size(self) -> int:
        try:
            return os.path.getsize(self.config.log_path) if self.config.log_path else 0
        except OSError:
            return 0

    def _log_lines(self, start: int, max_bytes: int = 65536) -> list[str]:
        """The attempt log's last lines written from byte ``start`` on (by the last launch;
        at most its last ``max_bytes``)."""
        if self.config.log_path is None:
            return []
        try:
            with open(self.config.log_path, "rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                fh.seek(max(start, end - max_bytes))
                return fh.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def _replay_early_signal(self) -> None:
        """Act on a warning that came while the batch script set up (its trap remembered it
        in ``HPCLAUNCH_EARLY_SIGNAL``, templates/sbatch.sh.j2) as if it came now."""
        early = self.env.get(EARLY_SIGNAL_ENV, "")
        if early in ("USR1", "USR2"):
            self.ledger.append("early_signal", signal=early)
            signal.raise_signal(signal.Signals[f"SIG{early}"])

    def _stop(self, proc: subprocess.Popen[bytes], timeout: float | None = None) -> None:
        """Stop the launch (SIGKILL after ``timeout``, default ``stop_timeout``), its
        shutdown noise (tracebacks of SIGTERM) to the side file."""
        self.output.divert(self.stop_log)
        stop_group(proc, self.config.stop_timeout if timeout is None else timeout)
        self.output.close()

    @property
    def stop_log(self) -> Path:
        """Where the launch's output goes once the sidecar stops it."""
        cfg = self.config
        name = f"attempt-{cfg.attempt}.stop.log"
        return cfg.log_path.with_name(name) if cfg.log_path is not None else cfg.job_dir / name

    def _say_end(self, reason: str, requeued: bool, why: str | None = None) -> None:
        """The attempt's last line in its log: why it stopped and what was kept."""
        last = self._last_step()
        committed = None if self.committed is None else self.committed.get("step")
        what = {
            "preempted": "preemption",
            "time_limit": "the time limit",
            "requeued": "a requeue by Slurm",
            "node_failure": "a node failure",
            "cancelled": "a cancel",
            "resized": "a resize from {} to {} nodes".format(*(self._resize or ("?", "?"))),
            "stopped_idle": "the idle guard: the GPUs sat idle",
        }.get(reason, reason)
        at = f" at step {last}" if last is not None else ""
        head = f"stopped for requeue{at} ({what})" if requeued else f"stopped{at} ({what})"
        if committed is not None:
            kept = f"checkpoint step-{committed} committed"
        elif self.committed is not None:
            kept = "checkpoint committed"
        elif self.failed is not None:  # the trainer said why (checkpoint-failed.json)
            resume = self.failed.get("resume_step")
            kept = (
                f"checkpoint of step {self.failed.get('step')} failed "
                f"({self.failed.get('errno_name') or 'error'}: {self.failed.get('error')}): "
                "the next attempt resumes from "
                + (f"step {resume}" if resume is not None else "the start")
            )
        else:
            kept = f"no checkpoint committed in time; {self._resume_said(requeued)}"
        tail = f"; not requeued: {why}" if why else ""
        self.output.say(
            f"hpclaunch: {head}; {kept}{tail} (the launcher's shutdown output: "
            f"{self.stop_log.name})"
        )

    def _resume_said(self, requeued: bool) -> str:
        """Where the job would go on from: the newest complete checkpoint, or none."""

        where = self._child_env()["HPCLAUNCH_CHECKPOINT_DIR"]
        found = resume_point(where, verify="size", clean=False)
        if found is None:
            return (
                "the next attempt starts from the beginning"
                if requeued
                else f"there is no complete checkpoint in {where}"
            )
        if requeued:
            return f"the next attempt resumes from step {found.step}"
        return f"the newest complete checkpoint is step {found.step}"

    def _launch_argv(self) -> tuple[Rendezvous, list[str]]:
        cfg = self.config
        if "SLURM_JOB_ID" in self.env and "SLURM_JOB_NODELIST" in self.env:
            rdzv = Rendezvous.from_env(self.env, nproc_per_node=cfg.nproc_per_node)
            cpus = self.env.get("SLURM_CPUS_PER_TASK")
            step = container_step(self.env)
            argv = step_argv(
                cfg.launcher,
                rdzv,
                cfg.command,
                # In a step container node-exec runs inside, on the image's interpreter.
                python=self.env.get("HPCLAUNCH_CONTAINER_PYTHON", cfg.python)
                if step
                else cfg.python,
                cpus_per_node=int(cpus) if cpus and cpus.isdigit() else None,
                container_options=step,
            )
            return rdzv, argv
        # Outside Slurm: one node, this host, no srun.
        host = socket.gethostname()
        port = derive_port(str(os.getpid()), port_in_use)
        rdzv = Rendezvous("local", "127.0.0.1", port, (host,), 0, cfg.nproc_per_node or 1)
        return rdzv, exec_argv(cfg.launcher, rdzv, cfg.command, python=cfg.python)

    def _child_env(self) -> dict[str, str]:
        env = dict(self.env)
        env.pop(EARLY_SIGNAL_ENV, None)
        env["HPCLAUNCH_JOB_DIR"] = str(self.config.job_dir)
        env["HPCLAUNCH_CONTROL_DIR"] = str(self.control)
        env["HPCLAUNCH_ATTEMPT"] = str(self.config.attempt)
        env.setdefault("HPCLAUNCH_CHECKPOINT_DIR", str(self.config.job_dir / "checkpoints"))
        env.update(wandb_env(env))
        return env

    # -- the idle guard -----------------------------------------------------------------
    def _idle_too_long(self, nodes: Sequence[str]) -> bool:
        """Every GPU of the job idle for ``HPCLAUNCH_IDLE_STOP_SECONDS`` (checked every
        :data:`IDLE_CHECK` s; hpclaunch/supervise/idle.py)."""
        limit = self.idle_stop
        now = time.time()
        if limit is None or now < self._idle_checked + IDLE_CHECK:
            return False
        self._idle_checked = now
        idle = idle_for(self.control, nodes, now, self._started)
        if idle is None or idle < limit:
            return False
        self._idle_why = (
            f"every GPU of the job below {self.env.get('HPCLAUNCH_GPU_IDLE_UTIL', '5')} % "
            f"for {idle / 60:.1f} min (idle.stop_after: {limit / 60:g} min)"
        )
        return True

    def _on_idle(self, proc: subprocess.Popen[bytes], signals: SignalCatcher) -> int:
        """Checkpoint (as at a preemption, with the warning's lead time), stop the launch and
        end the job, not requeued: ``stopped_idle``, exit :data:`EXIT_STOPPED_IDLE`."""
        why = self._idle_why or "GPUs idle"
        self.ledger.append("idle_stop", why=why)
        deadline = time.time() + max(1.0, self.config.lead - MARGIN)
        self._checkpoint("idle", deadline, proc, signals, time_left=None)
        self._stop(proc)
        self._end("stopped_idle", exit_code=EXIT_STOPPED_IDLE, requeued=False, why=why)
        self._say_end("stopped_idle", requeued=False, why=why)
        return EXIT_STOPPED_IDLE

    # -- endings ------------------------------------------------------------------------
    def _on_exit(self, code: int, history: list[dict[str, Any]]) -> int:
        if code == 0:
            self._end("success", exit_code=0, requeued=False)
            return 0
        # The last launch's lines: an earlier one may have failed to reach slurmctld.
        tail = [x for x in self._log_lines(self._launch_start) if x.strip()][-60:]
        reason = "node_failure" if any(_NODE_FAILURE.search(x) for x in tail) else "user_error"
        extra: dict[str, Any] = {}
        if any(_CONTROLLER_MISSED.search(x) for x in tail):
            reason = "controller_unreachable"
            extra = {
                "why": "srun could not reach slurmctld to start the step, "
                f"{len(LAUNCH_RETRY_WAITS) + 1} times: nothing ran"
            }
        if any(_JOB_LOST.search(x) for x in tail):
            reason = "job_lost"
            extra = {
                "why": "slurmctld does not know this job any more (restarted and lost the "
                "seconds before its last state save?), so srun could not start the step; "
                "Slurm may start it again"
            }
        if reason == "user_error" and any(OOM.search(x) for x in tail):
            reason = "oom"
        if reason in ("user_error", "oom"):
            extra = {"error_line": error_line(tail), "tail": tail[-20:]}
        requeued = False
        if reason == "node_failure":
            requeued = self._maybe_requeue(reason, history) == EXIT_REQUEUED
        if not requeued:
            retried = self._maybe_retry(reason, code, history)
            if retried is not None:
                requeued = True
                extra |= retried
        self._end(reason, exit_code=code, requeued=requeued, **extra)
        return EXIT_REQUEUED if requeued else code

    def _maybe_retry(
        self, reason: str, code: int, history: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The spec's ``retry:`` for a failed attempt (hpclaunch/supervise/retry.py): requeue
        the job and hold its start back by the backoff. Returns what the attempt's end records
        (``retry``: its number, ``retry_wait``, ``retry_at``), or ``None``: not retried."""
        decision = decide_retry(
            RetryPolicy.from_env(self.env),
            reason,
            code,
            history,
            no_progress=self._no_progress(),
            reports_progress=self._last_step() is not None
            or any(e.get("last_step") is not None for e in history),
        )
        if decision is None:
            return None
        if not decision.retry:
            self.ledger.append("retry_skipped", why=decision.why)
            return None
        if "SLURM_JOB_ID" not in self.env:
            self.ledger.append("retry_failed", why="not inside a Slurm job")
            return None
        target = requeue_target(self.env)
        # Never sooner than Slurm's own delay: the job's credential must expire first. Read
        # before the requeue, whose SIGTERM to the job's processes would kill the scontrol
        # asking (clean-clone run 33: Slurm's default taken, 121 s instead of 20).
        slurm_delay = slurm_requeue_delay(self.runner)
        outcome = issue_requeue(self.runner, target, attempt=self.config.attempt)
        if not outcome.ok:
            self.ledger.append(
                "retry_failed", target=target, why=outcome.why, missing=outcome.missing
            )
            return None
        wait = max(decision.wait, float(slurm_delay))
        at = time.time() + wait
        delayed = delay_start(self.runner, target, wait) if wait > slurm_delay else None
        why = f"{decision.why} in {wait:g} s"
        if wait > decision.wait:  # the backoff asked for less than Slurm allows
            why += (
                f" (backoff {decision.wait:g} s; Slurm starts a requeued job no sooner than "
                f"{float(slurm_delay):g} s: its credential must expire first)"
            )
        self.ledger.append(
            "retry_scheduled",
            target=target,
            why=why,
            number=decision.number,
            wait=wait,
            at=round(at, 1),
            **({"delay_failed": delayed.why} if delayed is not None and not delayed.ok else {}),
        )
        self.output.say(f"hpclaunch: {why} (the job waits in the queue until then)")
        return {"retry": decision.number, "retry_wait": wait, "retry_at": round(at, 1)}

    def _on_signal(
        self,
        first: Received,
        proc: subprocess.Popen[bytes],
        signals: SignalCatcher,
        history: list[dict[str, Any]],
    ) -> int:
        self.ledger.append("signal_received", signal=first.name, when=first.at)
        if first.name == "INT":
            self._stop(proc)
            self._end("cancelled", exit_code=proc.returncode, requeued=False, signal="INT")
            self._say_end("cancelled", requeued=False)
            return EXIT_STOPPED
        if first.name == "TERM":
            return self._on_sigterm(first, proc, signals, history)
        left = self._time_left()
        reason, seconds = self._classify_warning(left)
        request_reason = "time_limit" if reason == "time_limit" else "preemption"
        deadline = first.at + max(1.0, seconds - MARGIN)
        self._checkpoint(request_reason, deadline, proc, signals, time_left=left)
        if proc.poll() == 0 and self.committed is None and not self._stopped_for_request():
            return self._finished_at_warning(reason)
        # Before the requeue: Slurm cancels the step at once, and srun and slurmstepd say so.
        self.output.divert(self.stop_log)
        code = self._maybe_requeue(reason, history)
        self._stop(proc)
        self._end(reason, exit_code=proc.returncode, requeued=code == EXIT_REQUEUED)
        why = None if code == EXIT_REQUEUED else self._requeue_why
        self._say_end(reason, requeued=code == EXIT_REQUEUED, why=why)
        return code

    def _on_sigterm(
        self,
        first: Received,
        proc: subprocess.Popen[bytes],
        signals: SignalCatcher,
        history: list[dict[str, Any]],
    ) -> int:
        """SIGTERM without a warning first: a requeue (by someone, or by Slurm after a node
        failure or a preemption), the time limit or a preemption without ``--signal``, or a
        cancel. ``scontrol show job`` tells which; the trainer gets the few seconds left."""
        cfg = self.config
        deadline = first.at + max(1.0, cfg.kill_wait - MARGIN)
        job = self.env.get("SLURM_JOB_ID")
        now = job_now(self.runner, job) if job else None
        restarts = now.restarts if now else None
        requeued = restarts is not None and restarts > cfg.attempt
        cause = "requeued" if requeued else _term_cause(now)
        request = {"time_limit": "time_limit", "cancelled": "cancel"}.get(cause, "preemption")
        self._checkpoint(request, deadline, proc, signals)
        # Slurm SIGKILLs this sidecar KillWait after its SIGTERM: the launch gets what is
        # left of it but the last second, in which the attempt's end is written (a trainer
        # that ignored both the request and SIGTERM once cost the ledger its end).
        left = first.at + cfg.kill_wait - END_RESERVE - time.time()
        self._stop(proc, max(0.2, min(cfg.stop_timeout, left)))
        if now and now.failed_node and requeued and restarts is not None:
            return self._node_failed(proc, now.failed_node, restarts, history)
        if requeued:
            self._end(
                "requeued",
                exit_code=proc.returncode,
                requeued=True,
                signal="TERM",
                restarts=restarts,
                why="Slurm requeued the job (scontrol requeue by a user or operator, or "
                "a preemption without --signal); the next attempt resumes from the last "
                "committed checkpoint",
            )
            self._say_end("requeued", requeued=True)
            return EXIT_STOPPED
        why = {
            "time_limit": "SIGTERM at the time limit without a warning first (no --signal: "
            "checkpoint.max_requeues 0 or launcher none); Slurm ends the job TIMEOUT",
            "preempted": "SIGTERM at a preemption without a warning first; Slurm decides "
            "whether the job comes back",
            "cancelled": "SIGTERM without a warning: scancel (or a signal sent by hand)",
        }[cause]
        self._end(cause, exit_code=proc.returncode, requeued=False, signal="TERM", why=why)
        self._say_end(cause, requeued=False)
        return EXIT_STOPPED

    def _on_resize(
        self,
        request: dict[str, Any],
        proc: subprocess.Popen[bytes],
        signals: SignalCatcher,
        history: list[dict[str, Any]],
    ) -> int | None:
        """``hpclaunch resize`` (or the arbiter) asked for another size: checkpoint, then
        requeue held, update the node count and release (:mod:`hpclaunch.supervise.resize`).
        ``None``: the request was refused (said in the ledger) and the attempt goes on."""
        current = _nodes_now(self.env)
        to = request.get("nodes")
        refused = self._resize_refusal(to, current, request, history)
        self.ledger.append(
            "resize_requested",
            from_nodes=current,
            to_nodes=to,
            why=request.get("why"),
            by=request.get("by"),
            refused=refused,
            request_id=request.get("request_id"),
        )
        if refused is not None or not isinstance(to, int):
            return None
        self._resize = (current, to)
        deadline = time.time() + max(1.0, self.config.resize_wait)
        self._checkpoint("resize", deadline, proc, signals)
        self.output.divert(self.stop_log)  # the requeue stops the steps, and they say so
        target = requeue_target(self.env)
        outcome = resize_at_requeue(self.runner, target, to)
        self.ledger.append(
            "resize_issued" if outcome.held else "resize_failed",
            target=target,
            from_nodes=current,
            to_nodes=to,
            resized=outcome.resized,
            released=outcome.released,
            codes=outcome.codes,
            why=outcome.why,
        )
        if not outcome.held:  # the trainer stopped for the checkpoint: go on at this size
            plain = issue_requeue(self.runner, target, attempt=self.config.attempt)
            self._stop(proc)
            self._end(
                "resize_failed",
                exit_code=proc.returncode,
                requeued=plain.ok,
                from_nodes=current,
                to_nodes=to,
                why=f"scontrol requeuehold failed: {outcome.why}; "
                + ("requeued at the same size" if plain.ok else f"requeue failed: {plain.why}"),
            )
            self._say_end("resize_failed", requeued=plain.ok, why=outcome.why)
            return EXIT_REQUEUED if plain.ok else EXIT_REQUEUE_FAILED
        self._stop(proc)
        step = None if self.committed is None else self.committed.get("step")
        self._end(
            "resized",
            exit_code=proc.returncode,
            requeued=True,
            from_nodes=current,
            to_nodes=to if outcome.resized else current,
            checkpoint_step=step,
        )
        self._say_end("resized", requeued=True, why=None if outcome.resized else outcome.why)
        return EXIT_REQUEUED

    def _resize_refusal(
        self, to: Any, current: int, request: dict[str, Any], history: list[dict[str, Any]]
    ) -> str | None:
        """Why a resize to ``to`` nodes is not done now; ``None``: it is."""
        if not isinstance(to, int) or isinstance(to, bool):
            return f"not a node count: {request.get('nodes', request.get('invalid'))!r}"
        if to not in self.sizes:
            return f"{to} nodes is not one of the job's sizes (elastic.nodes {list(self.sizes)})"
        if to == current:
            return f"the job already runs on {to} nodes"
        if request.get("force"):
            return None
        last = max((e["time"] for e in history if e.get("event") == "resize_issued"), default=0)
        interval = elastic_interval(self.env)
        if time.time() - last < interval:
            return (
                f"the last resize was {time.time() - last:.0f} s ago, and elastic.min_interval "
                f"is {interval} s (force it with hpclaunch resize --force)"
            )
        return None

    def _classify_warning(self, left: float | None) -> tuple[str, float]:
        """(``time_limit`` or ``preempted``, seconds the trainer has to checkpoint), given
        the seconds ``left`` until the time limit (``None``: unknown).

        Before the time limit the trainer has all the time there is, less 8 s for the
        requeue and the stop, not only the lead it asked for: Slurm warns up to lead + 30 s
        early (at its 30-s check, job_mgr.c), and a trainer still starting then (seen on a
        loaded machine: no step 23 s after the start) would otherwise be stopped with no
        checkpoint and not requeued. A trainer that answers at once is requeued at once.
        """
        cfg = self.config
        if left is not None and left <= cfg.lead + TIME_LIMIT_SLACK:
            return "time_limit", max(1.0, left - 8.0)
        return "preempted", cfg.grace

    def _time_left(self) -> float | None:
        """Seconds until the time limit, or ``None`` when nothing says.

        ``squeue -o %L`` first: it follows a ``scontrol update TimeLimit``. When it fails
        (slurmctld busy or restarting) ``SLURM_JOB_END_TIME``, which slurmd sets in the
        batch environment of each attempt (sbatch(1) of 24.11 and 25.11); without either a
        warning is read as preemption.
        """
        job = self.env.get("SLURM_JOB_ID")
        if not job:
            return None

        try:
            result = self.runner.run(["squeue", "-h", "-j", job, "-o", "%L"], timeout=10)
            return float(parse_time(result.stdout.strip().splitlines()[0]))
        except (TransportError, ValueError, IndexError):
            pass
        try:
            return float(self.env["SLURM_JOB_END_TIME"]) - time.time()
        except (KeyError, ValueError):
            return None

    def _finished_at_warning(self, reason: str) -> int:
        """The launch ended by itself, successfully, as the warning came, before the sidecar
        stopped it and with no checkpoint for the request: the work is done. A requeue would
        run it again, from its last checkpoint or from the start (seen on 22.05 under load:
        a trainer warned at its 150th and last step trained all 150 again). Where Slurm
        itself requeues a preempted job when it exits (24.11+), that requeue is forbidden."""
        if reason == "preempted" and "SLURM_JOB_ID" in self.env:
            target = requeue_target(self.env)
            if slurm_requeues_on_exit(self.runner, target):
                self._forbid_requeue(target)
        self._end("success", exit_code=0, requeued=False, warned=reason)
        return 0

    def _stopped_for_request(self) -> bool:
        """Whether an exit 0 after the warning is the trainer stopping for the request, not
        the end of its work: it saw the request (``hpclaunch.runtime`` marks it, before any
        checkpoint it writes for it; clean-clone run 23: a disk-full job whose requested
        checkpoint failed, and which stopped so, was taken as finished and ended COMPLETED
        with its steps undone)."""
        return (self.control / control.SEEN).exists()

    def _forbid_requeue(self, target: str) -> None:
        """Stop Slurm requeuing the job it preempts when it exits, and say so in the ledger."""
        refused = forbid_requeue(self.runner, target)
        self.ledger.append("requeue_forbidden", target=target, ok=refused.ok, why=refused.why)

    def _checkpoint(
        self,
        reason: str,
        deadline: float,
        proc: subprocess.Popen[bytes],
        signals: SignalCatcher,
        *,
        time_left: float | None = None,
    ) -> None:
        """Ask for a checkpoint and wait for it until ``deadline``; ``time_left``: what was
        known of the time limit at the warning (for the ledger)."""
        requested_at = time.time()
        control.write_json_atomic(
            self.control / control.REQUEST,
            {"reason": reason, "requested_at": requested_at, "deadline": deadline},
        )
        self.ledger.append(
            "checkpoint_requested",
            reason=reason,
            deadline=deadline,
            time_left=time_left,
        )
        periodic: dict[str, Any] | None = None
        while time.time() < deadline:
            exited = proc.poll() is not None  # before the read: a last commit is never missed
            done = control.read_json(self.control / control.DONE)
            if done is not None and float(done.get("committed_at", 0)) >= requested_at:
                # A periodic commit that ends after the request was started before the
                # trainer saw it: the trainer goes on and writes the requested checkpoint
                # next, so it is the answer only if the launch stops after it.
                if done.get("reason") != control.PERIODIC or exited:
                    self.committed = done
                    self.ledger.append(
                        "checkpoint_committed",
                        step=done.get("step"),
                        seconds=done.get("seconds"),
                        path=done.get("path"),
                        reason=done.get("reason"),
                        after=round(time.time() - requested_at, 3),
                    )
                    return
                periodic = done
            self._note_failed_checkpoint()
            if exited:
                break
            got = signals.wait(_POLL)
            if got is not None:
                self.ledger.append("signal_received", signal=got.name, when=got.at)
                if got.name in ("TERM", "INT"):
                    break  # the grace is over: requeue now with what is committed
        self.ledger.append(
            "checkpoint_timeout",
            waited=round(time.time() - requested_at, 3),
            periodic_step=None if periodic is None else periodic.get("step"),
        )

    def _node_failed(
        self,
        proc: subprocess.Popen[bytes],
        node: str,
        restarts: int,
        history: list[dict[str, Any]],
    ) -> int:
        """A node of the job failed: Slurm already requeued it (NODE_FAIL). The requeue
        counts against ``max_requeues``; past the cap the requeued job is cancelled."""
        decision = decide(
            "node_failure",
            history,
            max_requeues=self.config.max_requeues,
            no_progress=self._no_progress(),
            preemptible=self.config.preemptible,
        )
        if not decision.requeue:
            cancelled = cancel_requeued(self.runner, requeue_target(self.env))
            self.ledger.append(
                "requeue_skipped",
                why=decision.why,
                cancelled=cancelled.target,
                ok=cancelled.ok,
                cancel_failed=cancelled.why,
            )
            self._requeue_why = decision.why
        self._end(
            "node_failure",
            exit_code=proc.returncode,
            requeued=decision.requeue,
            signal="TERM",
            restarts=restarts,
            failed_node=node,
            why=f"node {node} failed: Slurm requeued the job (NODE_FAIL); {decision.why}",
        )
        self._say_end("node_failure", requeued=decision.requeue, why=self._requeue_why)
        return EXIT_STOPPED

    def _note_failed_checkpoint(self) -> None:
        """Record a new ``checkpoint-failed.json`` of the trainer as ``checkpoint_failed``."""
        path = self.control / control.FAILED
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return
        if mtime == self.failed_seen:
            return
        self.failed_seen = mtime
        failed = control.read_json(path)
        if failed is None:
            return
        self.failed = failed
        keys = ("step", "errno", "errno_name", "error", "dir", "resume_step", "reason")
        self.ledger.append("checkpoint_failed", **{k: failed.get(k) for k in keys})

    def _maybe_requeue(self, reason: str, history: list[dict[str, Any]]) -> int:
        decision = decide(
            reason,
            history,
            max_requeues=self.config.max_requeues,
            no_progress=self._no_progress(),
            preemptible=self.config.preemptible,
        )
        inside = "SLURM_JOB_ID" in self.env
        target = requeue_target(self.env) if inside else ""
        # Slurm 24.11+ requeues a job it preempts when the job exits; a requeue of ours on
        # top would make it run once more after it completes (requeue.py's docstring).
        by_slurm = inside and reason == "preempted" and slurm_requeues_on_exit(self.runner, target)
        if not decision.requeue:
            if by_slurm:
                self._forbid_requeue(target)
            self.ledger.append("requeue_skipped", why=decision.why)
            self._requeue_why = decision.why
            return EXIT_NOT_REQUEUED
        if not inside:
            self.ledger.append("requeue_failed", target=None, why="not inside a Slurm job")
            self._requeue_why = "not inside a Slurm job"
            return EXIT_REQUEUE_FAILED
        if by_slurm:
            self.ledger.append("requeue_by_slurm", target=target, why=decision.why)
            return EXIT_REQUEUED
        outcome = issue_requeue(self.runner, target, attempt=self.config.attempt)
        if outcome.ok:
            seen = {"seen": outcome.why} if outcome.why else {}
            self.ledger.append("requeue_issued", target=outcome.target, why=decision.why, **seen)
            return EXIT_REQUEUED
        self.ledger.append(
            "requeue_failed", target=outcome.target, why=outcome.why, missing=outcome.missing
        )
        self._requeue_why = outcome.why
        return EXIT_REQUEUE_FAILED

    # -- bookkeeping ----------------------------------------------------------------------
    def _last_step(self) -> int | None:
        steps = [control.read_step(self.control / control.PROGRESS)]
        if self.committed is not None:
            steps.append(control.read_step(self.control / control.DONE))
        known = [s for s in steps if s is not None]
        return max(known) if known else None

    def _no_progress(self) -> bool:
        last = self._last_step()
        return last is None or last == self.start_step

    def _end(self, reason: str, *, exit_code: int | None, requeued: bool, **extra: Any) -> None:
        last = self._last_step()
        committed = None if self.committed is None else self.committed.get("step")
        if committed is None:  # none asked for: the trainer's own schedule may have committed
            done = control.read_json(self.control / control.DONE) or {}
            if done.get("attempt") == self.config.attempt:  # cleared at each attempt's start
                committed = done.get("step")
        # Without a commit, a failed checkpoint named the resume point (checkpoint-failed.json).
        resume = committed if committed is not None else (self.failed or {}).get("resume_step")
        lost = None
        if isinstance(last, int) and isinstance(resume, int) and reason != "success":
            lost = max(0, last - resume)  # what the next attempt redoes (none after success)
        progress = control.read_json(self.control / control.PROGRESS) or {}
        if progress.get("attempt") == self.config.attempt and "samples_per_s" in progress:
            # The throughput at this size (runtime.report_progress(samples=...)).
            extra.setdefault("samples_per_s", progress["samples_per_s"])
            extra.setdefault("world_size", progress.get("world_size"))
        self.ledger.append(
            "attempt_end",
            reason=reason,
            exit_code=exit_code,
            requeued=requeued,
            last_step=last,
            committed_step=committed,
            steps_lost=lost,
            no_progress=self._no_progress(),
            preemptible=self.config.preemptible,
            **extra,
        )


def _resize_seconds(history: list[dict[str, Any]]) -> float | None:
    """Seconds from the resize request that ended the last attempt to now (this attempt's
    start): what the resize cost, checkpoint and Slurm's restart included. ``None``: the
    last attempt did not end resized."""
    ends = [e for e in history if e.get("event") == "attempt_end"]
    if not ends or ends[-1].get("reason") != "resized":
        return None
    asked = [e for e in history if e.get("event") == "resize_requested" and not e.get("refused")]
    when = asked[-1].get("time") if asked else None
    return round(time.time() - when, 1) if isinstance(when, (int, float)) else None


def _nodes_now(env: Mapping[str, str]) -> int:
    """The nodes this attempt runs on (``SLURM_JOB_NUM_NODES``, older ``SLURM_NNODES``)."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        if env.get(name, "").isdigit():
            return int(env[name])
    return 1


def _term_cause(now: JobNow | None) -> str:
    """What a SIGTERM that is no requeue means: ``time_limit``, ``preempted`` or
    ``cancelled`` (also when slurmctld could not be asked)."""
    if now is None:
        return "cancelled"
    if now.at_time_limit:
        return "time_limit"
    return "preempted" if now.preempting else "cancelled"


def wandb_env(env: Mapping[str, str]) -> dict[str, str]:
    """``WANDB_RUN_ID``/``WANDB_RESUME`` so that every attempt continues one W&B run.

    The run id is the submission id (uuid4 hex: 32 of W&B's allowed ``[a-z0-9]``, at most
    64), the same in every attempt; ``WANDB_RESUME=allow`` makes ``wandb.init`` resume it
    when it exists. Variables the user already set (spec ``env`` or the submitting shell)
    are never overridden; without a submission id (not submitted by hpclaunch), nothing.
    """
    run_id = re.sub(r"[^a-z0-9]", "", env.get("HPCLAUNCH_SUBMISSION_ID", "").lower())[:64]
    if not run_id:
        return {}
    out = {"WANDB_RUN_ID": run_id, "WANDB_RESUME": "allow"}
    return {key: value for key, value in out.items() if key not in env}


def end_by(stopped_by: str | None) -> None:
    """End this process by the signal that stopped the attempt, as a process without a
    handler would: Slurm then records it as it does for a plain job (``CANCELLED``, exit
    ``0:15``) instead of the sidecar's 143 (the shell's 128 + 15). Returns if it could not."""
    if stopped_by is None:
        return
    sig = getattr(signal, f"SIG{stopped_by}")
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def error_line(lines: Sequence[str]) -> str | None:
    """The last line that names an exception (``ValueError: ...``) and is not what the
    other ranks and the launcher said because of it (:data:`_AFTERMATH`), else the last
    line that is not srun's own.

    When one rank of a torchrun launch fails, the others then fail too ("Connection closed
    by peer", or SIGTERM: ``SignalException``) and torchrun ends with ``ChildFailedError``;
    those come last, but the first rank's exception is the cause
    (tests/supervise/data/torchrun-2.13-rank1-raises.txt).
    """
    for line in reversed(lines):
        match = _ERROR_LINE.match(line.strip())
        if match and not _AFTERMATH.search(line):
            return match.group(1)
    for line in reversed(lines):
        if not line.startswith("srun:"):
            return line
    return None


def stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group of ``proc``, wait up to ``timeout``, SIGKILL what is left.

    The group outlives its leader when a child ignores SIGTERM or daemonizes, so the wait is
    for the whole group (``killpg(pgid, 0)``), not only ``proc``.
    """
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    _killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_alive(pgid):
            break
        time.sleep(0.05)
    else:
        _killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        _killpg(pgid, signal.SIGKILL)
        proc.wait()
    end = time.monotonic() + 2
    while _group_alive(pgid) and time.monotonic() < end:
        _killpg(pgid, signal.SIGKILL)
        time.sleep(0.02)


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is in group ``pgid``.

    Zombies answer ``kill(0)`` too, and an orphaned one may wait seconds for its reaper, so
    ``/proc`` is read where it exists (Linux); elsewhere ``killpg(pgid, 0)`` decides.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """The pids of live (not zombie) processes in group ``pgid`` (Linux ``/proc``)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # bytes: comm is cut at 15 bytes, maybe inside a UTF-8 character
            stat = (entry / "stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # fields: state ppid pgrp ... (proc(5))
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members
