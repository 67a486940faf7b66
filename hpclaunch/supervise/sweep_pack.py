"""A packed sweep task (``sweep.pack: N``): the points of one array task, one after another
in its allocation.

The batch script of a packed sweep execs::

    <python> -m hpclaunch.supervise.sweep_pack --params <job dir>/sweep-params.jsonl \
        --pack N --points M --keep K -- ARGV...

with ``HPCLAUNCH_SWEEP_INDEX`` = the task's pack *k* (the array's offset + its task id). Pack
*k* is points ``k * N`` .. ``k * N + N - 1`` (fewer in the last). For each point in turn this
runs :mod:`hpclaunch.supervise.sweep_task` as a child with ``HPCLAUNCH_SWEEP_INDEX`` = the
point, so each point is what an unpacked task is: its own directory, ledger, checkpoints and
final metrics under ``tasks/<point>/``, its own log ``<log dir>/tasks/<point>/attempt-A.log``
(A: the task's attempt), its own sidecar (its own job step, its own retry) and the same
point-once guard. A point whose ledger says it ended ``success`` is skipped: a task that
Slurm starts again (a preemption, a requeue for a time limit or a retry, a node failure)
runs only its unfinished points, the interrupted one resuming from its own checkpoint.

Signals: Slurm's warning (``--signal=B:USR1``: preemption or the time limit) and its
SIGTERM reach this process, the batch shell's exec; they are passed to the point running
now, whose sidecar checkpoints and requeues the task, and no further point starts. The
children start with USR1 and USR2 ignored, as the batch script starts an unpacked task's
sidecar (templates/command.sh.j2), so the warning cannot kill a sidecar still importing.

Without a launcher (``launcher: none``) a point has no sidecar: this writes its ledger's
``attempt_start`` and ``attempt_end`` itself (``success``, or ``user_error`` with its exit
code), so that ``sweep status`` and the skip above read every point alike.

The exit code is 0 when every point ended ``success`` (or the task was requeued, or
stopped by Slurm), else 1: Slurm's record of the task then says a point failed. A job that
asked Slurm's expedited requeue first clears its Requeue (Slurm would hold it: sidecar.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from types import FrameType

from hpclaunch.supervise.launch import EARLY_SIGNAL_ENV
from hpclaunch.supervise.ledger import Ledger, read_ledger
from hpclaunch.supervise.requeue import (
    PACK_MORE_ENV,
    end_expedited,
    issue_requeue,
    requeue_target,
    slurm_requeues_on_exit,
)
from hpclaunch.supervise.sweep_task import completed_at, points_of, task_dir
from hpclaunch.transport.local import LocalRunner

__all__ = ["PackRun", "main"]

#: The signals passed on to the point running now.
FORWARDED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)


class PackRun:
    """The points of one packed task, run in turn (see the module docstring)."""

    def __init__(self, task_argv: Sequence[str], env: Mapping[str, str], *, sidecar: bool) -> None:
        self.task_argv = list(task_argv)
        self.env = dict(env)
        self.sidecar = sidecar
        self.attempt = int(self.env.get("HPCLAUNCH_ATTEMPT") or 0)
        self.job_dir = self.env.get("HPCLAUNCH_JOB_DIR") or os.getcwd()
        self.log_dir = self.env.get("HPCLAUNCH_LOG_DIR") or self.job_dir
        self.child: subprocess.Popen[bytes] | None = None
        self.stopped_by: int | None = None  # the first signal that arrived
        # A warning that came while the batch script set up (command.sh.j2): the first
        # point's sidecar acts on it, and no point starts after that one.
        self.early = self.env.pop(EARLY_SIGNAL_ENV, "")

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """Pass the signal to the point running now; start no further point."""
        if self.stopped_by is None:
            self.stopped_by = signum
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it just ended
                os.kill(self.child.pid, signum)

    def run(self, points: range) -> int:
        """Run the points not yet completed; the pack's exit code."""
        failed = []
        for point in points:
            if self.stopped_by is not None:
                break
            own = task_dir(self.job_dir, point)
            os.makedirs(own, exist_ok=True)
            done = completed_at(own)
            if done is not None:
                print(f"hpclaunch: sweep point {point} already completed ({done})", flush=True)
                continue
            print(f"hpclaunch: sweep point {point}: starting", flush=True)
            code = self._run_point(point, own, more=point != points[-1])
            end = _last_end(own)
            if end is not None and end.get("requeued"):
                print(f"hpclaunch: sweep point {point}: the task was requeued", flush=True)
                return 0
            reason = end.get("reason") if end is not None else None
            print(f"hpclaunch: sweep point {point}: ended {reason} (exit {code})", flush=True)
            if reason != "success" and self.stopped_by is None:
                failed.append(point)
        if self.stopped_by is not None:
            print(f"hpclaunch: pack stopped by {signal.Signals(self.stopped_by).name}", flush=True)
            if self.stopped_by not in (signal.SIGUSR1, signal.SIGUSR2):
                return 143
            if any(completed_at(task_dir(self.job_dir, p)) is None for p in points):
                self._requeue()  # warned between two points: the rest must run again
            return 0
        if failed:
            print(f"hpclaunch: sweep points {failed} failed", flush=True)
            return 1
        return 0

    def _requeue(self) -> None:
        """Requeue the task for its unfinished points, unless Slurm does it as the task
        exits (a preemption, 24.11+: requeue.py)."""
        if "SLURM_JOB_ID" not in self.env:
            return
        runner, target = LocalRunner(), requeue_target(self.env)
        if not slurm_requeues_on_exit(runner, target):
            done = issue_requeue(runner, target, attempt=self.attempt)
            print(f"hpclaunch: pack requeued: {done.ok} {done.why or ''}", flush=True)

    def _run_point(self, point: int, own: str, *, more: bool) -> int:
        logs = task_dir(self.log_dir, point)
        os.makedirs(logs, exist_ok=True)
        env = {**self.env, "HPCLAUNCH_SWEEP_INDEX": str(point)}
        if more:  # a point done as a warning comes still requeues the task
            env[PACK_MORE_ENV] = "1"
        if self.early in ("USR1", "USR2"):
            env[EARLY_SIGNAL_ENV] = self.early
            self.stopped_by = signal.Signals[f"SIG{self.early}"]
            self.early = ""
        ledger = None if self.sidecar else Ledger(own, self.attempt)
        if ledger is not None:
            ledger.append("attempt_start", launcher="none", pack_point=point)
        with open(os.path.join(logs, f"attempt-{self.attempt}.log"), "ab") as log:
            self.child = subprocess.Popen(
                self.task_argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_ignore_warnings,  # no threads here: preexec_fn is safe
            )
            code = self.child.wait()
        if ledger is not None:
            reason = "success" if code == 0 else "user_error"
            ledger.append("attempt_end", reason=reason, exit_code=code, requeued=False)
        return code


def _ignore_warnings() -> None:
    """In the child before its exec: Slurm's warning signals ignored until the sidecar
    installs its handlers (an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def _last_end(own: str) -> dict[str, object] | None:
    ends = [e for e in read_ledger(own) if e.get("event") == "attempt_end"]
    return ends[-1] if ends else None


def main(argv: Sequence[str] | None = None, environ: MutableMapping[str, str] | None = None) -> int:
    """Entry point: run the pack, return its exit code."""
    parser = argparse.ArgumentParser(prog="python -m hpclaunch.supervise.sweep_pack")
    parser.add_argument("--params", required=True, help="the sweep's params file")
    parser.add_argument("--pack", type=int, required=True, help="points per task")
    parser.add_argument("--points", type=int, required=True, help="points in the sweep")
    parser.add_argument("--keep", type=int, default=0, help="leading words not substituted")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    raw = env.get("HPCLAUNCH_SWEEP_INDEX", "")
    if not raw.isdigit() or args.pack < 1:
        print(f"hpclaunch sweep pack: HPCLAUNCH_SWEEP_INDEX is {raw!r}", file=sys.stderr)
        return 2
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    task = [sys.executable, "-m", "hpclaunch.supervise.sweep_task", "--params", args.params]
    task += [f"--keep={args.keep}", "--", *command]
    run = PackRun(task, env, sidecar=args.keep > 0)
    for signum in FORWARDED:
        signal.signal(signum, run.on_signal)
    code = run.run(points_of(int(raw), args.pack, args.points))
    if code == 1:
        end_expedited(LocalRunner(), env)  # else Slurm holds the task
    return code


if __name__ == "__main__":
    raise SystemExit(main())
