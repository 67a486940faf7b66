"""Preemption at random points of a 2-node, 4-rank data-parallel run (issue 19, fault 6),
shared by test_faults_on_cluster.py (a few points) and bench/faults.py (many).

A victim is examples/ddp_train.py under torchrun on 2 nodes x 2 ranks (tier ``low``: Slurm
preempts it for a critical job, with 10 s of grace), checkpointing every :data:`EVERY`
steps with each periodic write held open for :data:`WRITE_SECONDS`, so that a good part
of its time is spent inside checkpoint writes. A thread per victim walks a random plan:

* ``random moment``: a critical job on the victim's nodes asking for all their GPUs,
  submitted at a random moment of an attempt (from its sidecar's start to its last
  steps). Slurm's preemption signal lands a few seconds later; where it lands is
  *observed*: ``start-up`` (torchrun's start and rendezvous: rank 0 has trained no step
  of this attempt), ``checkpoint write`` (a ``.tmp-`` checkpoint directory exists) or
  ``mid-step``;
* ``asked-for write killed``: the same, but the trainer's on-request write takes longer
  than the grace time (``--save-sleep``), so Slurm kills it mid-write;
* ``requeue``: a second preemption notice (USR1, what Slurm sends) while the first one's
  checkpoint and requeue are under way.

Afterwards each attempt's resume is checked against the checkpoints on disk: it resumed
after the newest checkpoint that was complete when it began, and trained on without a
gap; the last attempt reached the last step; the final weights equal an uninterrupted
twin's.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from hpclaunch.runtime import verify_checkpoint
from hpclaunch.supervise.ledger import read_ledger

from .conftest import Cli
from .test_sidecar_on_cluster import VENV, Jobs, _preempt, _steps
from .test_sidecar_on_cluster import _submit as submit

STEPS = 120
EVERY = 10
#: How long each periodic checkpoint write stays open (the trainer's test hook).
WRITE_SECONDS = 2.0
#: Longer than tier low's grace time (10 s, site-configs/local.yaml): killed mid-write.
SLOW_ASKED_WRITE = 25.0
#: Where a random moment's signal may land (see the module docstring).
OBSERVED = ("start-up", "mid-step", "checkpoint write")
_FOUR_RANKS: dict[str, Any] = {
    "launcher": "torchrun",
    "venv": VENV,
    "resources": {"nodes": 2, "gpus_per_node": 2, "time": "00:08:00", "mem": "900M"},
}


#: What a second notice meant for the requeue shows when it reached the next attempt: on a
#: loaded machine scancel delivered it 18 s late, 6 s into attempt 1 (clean-clone run 18),
#: where the sidecar rightly took it for a preemption.
LATE_NOTICE = "in the next attempt"


@dataclass
class Point:
    """One preemption: its planned kind, the attempt it is for, when it was injected (unix
    time; ``None``: not injected, the attempt or the job ended first), and where the
    signal landed (``observed``: see :data:`OBSERVED`; ``requeue``; "" if no signal came
    before the attempt ended)."""

    kind: str
    attempt: int
    at: float | None = None
    observed: str = ""


@dataclass
class Attempt:
    """What one attempt did: the step it resumed after, the steps it trained (rank 0's
    log) and when it started (its sidecar's ``attempt_start``)."""

    index: int
    resumed_after: int | None  # None: it trained no step
    steps: list[int]
    started: float


@dataclass
class Victim:
    """One preempted job and what it showed."""

    key: str
    job_id: str
    plan: list[Point]
    state: str = ""
    same_weights: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def injected(self) -> list[Point]:
        return [p for p in self.plan if p.at is not None]

    @property
    def preemptions(self) -> int:
        """Preemptions whose signal reached the job (a second notice during the requeue
        is not one: it must not cause another attempt)."""
        return sum(
            1
            for p in self.injected
            if (p.kind != "requeue" and p.observed) or p.observed == LATE_NOTICE
        )

    def recovery(self) -> list[float]:
        """Seconds from each preemption's injection to the next attempt's start."""
        starts = {a.index: a.started for a in self.attempts}
        return [
            starts[p.attempt + 1] - p.at
            for p in self.injected
            if p.kind != "requeue" and p.observed and p.attempt + 1 in starts and p.at
        ]

    @property
    def retrained(self) -> int:
        """Steps trained twice: each training attempt's last step minus the step the next
        training attempt resumed after."""
        trained = [a for a in self.attempts if a.steps]
        return sum(a.steps[-1] - (b.steps[0] - 1) for a, b in pairwise(trained))

    @property
    def survived(self) -> bool:
        return self.state == "COMPLETED" and self.same_weights and not self.problems


def make_plan(rng: random.Random) -> list[Point]:
    """A first point on attempt 0 (1 in 4: with the asked-for write killed), then maybe a
    second notice during its requeue, then maybe a point on attempt 1."""
    first = "asked-for write killed" if rng.random() < 0.25 else "random moment"
    plan = [Point(first, 0)]
    if rng.random() < 0.5:
        plan.append(Point("requeue", 0))
    if rng.random() < 0.5:
        plan.append(Point("random moment", 1))
    return plan


class PreemptRun:
    """A twin and ``victims`` victims (one at a time per node pair: n[1-2], n[3-4]), each
    with its own random plan; :meth:`run` returns them checked."""

    def __init__(self, cli: Cli, spec_dir: Path, seed: int) -> None:
        self.cli = cli
        self.spec_dir = spec_dir
        self.rng = random.Random(seed)
        self.shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
        self.ids: dict[str, str] = {}
        self.jobs = Jobs(cli, self.shared, self.ids)
        self.preemptors: list[str] = []
        self._lock = threading.Lock()

    def _train(self, key: str, *extra: str) -> list[str]:
        out = self.shared / key
        return [
            "python",
            "examples/ddp_train.py",
            "--steps",
            str(STEPS),
            "--every",
            str(EVERY),
            "--periodic-save-sleep",
            str(WRITE_SECONDS),
            "--keep",
            "0",
            "--log-dir",
            str(out),
            "--hash-out",
            str(out / "final.sha256"),
            *extra,
        ]

    def twin(self) -> str:
        """Run the uninterrupted twin to its end; its final weights' hash."""
        self.ids["twin"] = submit(
            self.cli, self.spec_dir, "twin", command=self._train("twin"), **_FOUR_RANKS
        )
        state = self.jobs.wait_final("twin", 240)
        assert state == "COMPLETED", f"the twin ended {state}"
        return (self.shared / "twin" / "final.sha256").read_text()

    def run(self, victims: int) -> list[Victim]:
        """Submit ``victims`` victims, two at a time, inject their plans, check them."""
        self.shared.mkdir(parents=True, exist_ok=True)
        twin = self.twin()
        done: list[Victim] = []
        for first in range(0, victims, 2):
            numbers = range(first, min(first + 2, victims))
            pair = [
                self._start(n, nodes)
                for n, nodes in zip(numbers, ("n[1-2]", "n[3-4]"), strict=False)
            ]
            threads = [threading.Thread(target=self._walk, args=(v,)) for v in pair]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for victim in pair:
                victim.state = self.jobs.wait_final(victim.key, 300)
                self._check(victim, twin)
            done += pair
        return done

    def _start(self, n: int, nodes: str) -> Victim:
        key = f"victim{n}"
        plan = make_plan(self.rng)
        slow = ("--save-sleep", str(SLOW_ASKED_WRITE))
        extra = slow if plan[0].kind == "asked-for write killed" else ()
        self.ids[key] = submit(
            self.cli,
            self.spec_dir,
            key,
            command=self._train(key, *extra),
            tier="low",
            checkpoint={"max_requeues": 5},
            sbatch_extra={"--nodelist": nodes},
            **_FOUR_RANKS,
        )
        return Victim(key, self.ids[key], plan)

    # -- injecting --------------------------------------------------------------------

    def _ledger(self, victim: Victim) -> list[dict[str, Any]]:
        try:
            return read_ledger(self.jobs.job_dir(victim.key))
        except (KeyError, OSError):
            return []

    def _last_step(self, victim: Victim, attempt: int) -> int:
        steps = _steps(self.shared, victim.key, attempt)
        return steps[-1] if steps else 0

    def _ended(self, victim: Victim, attempt: int) -> bool:
        return any(
            e["event"] == "attempt_end" and e["attempt"] == attempt for e in self._ledger(victim)
        )

    def _wait(self, victim: Victim, ready: Callable[[], bool], attempt: int | None = None) -> bool:
        """Wait until ``ready()``; ``False`` if ``attempt`` (or the whole job) ended first."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if ready():
                return True
            ledger = self._ledger(victim)
            ends = [e for e in ledger if e["event"] == "attempt_end"]
            if any(e["reason"] == "success" for e in ends):
                return False
            if attempt is not None and any(e["attempt"] == attempt for e in ends):
                return False
            time.sleep(0.05)
        return False

    def _seen(self, victim: Victim, attempt: int, *events: str) -> bool:
        return any(e["event"] in events and e["attempt"] == attempt for e in self._ledger(victim))

    def _walk(self, victim: Victim) -> None:
        try:
            for point in victim.plan:
                signals = self._count(victim, point.attempt, "signal_received")
                if self._inject(victim, point):
                    point.at = time.time()
                    point.observed = self._observe(victim, point, signals)
        except Exception as exc:  # a thread's error would vanish: make it a failure
            victim.problems.append(f"injecting failed: {exc!r}")

    def _count(self, victim: Victim, attempt: int, event: str) -> int:
        return sum(
            1 for e in self._ledger(victim) if e["event"] == event and e["attempt"] == attempt
        )

    def _observe(self, victim: Victim, point: Point, signals: int) -> str:
        """Where the attempt was when the next signal reached its sidecar: polled every
        50 ms until ``signal_received`` shows up in the ledger."""
        if point.kind == "requeue":
            return "requeue"
        ckpt = self.jobs.job_dir(victim.key) / "checkpoints"
        n = point.attempt
        where = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._count(victim, n, "signal_received") > signals:
                return where
            if self._seen(victim, n, "attempt_end"):
                return ""
            if any(ckpt.glob(".tmp-*")):
                where = "checkpoint write"
            elif self._last_step(victim, n) == 0:
                where = "start-up"
            else:
                where = "mid-step"
            time.sleep(0.05)
        return ""

    def _inject(self, victim: Victim, point: Point) -> bool:
        n = point.attempt
        if not self._wait(victim, lambda: self._seen(victim, n, "attempt_start")):
            return False
        if point.kind == "requeue":
            under_way = ("checkpoint_committed", "requeue_by_slurm", "requeue_issued")
            if not self._wait(victim, lambda: self._seen(victim, n, *under_way, "attempt_end")):
                return False
            sent = subprocess.run(
                ["scancel", "--batch", "--signal=USR1", victim.job_id], capture_output=True
            )
            return sent.returncode == 0  # not when the batch step has already ended
        # From the sidecar's start (torchrun still starting) to well before the end.
        time.sleep(self.rng.uniform(0.0, 25.0))
        if self._seen(victim, n, "attempt_end"):
            return False
        try:
            preemptor = _preempt(victim.job_id)
        except subprocess.CalledProcessError:  # it ended meanwhile: no nodes to ask for
            return False
        with self._lock:
            self.preemptors.append(preemptor)
        return True

    # -- checking ---------------------------------------------------------------------

    def _check(self, victim: Victim, twin: str) -> None:
        final = self.shared / victim.key / "final.sha256"
        victim.same_weights = final.exists() and final.read_text() == twin
        ckpt = self.jobs.job_dir(victim.key) / "checkpoints"
        starts = [e for e in self._ledger(victim) if e["event"] == "attempt_start"]
        for start in starts:
            n = start["attempt"]
            steps = _steps(self.shared, victim.key, n)
            attempt = Attempt(n, steps[0] - 1 if steps else None, steps, start["time"])
            victim.attempts.append(attempt)
            if not steps:  # stopped before its first step: it resumed nothing
                continue
            # Resumed from the newest checkpoint that was complete when the attempt began
            # (none is pruned: --keep 0), and trained on from there without a gap.
            newest = max(_complete_before(ckpt, start["time"]), default=0)
            if attempt.resumed_after != newest:
                victim.problems.append(
                    f"attempt {n} resumed after step {attempt.resumed_after}, the newest "
                    f"complete checkpoint was step {newest}"
                )
            if steps != list(range(steps[0], steps[-1] + 1)):
                victim.problems.append(f"attempt {n} skipped steps")
        self._late_notices(victim)
        trained = [a for a in victim.attempts if a.steps]
        if not trained or trained[-1].steps[-1] != STEPS:
            victim.problems.append("no attempt reached the last step")
        if len(victim.attempts) != 1 + victim.preemptions:
            victim.problems.append(
                f"{len(victim.attempts)} attempts for {victim.preemptions} preemptions"
            )

    def _late_notices(self, victim: Victim) -> None:
        """Mark a requeue notice that reached the next attempt (a signal there before any
        point planned for that attempt was injected): a preemption of that attempt."""
        ledger = self._ledger(victim)
        for point in victim.injected:
            if point.kind != "requeue":
                continue
            nxt = point.attempt + 1
            planned = [p.at for p in victim.injected if p.attempt == nxt and p.at is not None]
            before = min(planned, default=float("inf"))
            if any(
                e["event"] == "signal_received" and e["attempt"] == nxt and e["when"] < before
                for e in ledger
            ):
                point.observed = LATE_NOTICE

    def close(self) -> None:
        """Cancel every job of the run; remove its files."""
        subprocess.run(
            ["scancel", *self.preemptors, *self.ids.values()], check=False, capture_output=True
        )
        shutil.rmtree(self.shared, ignore_errors=True)


def _complete_before(ckpt: Path, when: float) -> list[int]:
    """The steps of the checkpoints in ``ckpt`` that were complete before ``when``: their
    manifest verifies and their directory's mtime (the manifest's write, the last before
    the rename that commits it) is earlier."""
    steps = []
    for path in ckpt.glob("step-*"):
        try:
            if path.stat().st_mtime < when and verify_checkpoint(path) is not None:
                steps.append(int(path.name.removeprefix("step-")))
        except (OSError, ValueError):
            continue
    return steps


__all__ = ["OBSERVED", "Point", "PreemptRun", "Victim", "make_plan"]
