"""Checkpoint-aware preemption on the real cluster: Slurm-native vs ``hpclaunch arbiter``,
and how far the simulator's prediction of each is from what was measured (issue 8).

    .venv/bin/python bench/arbiter_cluster.py [--jobs 100] [--seed 1] [--compress 60]

Needs the running local cluster (16 GPUs: 4 nodes x 4) and nothing else on it. One
workload, run twice on the cluster, each run then replayed by the simulator:

* **Workload**: the simulator's synthetic generator (``hpclaunch/scheduling/simulate/workload.py``,
16
  GPUs, 4 per node, offered load ``--load``), time-compressed by ``--compress`` (TE
  median 10 min -> 10 s, BE 2 h -> 2 min at 60) and clamped (TE 10-60 s, BE 15-300 s; the
  arrivals are rescaled so that the offered load is still ``--load``). TE jobs are tier
  ``high``, ``sleep D`` (launcher none); BE jobs are tier ``low`` (preemptible), the tiny
  trainer under the sidecar (launcher srun, steps of 0.5 s, a periodic checkpoint every
  30 min / compress of work), 1 to 16 GPUs, some on 2 or 4 nodes. Submitted with
  ``hpclaunch submit`` at their arrival times.
* **native**: the local site as it is (``preempt/qos``: Slurm picks the victims). The BE
  trainers ignore the checkpoint request (``--ignore-requests``): a preempted job keeps
  only its last periodic checkpoint, as the simulator's ``slurm-native`` models it.
* **arbiter**: the same site with ``preemption: arbiter`` (QOS Preempt lists empty) and
  ``hpclaunch arbiter --interval 1`` running; the trainers commit on request.

Measured from ``sacct -D`` (every attempt): slowdown = (final end - first submit) / run
time, where run time = the job's work + its start-up overhead (the median of the time held -
work over the jobs of its class that ran once); lost GPU-seconds = sum over the preempted
jobs of GPUs x (time held over all attempts - run time) (a job run once loses nothing, as in
the simulator; counting it would add the spread of its start-up around the median). The time
each run held its GPUs comes from the daemons' logs, to the millisecond (slurmctld's start,
the batch host's slurmd's end; sacct's whole seconds where the logs do not match). The
simulator replays the same jobs with their measured submit times, run times and periodic
checkpoint interval, on 4 x 4 GPUs, with the mechanism's timings, measured in the same run
from the BE jobs' ledgers (native: the sidecar waits out the grace for a commit that never
comes; arbiter: a notice, half the arbiter's interval plus the signal -> the commit's start,
during which the trainer trains on, then the write and exit, lost), and the requeue delay
Slurm is configured with (``cred_expire`` + 1 = 11 s). Two predictions: ``exact`` (the
simulator's default model: backfill knows every run time) and ``limits`` (backfill plans
with the jobs' time limits, 10 min TE / 40 min BE here, as Slurm's does). Prints the
measured metrics, both predictions and their errors (goal for the TE p95 slowdown and the
lost work: <= 15 %).

``--json FILE`` keeps the raw record (every job's attempts, the preempted BE jobs' ledgers,
the arbiter's decisions); ``--replay FILE`` (repeatable) analyses such records again without
the cluster, e.g. the 2026-11-23 run in ``bench/data/`` (rebuilt from ``sacct -D`` and the
ledgers: that run's script printed aggregates only, with the arbiter's then cap of 2
preemptions per job and no ``--min-run``). ``--min-run`` is how long a job preempted before
runs again before the arbiter (and the simulated ``ours``) may choose it again: 300 s /
``--compress`` unless given; ``--max-preemptions`` adds a cap by count (off unless given).
With ``--replay`` both change the simulation only: what the run would have done with other
caps.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.scheduling.simulate.engine import SimConfig, simulate  # noqa: E402
from hpclaunch.scheduling.simulate.metrics import percentile  # noqa: E402
from hpclaunch.scheduling.simulate.model import BE, TE, Job  # noqa: E402
from hpclaunch.scheduling.simulate.policies import Ours, Policy, SlurmNative  # noqa: E402
from hpclaunch.scheduling.simulate.workload import WorkloadParams, generate  # noqa: E402
from hpclaunch.scheduling.victims import MIN_RUN  # noqa: E402
from tests.integration.conftest import CLUSTER_LOCK, HPCLAUNCH, Cli  # noqa: E402

VENV = str(REPO / ".venv")
TRAINER = str(REPO / "tests/integration/tiny_trainer.py")
STEP = 0.5  # seconds per trainer step
NODES, GPN = 4, 4
GRACE = 10.0  # the low QOS's GraceTime (site-configs/local.yaml)
ARBITER_INTERVAL = 1.0
#: A requeued job may start again after cred_expire + 1 s (docker/slurm-cluster/etc/*/slurm.conf:
#: AuthInfo=cred_expire=10).
REQUEUE_DELAY = 11.0
#: Time limits (seconds) of the jobs: Slurm's backfill plans with them, so the simulator does.
LIMIT = {TE: 600, BE: 2400}
#: Where the local cluster's daemons log (docker/slurm-cluster/etc/*/slurm.conf), both modes.
LOG_DIR = Path(os.environ.get("HPCLAUNCH_CLUSTER_LOGS", "/var/lib/hpclaunch-cluster/log"))
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@dataclass
class Planned:
    """One job of the compressed workload."""

    index: int
    cls: str
    gpus: int
    nodes: int
    work: float  # seconds of work (TE: sleep; BE: steps x STEP)
    offset: float  # arrival, seconds after the first
    job_id: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return max(1, round(self.work / STEP))


def workload(jobs: int, seed: int, compress: float, load: float) -> list[Planned]:
    raw = generate(WorkloadParams(jobs=jobs, load=load, gpus=NODES * GPN, gpus_per_node=GPN), seed)
    out = []
    for j in raw:
        lo, hi = (10.0, 60.0) if j.cls == TE else (15.0, 300.0)
        work = min(hi, max(lo, j.duration / compress))
        work = round(work / STEP) * STEP
        out.append(Planned(j.id, j.cls, j.gpus, j.nodes, work, j.submit))
    demand = sum(p.gpus * p.work for p in out)
    span = demand / (load * NODES * GPN)
    last = max(p.offset for p in out) or 1.0
    for p in out:
        p.offset = p.offset / last * span
    return out


def spec_for(p: Planned, mode: str, every: int) -> dict[str, Any]:
    common = {"name": f"bench-arb-{p.cls.lower()}{p.index}", "project": "research"}
    res = {"nodes": p.nodes, "gpus_per_node": p.gpus // p.nodes}
    if p.cls == TE:
        return {
            **common,
            "tier": "high",
            "command": ["sleep", f"{p.work:g}"],
            "resources": {**res, "time": f"{LIMIT[TE] // 60}", "mem": "50M"},
        }
    argv = ["python", TRAINER, "--steps", str(p.steps), "--sleep", str(STEP)]
    argv += ["--every", str(every)]
    if mode == "native":
        argv.append("--ignore-requests")
    return {
        **common,
        "tier": "low",
        "launcher": "srun",
        "venv": VENV,
        "command": argv,
        "resources": {**res, "time": f"{LIMIT[BE] // 60}", "mem": "300M"},
        "checkpoint": {"max_requeues": 20},
    }


def site_file(tmp: Path, mode: str) -> str:
    """The local site with research's quota covering the cluster (every TE job in-quota),
    and for ``arbiter`` preemption left to the arbiter."""
    data = yaml.safe_load((REPO / "site-configs/local.yaml").read_text())
    data["quotas"]["research"] = NODES * GPN
    data["preemption"] = "arbiter" if mode == "arbiter" else "slurm"
    path = tmp / f"site-{mode}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def apply(site: str, cli: Cli) -> None:
    out = subprocess.run(
        [HPCLAUNCH, "--site", site, "site", "apply", "--yes"],
        cwd=REPO,
        env=cli.env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"site apply failed: {out.stdout}{out.stderr}")


def in_queue(ids: list[str]) -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def drain(ids: list[str], what: str) -> None:
    """Wait until none of ``ids`` is queued (an hour at most)."""
    deadline = time.monotonic() + 3600
    while in_queue(ids):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: jobs still queued after an hour")
        time.sleep(2)


def stamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def attempts(ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out = subprocess.run(
        [
            "sacct",
            "-n",
            "-X",
            "-P",
            "-D",
            "-j",
            ",".join(ids),
            "-o",
            "JobID,State,Submit,Start,End",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        job, state, submit, start, end = line.split("|")
        found.setdefault(job, []).append(
            {
                "state": state.split()[0],
                "submit": stamp(submit),
                "start": stamp(start),
                "end": stamp(end),
            }
        )
    for rows in found.values():
        rows.sort(key=lambda r: r["start"] or math.inf)
    return found


_STARTED = re.compile(
    r"^\[(\S+)\] sched(?:/backfill)?: (?:Allocate JobId=(\d+) |_start_job: Started JobId=(\d+) )"
)
_DONE = re.compile(r"^\[(\S+)\] \[(\d+)\.batch\] done with job")


def log_times(ids: set[str], log_dir: Path = LOG_DIR) -> dict[str, tuple[list[float], list[float]]]:
    """Job id -> (starts, ends) of its runs to the millisecond, oldest first.

    sacct's Start and End are whole seconds (22.05): up to +-1 s on every run, times the
    GPUs, which is more than what a checkpoint on request loses. slurmctld logs each start
    ("sched: Allocate JobId=N" or, from backfill, "_start_job: Started JobId=N") and the
    batch host's slurmd each end ("[N.batch] done with job"), both with milliseconds.
    """
    found: dict[str, tuple[list[float], list[float]]] = {}

    def add(job: str, stamp_text: str, which: int) -> None:
        if job in ids:
            found.setdefault(job, ([], []))[which].append(stamp(stamp_text) or math.nan)

    for line in _lines(log_dir / "slurmctld.log"):
        m = _STARTED.match(line)
        if m:
            add(m.group(2) or m.group(3), m.group(1), 0)
    for path in sorted(log_dir.glob("slurmd-*.log")):
        for line in _lines(path):
            m = _DONE.match(line)
            if m:
                add(m.group(2), m.group(1), 1)
    for starts, ends in found.values():
        starts.sort()
        ends.sort()
    return found


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def attach_log_times(plan: list[Planned]) -> int:
    """Add ``log_start``/``log_end`` to every run of the jobs whose runs the logs match one
    for one; returns how many jobs got them (the others keep sacct's times)."""
    times = log_times({p.job_id for p in plan})
    matched = 0
    for p in plan:
        runs = [a for a in p.attempts if a["start"]]
        starts, ends = times.get(p.job_id, ([], []))
        if runs and len(starts) == len(ends) == len(runs):
            for a, start, end in zip(runs, starts, ends, strict=True):
                a["log_start"], a["log_end"] = start, end
            matched += 1
    return matched


def held(a: dict[str, Any]) -> float:
    """Seconds one run held its GPUs: from the logs when known, else sacct's."""
    if a.get("log_start") is not None and a.get("log_end") is not None:
        return float(a["log_end"] - a["log_start"])
    if a["start"] and a["end"]:
        return float(a["end"] - a["start"])
    return 0.0


@dataclass(frozen=True)
class Caps:
    """How often ``ours`` may preempt one job: the arbiter's ``--min-run`` and
    ``--max-preemptions`` (``None``: no cap by count)."""

    min_run: float
    max_preemptions: int | None

    def arbiter_args(self) -> list[str]:
        args = ["--min-run", f"{self.min_run:g}"]
        if self.max_preemptions is not None:
            args += ["--max-preemptions", str(self.max_preemptions)]
        return args


def run_mode(mode: str, plan: list[Planned], tmp: Path, every: int, caps: Caps) -> dict[str, Any]:
    site = site_file(tmp, mode)
    cli = Cli(tmp / f"state-{mode}", site=site)
    apply(site, cli)
    specs = tmp / f"specs-{mode}"
    specs.mkdir()
    paths = {}
    for p in plan:
        path = specs / f"{p.index}.yaml"
        path.write_text(yaml.safe_dump(spec_for(p, mode, every)))
        paths[p.index] = path
    daemon = None
    log = tmp / f"arbiter-{mode}.jsonl"
    if mode == "arbiter":
        daemon = subprocess.Popen(
            [
                HPCLAUNCH,
                "--site",
                site,
                "arbiter",
                "--interval",
                str(ARBITER_INTERVAL),
                "--log",
                str(log),
                *caps.arbiter_args(),
            ],
            cwd=REPO,
            env=cli.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ids: list[str] = []
    t0 = time.time()
    try:
        for p in sorted(plan, key=lambda q: q.offset):
            delay = t0 + p.offset - time.time()
            if delay > 0:
                time.sleep(delay)
            out = cli("submit", str(paths[p.index]))
            if out.returncode != 0:
                raise SystemExit(f"submit failed: {out.stderr}")
            p.job_id = out.stdout.strip().splitlines()[-1]
            ids.append(p.job_id)
        print(f"  {mode}: {len(ids)} jobs submitted in {time.time() - t0:.0f} s", flush=True)
        drain(ids, mode)
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(timeout=30)
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
    elapsed = time.time() - t0
    time.sleep(3)  # slurmdbd catches up
    found = attempts(ids)
    for p in plan:
        p.attempts = found.get(p.job_id, [])
    matched = attach_log_times(plan)
    print(f"  {mode}: sub-second run times from the daemons' logs for {matched} of "
          f"{len(plan)} jobs", flush=True)  # fmt: skip
    ledgers = be_ledgers(plan, cli)
    releases = release_times(ledgers)
    decisions = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {
        "mode": mode,
        "elapsed": elapsed,
        "releases": releases,
        "ledgers": ledgers,
        "decisions": decisions,
    }


def be_ledgers(plan: list[Planned], cli: Cli) -> dict[str, list[dict[str, Any]]]:
    """The sidecar ledgers of the BE jobs that were preempted, by job index."""
    records = cli.submitted()
    out = {}
    for p in plan:
        if p.cls != BE or len(p.attempts) < 2:
            continue
        ledger = Path(records[p.job_id]["job_dir"]) / "events.jsonl"
        out[str(p.index)] = [json.loads(x) for x in ledger.read_text().splitlines() if x.strip()]
    return out


def release_times(ledgers: dict[str, list[dict[str, Any]]]) -> list[float]:
    """Seconds from the preemption signal to the attempt's end, from the BE ledgers."""
    return [end - sig for sig, _, end in preempted_runs(ledgers)]


def preempted_runs(
    ledgers: dict[str, list[dict[str, Any]]],
) -> list[tuple[float, float | None, float]]:
    """(signal, start of the commit on request or ``None``, attempt end) of every preempted
    attempt in ``ledgers``.

    The commit's start is its ``committed_at - seconds`` from the done file, which the
    sidecar records when the next attempt starts (``stale_control_file``); without that
    record, the ``checkpoint_committed`` event's time (when the sidecar saw the file, up to
    its poll interval later) minus ``seconds``.
    """
    out = []
    for events in ledgers.values():
        for attempt in sorted({e["attempt"] for e in events}):
            got = [e for e in events if e["attempt"] == attempt]
            sig = next((e for e in got if e["event"] == "signal_received"), None)
            end = next((e for e in got if e["event"] == "attempt_end"), None)
            if not (sig and end and end.get("reason") == "preempted"):
                continue
            commit = None
            seen = next((e for e in got if e["event"] == "checkpoint_committed"), None)
            if seen is not None:
                commit = float(seen["time"]) - float(seen.get("seconds") or 0.0)
                stale = next(
                    (e for e in events if e["attempt"] == attempt + 1
                     and e["event"] == "stale_control_file"
                     and isinstance(e.get("content"), dict)
                     and "committed_at" in e["content"]),
                    None,
                )  # fmt: skip
                if stale is not None:
                    done = stale["content"]
                    commit = float(done["committed_at"]) - float(done.get("seconds") or 0.0)
            out.append((float(sig["time"]), commit, float(end["time"])))
    return out


def victim_timings(raw: dict[str, Any], mode: str) -> tuple[float, float]:
    """(notice, write) of a victim for the simulator, medians over the run's preemptions.

    arbiter: notice = the arbiter's reaction (half its interval: it sees a waiting job that
    late on average) + signal -> the trainer starts its commit (it trains on until it sees
    the request: that work is kept); write = the commit's start -> the attempt's end (write,
    sidecar, launcher exit: lost). native: the trainers ignore requests; the whole signal ->
    end is the grace the sidecar waits (the simulator's grace time), no notice.
    A record without ledgers (before 2026-11-24c) has only signal -> end: all of it, plus
    the half interval, is taken as the write (the model of those runs).
    """
    releases = raw["releases"]
    release = statistics.median(releases) if releases else GRACE
    if mode != "arbiter":
        return 0.0, release
    runs = [r for r in preempted_runs(raw.get("ledgers", {})) if r[1] is not None]
    if not runs:
        return 0.0, release + ARBITER_INTERVAL / 2
    notice = statistics.median(max(0.0, commit - sig) for sig, commit, _ in runs if commit)
    write = statistics.median(end - commit for _, commit, end in runs if commit)
    return notice + ARBITER_INTERVAL / 2, write


def measure(plan: list[Planned]) -> tuple[dict[str, float], dict[str, float]]:
    """(metrics, start-up overhead per class) of a finished run."""
    overhead = {}
    for cls in (TE, BE):
        once = [held(p.attempts[0]) - p.work
                for p in plan if p.cls == cls and len(p.attempts) == 1
                and p.attempts[0]["state"] == "COMPLETED"]  # fmt: skip
        overhead[cls] = max(0.0, statistics.median(once)) if once else 0.0
    out: dict[str, float] = {}
    lost = 0.0
    for cls in (TE, BE):
        slow = []
        for p in plan:
            if p.cls != cls:
                continue
            run = p.work + overhead[cls]
            final = p.attempts[-1]
            slow.append((final["end"] - p.attempts[0]["submit"]) / run)
            if len(p.attempts) > 1:  # a job run once lost nothing: its start-up's spread
                lost += p.gpus * (sum(held(a) for a in p.attempts) - run)  # is not lost work
        for q in (50, 95):
            out[f"{cls.lower()}_slowdown_p{q}"] = percentile(slow, q)
    out["lost_gpu_s"] = lost
    out["preemptions"] = float(sum(len(p.attempts) - 1 for p in plan))
    return out, overhead


def predict(
    plan: list[Planned], mode: str, overhead: dict[str, float], notice: float,
    release: float, requeue_delay: float, every: int, limits: bool, caps: Caps,
) -> dict[str, float]:  # fmt: skip
    """The simulator's metrics for the run's jobs; ``limits``: backfill plans with the jobs'
    time limits, as Slurm's does, instead of their exact run times."""
    first = min(p.attempts[0]["submit"] for p in plan)
    jobs = [
        Job(
            id=p.index,
            submit=p.attempts[0]["submit"] - first,
            gpus=p.gpus,
            nodes=p.nodes,
            duration=p.work + overhead[p.cls],
            cls=p.cls,
            tier="high" if p.cls == TE else "low",
            ckpt_interval=every * STEP,
            ckpt_write=release if mode == "arbiter" else 3600.0,
            ckpt_notice=notice,
            restart_cost=overhead[BE],
            limit=float(LIMIT[p.cls]) if limits else math.inf,
        )
        for p in plan
    ]
    grace = release if mode == "native" else GRACE
    policy: Policy = (
        SlurmNative()
        if mode == "native"
        else Ours(min_run=caps.min_run, max_preemptions=caps.max_preemptions)
    )
    config = SimConfig(
        nodes=NODES, gpus_per_node=GPN, grace_time=grace, requeue_delay=requeue_delay
    )
    result = simulate(jobs, policy, config)
    out: dict[str, float] = {}
    for cls in (TE, BE):
        slow = [j.slowdown() for j in result.jobs if j.cls == cls]
        for q in (50, 95):
            out[f"{cls.lower()}_slowdown_p{q}"] = percentile(slow, q)
    out["lost_gpu_s"] = result.lost_gpu_seconds
    out["preemptions"] = float(result.preemptions)
    return out


def restart_gaps(plan: list[Planned]) -> list[float]:
    """Seconds from each preempted attempt's end to the next start (queueing included)."""
    gaps = []
    for p in plan:
        for a, b in zip(p.attempts, p.attempts[1:], strict=False):
            if a["end"] and b["start"]:
                gaps.append(b["start"] - a["end"])
    return gaps


def analyse(mode: str, raw: dict[str, Any], every: int, caps: Caps) -> dict[str, Any]:
    """Measured metrics and the simulator's prediction of one run's raw record."""
    plan = [Planned(**job) for job in raw["jobs"]]
    measured, overhead = measure(plan)
    notice, release = victim_timings(raw, mode)
    predicted = {
        name: predict(plan, mode, overhead, notice, release, REQUEUE_DELAY, every, limits, caps)
        for name, limits in (("exact", False), ("limits", True))
    }
    gaps = restart_gaps(plan)
    return {
        "measured": measured,
        "predicted": predicted,
        "overhead": overhead,
        "notice_s": notice,
        "release_s": release,
        "log_timed": sum(1 for p in plan if p.attempts and "log_start" in p.attempts[0]),
        "restart_gap_min_s": min(gaps) if gaps else math.nan,
        "elapsed_s": raw["elapsed"],
        "arbiter_decisions": sum(1 for d in raw["decisions"] if d.get("event") == "preempt"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compress", type=float, default=60.0)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--mode", action="append", choices=("native", "arbiter"))
    parser.add_argument(
        "--min-run",
        type=float,
        help="seconds a job preempted before runs again before the arbiter (and the "
        "simulated ours) may choose it again (default 300 / --compress; with --replay, the "
        "record's, or the simulation's only when given)",
    )
    parser.add_argument(
        "--max-preemptions",
        type=int,
        help="a cap by count as well (default none; with --replay, as --min-run)",
    )
    parser.add_argument("--json", type=Path, help="write the runs' raw record (every attempt)")
    parser.add_argument(
        "--replay",
        type=Path,
        action="append",
        help="analyse a record written by --json; repeated: a later record's modes replace "
        "an earlier one's (same workload, e.g. native from one run, arbiter from another)",
    )
    args = parser.parse_args()
    every = max(1, round(30 * 60 / args.compress / STEP))
    if args.replay:
        record = merge_records([json.loads(path.read_text()) for path in args.replay])
        every = record["every"]
    else:
        record = run_all(args, every)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1))
    # A record without min_run comes from the arbiter that capped by count alone (2).
    legacy_cap = None if "min_run" in record else 2
    caps = Caps(
        args.min_run if args.min_run is not None else float(record.get("min_run", 0.0)),
        args.max_preemptions
        if args.max_preemptions is not None
        else record.get("max_preemptions", legacy_cap),
    )
    print(f"ours: min_run {caps.min_run:g} s, max_preemptions {caps.max_preemptions}")
    results = {}
    for mode, raw in record["runs"].items():
        results[mode] = analyse(mode, raw, every, caps)
        print_mode(mode, results[mode])
    if set(results) == {"native", "arbiter"}:
        nat, arb = (results[m]["measured"] for m in ("native", "arbiter"))
        print(f"\narbiter vs native (measured): TE p95 slowdown {pct(arb, nat, 'te_slowdown_p95')}"
              f", BE p50 {pct(arb, nat, 'be_slowdown_p50')}, lost GPU-s "
              f"{pct(arb, nat, 'lost_gpu_s')}")  # fmt: skip


def merge_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record from several of the same workload: each mode from the last that ran it."""
    merged = dict(records[0], runs=dict(records[0]["runs"]))
    for other in records[1:]:
        for key in ("jobs", "seed", "compress", "load", "every", "min_run", "max_preemptions"):
            if other.get(key) != merged.get(key):
                raise SystemExit(f"--replay: records differ in {key!r}")
        merged["runs"].update(other["runs"])
    return merged


def run_all(args: argparse.Namespace, every: int) -> dict[str, Any]:
    """Run the workload once per mode on the cluster; the raw record of every attempt."""
    modes = args.mode or ["native", "arbiter"]
    min_run = args.min_run if args.min_run is not None else MIN_RUN / args.compress
    caps = Caps(min_run, args.max_preemptions)
    base = workload(args.jobs, args.seed, args.compress, args.load)
    n_te = sum(p.cls == TE for p in base)
    span = max(p.offset for p in base)
    print(f"workload: {len(base)} jobs ({n_te} TE, {len(base) - n_te} BE), arrivals over "
          f"{span:.0f} s, BE checkpoint every {every * STEP:g} s of work")  # fmt: skip
    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"), "jobs": args.jobs, "seed": args.seed,
        "compress": args.compress, "load": args.load, "every": every,
        "min_run": caps.min_run, "max_preemptions": caps.max_preemptions, "runs": {},
    }  # fmt: skip
    home = Path.home() / ".hpclaunch" / "bench"
    home.mkdir(parents=True, exist_ok=True)
    with CLUSTER_LOCK.open("a") as lock, tempfile.TemporaryDirectory(dir=home) as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for mode in modes:
                plan = [Planned(p.index, p.cls, p.gpus, p.nodes, p.work, p.offset) for p in base]
                run = run_mode(mode, plan, Path(tmp), every, caps)
                record["runs"][mode] = {
                    "jobs": [asdict(p) for p in plan],
                    "releases": run["releases"],
                    "ledgers": run["ledgers"],
                    "decisions": run["decisions"],
                    "elapsed": run["elapsed"],
                }
        finally:
            apply("local", Cli(Path(tmp) / "restore"))
    return record


def pct(new: dict[str, float], old: dict[str, float], key: str) -> str:
    if not old[key]:
        return "n/a"
    return f"{100 * (new[key] - old[key]) / old[key]:+.1f} %"


def print_mode(mode: str, data: dict[str, Any]) -> None:
    m, sims = data["measured"], data["predicted"]
    up = data["overhead"]
    print(f"\n{mode}: {data['elapsed_s']:.0f} s; start-up TE {up[TE]:.2f} s, BE {up[BE]:.2f} s; "
          f"victim notice {data['notice_s']:.2f} s + write {data['release_s']:.2f} s; "
          f"sub-second run times for {data['log_timed']} jobs; fastest restart after a requeue "
          f"{data['restart_gap_min_s']:.1f} s; arbiter decisions "
          f"{data['arbiter_decisions']}")  # fmt: skip
    print(f"  {'metric':<18}{'measured':>10}  " + "".join(
        f"{'sim ' + name:>12}{'error':>9}" for name in sims))  # fmt: skip
    for key in ("te_slowdown_p50", "te_slowdown_p95", "be_slowdown_p50", "be_slowdown_p95",
                "lost_gpu_s", "preemptions"):  # fmt: skip
        row = f"  {key:<18}{m[key]:>10.2f}  "
        for sim in sims.values():
            err = abs(sim[key] - m[key]) / m[key] * 100 if m[key] else math.nan
            row += f"{sim[key]:>12.2f}{err:>8.1f}%"
        print(row)


if __name__ == "__main__":
    main()
