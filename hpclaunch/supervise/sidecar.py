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
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch.supervise import control
from hpclaunch.supervise.attempt import (
    EXIT_NOT_REQUEUED,
    EXIT_REQUEUE_FAILED,
    EXIT_REQUEUED,
    EXIT_STOPPED,
    EXIT_STOPPED_IDLE,
    MARGIN,
    POLL,
    Launch,
)
from hpclaunch.supervise.checkpoints import CheckpointWatch
from hpclaunch.supervise.end_note import end_fields, end_line
from hpclaunch.supervise.failures import (
    CONTROLLER_MISSED,
    LAUNCH_RETRY_WAITS,
    SLURM_ENDED_REASONS,
    classify_exit,
    oom_culprit,
    term_cause,
)
from hpclaunch.supervise.idle import clear_idle_state
from hpclaunch.supervise.launch import EARLY_SIGNAL_ENV, child_env, launch_argv
from hpclaunch.supervise.ledger import Ledger
from hpclaunch.supervise.notices import Notifier
from hpclaunch.supervise.on_idle import IdleGuard, stop_idle
from hpclaunch.supervise.on_oom import OomWatch
from hpclaunch.supervise.on_requeue import finished_at_warning, node_failed, requeue
from hpclaunch.supervise.on_resize import on_resize, resize_seconds
from hpclaunch.supervise.on_retry import retry_failed
from hpclaunch.supervise.on_trial import tell_trial, trial_was_pruned
from hpclaunch.supervise.output import OutputGate
from hpclaunch.supervise.process_group import stop_group
from hpclaunch.supervise.requeue import end_expedited, finished_attempt, job_now
from hpclaunch.supervise.resize import elastic_sizes, read_request
from hpclaunch.supervise.sidecar_config import SidecarConfig
from hpclaunch.supervise.signals import Received, SignalCatcher
from hpclaunch.supervise.warning import classify_warning, time_left
from hpclaunch.transport.base import Runner

__all__ = [
    "EXIT_NOT_REQUEUED",
    "EXIT_REQUEUED",
    "EXIT_REQUEUE_FAILED",
    "EXIT_STOPPED",
    "EXIT_STOPPED_IDLE",
    "Sidecar",
    "SidecarConfig",
]

#: Seconds kept, after SIGTERM, to write the attempt's end before Slurm's SIGKILL.
END_RESERVE = 1.0


class Sidecar:
    """One attempt of the sidecar. ``Sidecar(config, runner).run()`` returns the exit code.
    It is the :class:`~hpclaunch.supervise.attempt.AttemptControl` its handlers act on.

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
        self.output: OutputGate  # made by run(): the launch's output, see stop
        self.control = config.control_dir
        self.checkpoints = CheckpointWatch(self.control, self.ledger)
        #: ``TERM`` or ``INT`` when that signal stopped the attempt (see ``end_by``).
        self.stopped_by: str | None = None
        self._launch_start = 0  # the attempt log's size when the last launch started
        self.sizes = elastic_sizes(self.env)  # () unless the job is elastic
        self.idle = IdleGuard(self.env, self.control, time.time())
        self.oom = OomWatch(multi_rank=False)  # the launch's ranks are known in _run

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
            code = self._run(caught)
        # EXIT_STOPPED: Slurm itself ends this run (a requeue, a cancel, the time limit).
        if code > 0 and code != EXIT_STOPPED:
            end_expedited(self.runner, self.env)
        return code

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
        self.checkpoints.start_step = control.read_step(self.control / jobdir.PROGRESS)
        rdzv, argv = launch_argv(cfg, self.env)
        self.oom.multi_rank = rdzv.nnodes * rdzv.nproc_per_node > 1
        self.ledger.append(
            "attempt_start",
            nodes=list(rdzv.nodes),
            master_addr=rdzv.master_addr,
            master_port=rdzv.master_port,
            launcher=cfg.launcher,
            argv=argv,
            progress_step=self.checkpoints.start_step,
            resize_seconds=resize_seconds(history),
        )
        for retry in range(len(LAUNCH_RETRY_WAITS) + 1):
            self.output = OutputGate()
            start = self._launch_start = self._log_size()
            try:
                proc = subprocess.Popen(
                    argv,
                    env=child_env(cfg, self.env, oom_kill_step=self.oom.multi_rank),
                    start_new_session=True,
                    stdout=self.output.write_fd,
                    stderr=self.output.write_fd,
                )
            except OSError as exc:
                self.output.close()
                self.end("launch_failed", exit_code=127, requeued=False, why=str(exc))
                return 127
            self.output.child_started()
            launch = Launch(proc, signals, history)
            if retry == 0:
                self._replay_early_signal()
            while proc.poll() is None:
                got = signals.wait(POLL)
                self.checkpoints.note_failed()
                if got is not None:
                    code = self._on_signal(got, launch)
                    if code == EXIT_STOPPED:
                        self.stopped_by = got.name
                    return code
                if self.sizes and (request := read_request(self.control)) is not None:
                    resized = on_resize(self, request, launch, self.sizes)
                    if resized is not None:
                        return resized
                if (why := self.idle.why_stop(rdzv.nodes)) is not None:
                    return stop_idle(self, launch, why)
                if self.oom.poll():
                    return self._stop_for_oom(launch)
            self.checkpoints.note_failed()
            code = proc.returncode
            stop_group(proc, cfg.stop_timeout)  # leftovers of the group, if any
            self.output.close()  # every line is in the log before its tail is read
            if code == 0 or retry == len(LAUNCH_RETRY_WAITS):
                break
            if not any(CONTROLLER_MISSED.search(x) for x in self._log_lines(start)):
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

    def stop(self, launch: Launch, timeout: float | None = None) -> None:
        """Stop the launch (SIGKILL after ``timeout``, default ``stop_timeout``), its
        shutdown noise (tracebacks of SIGTERM) to the side file."""
        self.output.divert(self.stop_log)
        stop_group(launch.proc, self.config.stop_timeout if timeout is None else timeout)
        self.output.close()

    @property
    def stop_log(self) -> Path:
        """Where the launch's output goes once the sidecar stops it."""
        cfg = self.config
        name = f"attempt-{cfg.attempt}.stop.log"
        return cfg.log_path.with_name(name) if cfg.log_path is not None else cfg.job_dir / name

    def say_end(
        self,
        reason: str,
        requeued: bool,
        why: str | None = None,
        *,
        resized: tuple[int, int] | None = None,
    ) -> None:
        """The attempt's last line in its log: why it stopped and what was kept."""
        where = child_env(self.config, self.env)["HPCLAUNCH_CHECKPOINT_DIR"]
        line = end_line(
            reason,
            requeued,
            why,
            watch=self.checkpoints,
            checkpoint_dir=where,
            stop_log=self.stop_log,
            resized=resized,
        )
        self.output.say(line)

    # -- endings ------------------------------------------------------------------------
    def _on_exit(self, code: int, history: list[dict[str, Any]]) -> int:
        if code == 0:
            # An adaptive sweep's trial that its pruner stopped ends cleanly too.
            reason = "pruned" if trial_was_pruned(self.control) else "success"
            self.end(reason, exit_code=0, requeued=False)
            return 0
        # The last launch's lines: an earlier one may have failed to reach slurmctld.
        tail = [x for x in self._log_lines(self._launch_start) if x.strip()][-60:]
        reason, extra = classify_exit(tail)
        self.oom.note_reported(tail)
        kills = self.oom.new_kills()
        if reason == "user_error" and kills:  # a kill no line of the log names
            reason = "oom"
            extra["error_line"] = (
                f"the kernel killed {kills} process(es) of the job on this node for memory "
                "(OOM kill in the job's cgroup)"
            )
        if reason == "oom":
            here = self.env.get("SLURMD_NODENAME")
            extra |= ({"oom_node": here} if kills and here else {}) | oom_culprit(
                tail, self.config.launcher
            )
        if reason in SLURM_ENDED_REASONS:  # Slurm's own requeue, or none: never a retry
            self.end(reason, exit_code=code, requeued=reason == "requeued", **extra)
            self.say_end(reason, requeued=reason == "requeued", why=extra["why"])
            return EXIT_STOPPED
        requeued = reason == "node_failure" and requeue(self, reason, history).requeued
        if not requeued:
            retried = retry_failed(self, reason, code, history, mem_limit=self.oom.limit())
            if retried is not None:
                requeued = True
                extra |= retried
        self.end(reason, exit_code=code, requeued=requeued, **extra)
        return EXIT_REQUEUED if requeued else code

    def _stop_for_oom(self, launch: Launch) -> int:
        """A rank of a multi-rank launch was OOM-killed on this node: stop the others now
        (on_oom.py), and end the attempt as out of memory."""
        self.ledger.append(
            "oom_stop",
            oom_kills=self.oom.new_kills(),
            why="the kernel killed a process of the job for memory: the other ranks are "
            "stopped rather than left waiting for it",
        )
        self.stop(launch)
        code = launch.proc.returncode
        return self._on_exit(code if code else 1, launch.history)

    def _on_signal(self, first: Received, launch: Launch) -> int:
        proc = launch.proc
        self.ledger.append("signal_received", signal=first.name, when=first.at)
        if first.name == "INT":
            self.stop(launch)
            self.end("cancelled", exit_code=proc.returncode, requeued=False, signal="INT")
            self.say_end("cancelled", requeued=False)
            return EXIT_STOPPED
        if first.name == "TERM":
            return self._on_sigterm(first, launch)
        left = time_left(self.runner, self.env)
        reason, seconds = classify_warning(left, lead=self.config.lead, grace=self.config.grace)
        request_reason = "time_limit" if reason == "time_limit" else "preemption"
        deadline = first.at + max(1.0, seconds - MARGIN)
        self.checkpoint(request_reason, deadline, launch, time_left=left)
        committed = self.checkpoints.committed is not None
        if proc.poll() == 0 and not committed and not self._stopped_for_request():
            return finished_at_warning(self, reason)
        # Before the requeue: Slurm cancels the step at once, and srun and slurmstepd say so.
        self.output.divert(self.stop_log)
        ending = requeue(self, reason, launch.history)
        self.stop(launch)
        self.end(reason, exit_code=proc.returncode, requeued=ending.requeued)
        self.say_end(reason, requeued=ending.requeued, why=ending.why)
        return ending.code

    def _on_sigterm(self, first: Received, launch: Launch) -> int:
        """SIGTERM without a warning first: a requeue (by someone, or by Slurm after a node
        failure or a preemption), the time limit or a preemption without ``--signal``, or a
        cancel. ``scontrol show job`` tells which; the trainer gets the few seconds left."""
        cfg = self.config
        proc = launch.proc
        deadline = first.at + max(1.0, cfg.kill_wait - MARGIN)
        job = self.env.get("SLURM_JOB_ID")
        now = job_now(self.runner, job) if job else None
        restarts = now.restarts if now else None
        requeued = restarts is not None and restarts > cfg.attempt
        cause = "requeued" if requeued else term_cause(now)
        request = {"time_limit": "time_limit", "cancelled": "cancel"}.get(cause, "preemption")
        self.checkpoint(request, deadline, launch)
        # Slurm SIGKILLs this sidecar KillWait after its SIGTERM: the launch gets what is
        # left of it but the last second, in which the attempt's end is written (a trainer
        # that ignored both the request and SIGTERM once cost the ledger its end).
        left = first.at + cfg.kill_wait - END_RESERVE - time.time()
        self.stop(launch, max(0.2, min(cfg.stop_timeout, left)))
        if now and now.failed_node and requeued and restarts is not None:
            return node_failed(self, launch, now.failed_node, restarts)
        if requeued:
            self.end(
                "requeued",
                exit_code=proc.returncode,
                requeued=True,
                signal="TERM",
                restarts=restarts,
                why="Slurm requeued the job (scontrol requeue by a user or operator, or "
                "a preemption without --signal); the next attempt resumes from the last "
                "committed checkpoint",
            )
            self.say_end("requeued", requeued=True)
            return EXIT_STOPPED
        why = {
            "time_limit": "SIGTERM at the time limit without a warning first (no --signal: "
            "checkpoint.max_requeues 0 or launcher none); Slurm ends the job TIMEOUT",
            "preempted": "SIGTERM at a preemption without a warning first; Slurm decides "
            "whether the job comes back",
            "cancelled": "SIGTERM without a warning: scancel (or a signal sent by hand)",
        }[cause]
        self.end(cause, exit_code=proc.returncode, requeued=False, signal="TERM", why=why)
        self.say_end(cause, requeued=False)
        return EXIT_STOPPED

    def _stopped_for_request(self) -> bool:
        """Whether an exit 0 after the warning is the trainer stopping for the request, not
        the end of its work: it saw the request (``hpclaunch.runtime`` marks it, before any
        checkpoint it writes for it; clean-clone run 23: a disk-full job whose requested
        checkpoint failed, and which stopped so, was taken as finished and ended COMPLETED
        with its steps undone)."""
        return (self.control / jobdir.SEEN).exists()

    # -- what the handlers do to the attempt (AttemptControl) ---------------------------
    def checkpoint(
        self, reason: str, deadline: float, launch: Launch, *, time_left: float | None = None
    ) -> None:
        """Ask for a checkpoint and wait for it until ``deadline``."""
        self.checkpoints.request_and_wait(reason, deadline, launch, time_left=time_left)

    @property
    def committed_step(self) -> int | None:
        """The step of the checkpoint committed for this attempt's request, if any."""
        return self.checkpoints.committed_step

    def last_step(self) -> int | None:
        """The newest step the trainer reported or committed."""
        return self.checkpoints.last_step()

    def no_progress(self) -> bool:
        """Whether this attempt went no step further than where it started."""
        return self.checkpoints.no_progress()

    def end(self, reason: str, *, exit_code: int | None, requeued: bool, **extra: Any) -> None:
        """Record the attempt's end (``attempt_end``) in the ledger."""
        fields = end_fields(reason, self.checkpoints, self.control, self.config.attempt, extra)
        fields |= self.oom.fields()
        self.ledger.append(
            "attempt_end",
            reason=reason,
            exit_code=exit_code,
            requeued=requeued,
            **fields,
            preemptible=self.config.preemptible,
            **extra,
        )
        try:
            told = tell_trial(self.env, self.control, reason, requeued)
        except Exception as exc:  # the study's storage must not cost the job its end
            told = f"hpclaunch: could not tell the study how this trial ended: {exc}"
        if told is not None:
            self.output.say(told)
