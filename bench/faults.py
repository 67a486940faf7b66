"""Faults survived, as figures (issue 19): each fault made to happen on the local cluster.

    .venv/bin/python bench/faults.py [--trials 3] [--clients 8] [--seconds 60] [--cuts 25]
        [--victims 10] [--points 1000] [--task-points 1000]
        [--only node_loss,node_killed,disk_full,dbd_down,clients,link_cut,preempt_anywhere,
                ctld_killed,tasks_killed]

Needs the running local cluster (docker/slurm-cluster/cluster.sh up). The fault drivers
are tests/integration/faults.py's, which the suite runs once each with small counts
(tests/integration/test_faults_on_cluster.py); here they run ``--trials`` times (the
clients: once, for ``--seconds``) and every outcome is counted, none asserted:

* ``node_loss``: a 2-node torchrun job (tier low, a checkpoint every 10 steps) whose second
  node is set DOWN after 33 steps: Slurm ends the attempt NODE_FAIL and requeues it.
  Survived: the attempt ended ``node_failure``, the job COMPLETED with the twin's weights,
  attempt 1 resumed right after a complete checkpoint. Duplicates: attempts beyond the two.
  Time to recover: from the node going down to attempt 1's start.
* ``node_killed`` (Slurm 25.11+): a 1-node job under the sidecar (tier low) whose node
  dies: its slurmd and processes SIGKILLed, the node marked DOWN at once. Twice: on a site
  with ``expedited_requeue: true`` (``--requeue=expedite``) and on the plain local site.
  Survived: NODE_FAIL, then COMPLETED on another node. Time to recover: from the node's
  loss to the job RUNNING again (squeue); a plain requeue waits ``cred_expire`` + 1 s.
* ``disk_full``: a 2-node torchrun job checkpointing every 10 steps onto the cluster's
  16 MiB tmpfs; the test fills it after the first checkpoint, a periodic checkpoint and
  then the one a preemption warning asks for fail with ENOSPC, the job is requeued, the
  space freed. Survived: COMPLETED, final weights equal the uninterrupted twin's, every
  checkpoint directory left complete, attempt 1 resumed right after the last complete
  checkpoint. Steps retrained: the last step attempt 0 trained minus that checkpoint's.
  Time to recover: from the failed asked-for checkpoint to attempt 1's start (Slurm's
  restart delay is most of it).
* ``dbd_down``: slurmdbd (and MariaDB) stopped while a 1-GPU job is submitted and runs.
  Survived: submit worked, ``status`` showed it COMPLETED (from squeue), ``cost`` said
  accounting is unavailable (exit 1, no traceback), and once slurmdbd was back ``cost``
  counted the job once (lost: not at all; duplicates: more than once). Time to recover:
  from slurmdbd's start to sacct knowing the job.
* ``clients``: 8 CLI processes at once for a minute (submit, status, history, a
  capability refresh) on one history database and cache. Survived: no call failed or said
  "database is locked", no read of the cache was torn. Jobs lost: submissions missing
  from the history; duplicates: history rows beyond one per job.

* ``link_cut``: ``submit --sync`` over SSH (a real sshd on loopback) through a proxy that
  resets the connection after N bytes, N drawn from each of ``--cuts`` equal slices of
  what an uncut submission moves; each time a fresh tree, and one retry with the same
  submission id if the call failed. Survived: exactly one job, every store object whole,
  the snapshot holds the tree, no traceback. Time to recover: the retry's duration.

* ``preempt_anywhere``: ``--victims`` 2-node, 4-rank trainers, each preempted by critical
  jobs at random moments (tests/integration/preempt_anywhere.py: where each signal landed
  is observed). Trials: preemptions delivered. Survived: those of runs that COMPLETED with
  the twin's weights, every attempt resumed after the newest complete checkpoint, none
  skipped a step, one attempt per preemption. Duplicates: attempts beyond that.

* ``ctld_killed``: a sweep of ``--points`` points (arrays of 101, the cluster's
  MaxArraySize) whose second sbatch finds slurmctld SIGKILLed 6 s after the first array
  (past its 5 s state-save delay), then 0 s after (inside it: slurmctld loses the array
  and gives its id to the next one), retried with ``--sweep-id`` once slurmctld is back, then
  once more (tests/integration/faults.py sweep_outage). Trials: points; survived: points
  run exactly once (each task leaves a marker), when the cut-off call exited 3 and no call
  printed a traceback; lost: points never run; duplicates: runs beyond one.

* ``tasks_killed``: a sweep of ``--task-points`` points (srun launcher, each task 1 s)
  whose slurmctld is SIGKILLed once a tenth of them are done, and started 3 s later
  (faults.ctld_killed_while_tasks_run; meanwhile it runs the ``scontrol release`` that
  ``sweep status`` names and resumes drained nodes, as a user and an admin would).
  Survived: points finished exactly once (a marker each); lost: points never finished;
  duplicates: finishes beyond one; notes: what slurmctld's recovery did to the tasks.

Prints one row per fault (the "Faults" table of bench/RESULTS.md and the README).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.runtime import verify_checkpoint  # noqa: E402
from tests.integration.conftest import Cli  # noqa: E402
from tests.integration.faults import (  # noqa: E402
    EVERY,
    accounting_outage,
    concurrent_clients,
    disk_full_trial,
    expedited_site,
    node_killed_trial,
    node_loss_trial,
    same_weights_as_twin,
)
from tests.integration.test_sidecar_on_cluster import STEPS, _steps  # noqa: E402


@dataclass
class Row:
    fault: str
    trials: int = 0
    survived: int = 0
    lost: int = 0
    duplicates: int = 0
    retrained: list[int] = field(default_factory=list)
    recover: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count_points(self, points: int, runs: Mapping[str, int], *, clean: bool = True) -> None:
        """A sweep's figures from its markers (point → finished runs): survived, points run
        exactly once (none unless ``clean``); lost, points never run; duplicates, extra
        runs."""
        self.trials = points
        self.survived = sum(1 for n in runs.values() if n == 1) if clean else 0
        self.lost = points - len(runs)
        self.duplicates = sum(n - 1 for n in runs.values())

    def cells(self) -> list[str]:
        steps = f"{sum(self.retrained)} ({', '.join(map(str, self.retrained))})"
        recover = (
            f"{statistics.median(self.recover):.1f} / {max(self.recover):.1f} s"
            if self.recover
            else "-"
        )
        return [
            self.fault,
            str(self.trials),
            str(self.survived),
            str(self.lost),
            str(self.duplicates),
            steps if self.retrained else "-",
            recover,
        ]


def release() -> tuple[int, int]:
    import subprocess

    out = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=True)
    major, minor = out.stdout.split()[-1].split(".")[:2]
    return int(major), int(minor)


def node_killed(trials: int, expedite: bool) -> Row:
    how = "--requeue=expedite" if expedite else "--requeue"
    row = Row(f"node killed, marked DOWN ({how})")
    for trial in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            site = str(expedited_site(Path(tmp))) if expedite else "local"
            seen = node_killed_trial(Cli(Path(tmp) / "state", site=site), Path(tmp))
        row.trials += 1
        ok = seen.final == "COMPLETED" and seen.states == ["NODE_FAIL", "COMPLETED"]
        row.survived += ok
        row.lost += seen.final != "COMPLETED"
        row.duplicates += max(0, len(seen.states) - 2)
        if seen.restart_seconds is not None:
            row.recover.append(seen.restart_seconds)
        print(
            f"  trial {trial + 1}: {seen.final}, {' → '.join(seen.states)}, running again "
            f"on {seen.restarted_on} {seen.restart_seconds:.1f} s after {seen.victim} died "
            f"(ExpeditedRequeue={seen.expedited or 'No'}; Slurm's requeue delay "
            f"{seen.requeue_delay} s)",
            flush=True,
        )
    return row


def disk_full(trials: int) -> Row:
    row = Row("disk full during checkpoints (ENOSPC)")
    for trial in range(trials):
        with (
            tempfile.TemporaryDirectory() as tmp,
            disk_full_trial(Cli(Path(tmp) / "state"), Path(tmp), release()) as jobs,
        ):
            row.trials += 1
            state = jobs.wait_final("full", 180)
            twin_state = jobs.wait_final("twin", 120)
            ledger = jobs.events("full")["ledger"]
            failed = [e for e in ledger if e["event"] == "checkpoint_failed"]
            starts = [e for e in ledger if e["event"] == "attempt_start"]
            before, after = _steps(jobs.shared, "full", 0), _steps(jobs.shared, "full", 1)
            complete = all(verify_checkpoint(p) is not None for p in jobs.ckpt.glob("step-*"))
            same = same_weights_as_twin(jobs, "full")
            ok = (
                state == twin_state == "COMPLETED"
                and same
                and complete
                and bool(after)
                and after[0] == EVERY + 1
                and after[-1] == STEPS
            )
            row.survived += ok
            row.lost += state != "COMPLETED"
            if before:
                row.retrained.append(before[-1] - EVERY)
            if failed and len(starts) > 1:
                row.recover.append(starts[1]["time"] - failed[-1]["time"])
            print(
                f"  trial {trial + 1}: {state}, weights {'equal' if same else 'DIFFER'}, "
                f"{len(failed)} failed checkpoints, retrained {row.retrained[-1:]}",
                flush=True,
            )
    return row


def node_loss(trials: int) -> Row:
    row = Row("node lost mid-run (scontrol State=DOWN)")
    for trial in range(trials):
        with (
            tempfile.TemporaryDirectory() as tmp,
            node_loss_trial(Cli(Path(tmp) / "state"), Path(tmp), release()) as jobs,
        ):
            row.trials += 1
            state = jobs.wait_final("lost", 180)
            twin_state = jobs.wait_final("twin", 120)
            ledger = jobs.events("lost")["ledger"]
            ends = [e for e in ledger if e["event"] == "attempt_end"]
            starts = [e for e in ledger if e["event"] == "attempt_start"]
            before, after = _steps(jobs.shared, "lost", 0), _steps(jobs.shared, "lost", 1)
            same = same_weights_as_twin(jobs, "lost")
            ok = (
                state == twin_state == "COMPLETED"
                and same
                and bool(ends)
                and ends[0]["reason"] == "node_failure"
                and bool(after)
                and (after[0] - 1) % EVERY == 0
                and after[-1] == STEPS
            )
            row.survived += ok
            row.lost += state != "COMPLETED"
            row.duplicates += max(0, len(starts) - 2)
            if before and after:
                row.retrained.append(before[-1] - (after[0] - 1))
            if len(starts) > 1:
                row.recover.append(starts[1]["time"] - jobs.downed_at)
            print(
                f"  trial {trial + 1}: {state}, weights {'equal' if same else 'DIFFER'}, "
                f"attempt 0 ended {ends[0]['reason'] if ends else '?'}, "
                f"retrained {row.retrained[-1:]}",
                flush=True,
            )
    return row


def dbd_down(trials: int) -> Row:
    row = Row("slurmdbd (and MariaDB) down")
    for trial in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            seen = accounting_outage(Cli(Path(tmp) / "state"), Path(tmp))
        row.trials += 1
        attempts = [
            a
            for a in seen.cost_after.get("attempts", [])  # type: ignore[attr-defined]
            if a["job_id"] == seen.job_id
        ]
        ok = (
            seen.submit is not None
            and seen.submit.returncode == 0
            and seen.status is not None
            and "COMPLETED" in seen.status.stdout
            and seen.cost is not None
            and seen.cost.returncode == 1
            and "Traceback" not in seen.cost.stderr
        )
        row.survived += ok and len(attempts) == 1
        row.lost += len(attempts) == 0
        row.duplicates += max(0, len(attempts) - 1)
        if seen.reconciled_after is not None:
            row.recover.append(seen.reconciled_after)
        after = seen.reconciled_after or 0.0
        print(
            f"  trial {trial + 1}: job {seen.job_id}, in cost {len(attempts)}x, "
            f"accounted {after:.1f} s after slurmdbd started",
            flush=True,
        )
    return row


def clients(count: int, seconds: float) -> Row:
    row = Row(f"{count} concurrent clients, {seconds:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        run = concurrent_clients(Path(tmp) / "state", Path(tmp), clients=count, seconds=seconds)
    import subprocess

    subprocess.run(["scancel", *run.submitted], check=False, capture_output=True)
    row.trials = sum(run.calls.values())
    row.survived = row.trials - len(run.failures) - run.torn_reads
    row.lost = len(run.lost)
    row.duplicates = run.duplicates
    row.notes.append(
        f"{dict(run.calls)} calls, {len(run.submitted)} jobs submitted, "
        f"{run.cache_reads} cache reads ({run.torn_reads} torn)"
    )
    for command, code, text in run.failures[:3]:
        row.notes.append(f"failed: {command} (exit {code}): {text.strip().splitlines()[-1:]}")
    return row


def link_cut(cuts: int) -> Row:
    import shutil
    import subprocess

    from tests.integration.linkcut import (
        cut_points,
        jobs_with,
        link_cut_trial,
        make_tree,
        uncut_bytes,
    )
    from tests.integration.sshd import Client, Sshd, keygen, public_dir

    row = Row(f"SSH link reset during submit --sync ({cuts} points)")
    keys = public_dir()
    server = Sshd([keygen(keys / "id_ed25519")])
    with tempfile.TemporaryDirectory() as tmp:
        client = Client.of(server, keys / "id_ed25519", Path(tmp))
        try:
            total = uncut_bytes(client, server, Path(tmp))
            in_call = 0
            for n, point in enumerate(cut_points(total, cuts, seed=19)):
                trial = link_cut_trial(client, server, make_tree(Path(tmp) / f"t{n}"), point)
                said = trial.first_err + trial.retry_err
                clean = "Traceback" not in said and "Aborted" not in said
                row.trials += 1
                row.survived += trial.survived and trial.cut and clean
                row.lost += not trial.jobs
                row.duplicates += max(0, len(trial.jobs) - 1)
                in_call += trial.first_rc == 0
                if trial.retried:
                    row.recover.append(trial.retry_seconds)
                print(
                    f"  cut at byte {point}: first call exit {trial.first_rc}"
                    + (f", retry exit {trial.retry_rc}" if trial.retried else "")
                    + f", jobs {len(trial.jobs)}, bad objects {len(trial.bad_objects)}, "
                    f"snapshot {'whole' if trial.snapshot_ok else 'BROKEN'}"
                    + ("" if trial.cut else ", NOT CUT (ended first)")
                    + ("" if clean else f", a TRACEBACK: {said[-300:]!r}"),
                    flush=True,
                )
            row.notes.append(
                f"an uncut submission moves over {total} bytes; {in_call} cuts were "
                f"recovered inside the call, {row.trials - in_call} by one retry "
                "(time to recover: that retry)"
            )
        finally:
            for job in jobs_with("it-cut-"):
                subprocess.run(["scancel", job], check=False, capture_output=True)
            server.stop()
            shutil.rmtree(client.job_root_top, ignore_errors=True)
            shutil.rmtree(keys, ignore_errors=True)
    return row


def preempt_anywhere(victims: int) -> Row:
    from collections import Counter

    from tests.integration.preempt_anywhere import PreemptRun

    row = Row(f"preempted anywhere, 2 nodes x 2 ranks ({victims} runs)")
    with tempfile.TemporaryDirectory() as tmp:
        run = PreemptRun(Cli(Path(tmp) / "state"), Path(tmp), seed=19)
        try:
            done = run.run(victims)
        finally:
            run.close()
    where: Counter[str] = Counter()
    corrupt = 0
    for victim in done:
        points = [p for p in victim.injected if p.observed]
        where.update(
            "asked-for write killed" if p.kind == "asked-for write killed" else p.observed
            for p in points
        )
        row.trials += len(points)
        row.survived += len(points) if victim.survived else 0
        row.lost += victim.state != "COMPLETED"
        row.duplicates += max(0, len(victim.attempts) - 1 - victim.preemptions)
        row.retrained.append(victim.retrained)
        row.recover += victim.recovery()
        corrupt += sum("resumed after" in problem for problem in victim.problems)
        print(
            f"  {victim.key} ({victim.job_id}): {victim.state}, weights "
            f"{'equal' if victim.same_weights else 'DIFFER'}, points "
            f"{[p.observed or p.kind + ' (no signal)' for p in victim.injected]}, "
            f"{len(victim.attempts)} attempts, retrained {victim.retrained}"
            + (f", PROBLEMS {victim.problems}" if victim.problems else ""),
            flush=True,
        )
    row.notes.append(
        f"where the signal landed: {dict(where)}; {corrupt} corrupt resumes; steps "
        "retrained per run; time to recover: critical job submitted -> next attempt's start"
    )
    return row


def ctld_killed(points: int, wait: float) -> Row:
    from tests.integration.faults import sweep_outage

    row = Row(f"slurmctld SIGKILLed mid-sweep, {wait:g} s after an sbatch ({points} points)")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        seen = sweep_outage(Cli(Path(tmp) / "state"), Path(tmp), points, wait=wait)
        total = time.monotonic() - started
    calls = [c for c in (seen.first, seen.status_down, seen.retry, seen.again) if c is not None]
    clean = all("Traceback" not in c.stderr for c in calls)
    first_ok = seen.first is not None and seen.first.returncode == 3
    retried = seen.retry is not None and seen.retry.returncode == 0
    resubmitted = seen.retry.stderr.count("not known to slurmctld") if seen.retry else "?"
    row.count_points(points, seen.runs, clean=clean and first_ok)
    row.notes.append(
        f"first call exit {seen.first.returncode if seen.first else '?'}, retry "
        f"{'ok' if retried else 'FAILED'}; sweep status during the outage exit "
        f"{seen.status_down.returncode if seen.status_down else '?'} in "
        f"{seen.status_down_seconds:.1f} s; arrays tagged once each: {len(seen.tagged)}; "
        f"final counts {seen.status.get('counts')}; arrays slurmctld lost and the retry "
        f"submitted again: {resubmitted}; {total:.0f} s in all"
    )
    return row


def tasks_killed(points: int) -> Row:
    from tests.integration.faults import ctld_killed_while_tasks_run

    row = Row(f"slurmctld SIGKILLed while a sweep's tasks start and end ({points} points)")
    with tempfile.TemporaryDirectory() as tmp:
        seen = ctld_killed_while_tasks_run(Cli(Path(tmp) / "state"), Path(tmp), points)
    row.count_points(points, seen.runs)
    row.notes.append(
        f"killed when {seen.killed_at_markers} points were done; final counts "
        f"{seen.status.get('counts')}; tasks started again that found their point "
        f"completed: {seen.skipped}, that waited for a running copy: {seen.waited}; "
        f"tasks whose ends slurmctld lost (COMPLETED by their ledgers): {seen.lost_ends}; "
        f"attempts srun found unknown to slurmctld (job_lost): {seen.job_lost}; tasks "
        f"Slurm held after a failed launch (released): {len(seen.released)}; nodes Slurm "
        f"drained (resumed): {', '.join(sorted(seen.drained)) or 'none'}"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--cuts", type=int, default=25)
    parser.add_argument("--victims", type=int, default=10)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--task-points", type=int, default=1000)
    parser.add_argument(
        "--only",
        default="node_loss,node_killed,disk_full,dbd_down,clients,link_cut,preempt_anywhere,"
        "ctld_killed,tasks_killed",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    started = time.monotonic()
    rows = []
    if "node_loss" in only:
        print(f"node_loss: {args.trials} trials", flush=True)
        rows.append(node_loss(args.trials))
    if "node_killed" in only:
        if release() < (25, 11):
            print("node_killed: Slurm before 25.11 has no expedited requeue", flush=True)
        else:
            for expedite in (True, False):
                print(f"node_killed (expedite {expedite}): {args.trials} trials", flush=True)
                rows.append(node_killed(args.trials, expedite))
    if "disk_full" in only:
        print(f"disk_full: {args.trials} trials", flush=True)
        rows.append(disk_full(args.trials))
    if "dbd_down" in only:
        print(f"dbd_down: {args.trials} trials", flush=True)
        rows.append(dbd_down(args.trials))
    if "clients" in only:
        print(f"clients: {args.clients} for {args.seconds:.0f} s", flush=True)
        rows.append(clients(args.clients, args.seconds))
    if "link_cut" in only:
        print(f"link_cut: {args.cuts} cut points", flush=True)
        rows.append(link_cut(args.cuts))
    if "ctld_killed" in only:
        for wait in (6.0, 0.0):  # past slurmctld's 5 s state-save delay, and inside it
            print(f"ctld_killed: a sweep of {args.points} points, {wait:g} s", flush=True)
            rows.append(ctld_killed(args.points, wait))
    if "tasks_killed" in only:
        print(f"tasks_killed: a sweep of {args.task_points} points", flush=True)
        rows.append(tasks_killed(args.task_points))
    if "preempt_anywhere" in only:
        print(f"preempt_anywhere: {args.victims} runs", flush=True)
        rows.append(preempt_anywhere(args.victims))
    head = ["fault", "trials", "survived", "jobs lost", "duplicates", "steps retrained",
            "time to recover (median / max)"]  # fmt: skip
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row.cells()) + " |")
    for row in rows:
        for note in row.notes:
            print(f"{row.fault}: {note}")
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
