"""Preemption overhead and lost work: hpclaunch's on-request checkpoint vs periodic-only.

    .venv/bin/python bench/preemption.py [--runs 3]

Needs the running local cluster. Each run submits two preemptible (tier ``low``) 1-node
torchrun jobs of examples/ddp_train.py (2 ranks, gloo, 2 GPUs, ``exclusive`` so that no other
victim shares the node) with periodic checkpoints every K steps:

* ``hpclaunch``: the trainer checkpoints when the sidecar asks (and every K steps);
* ``periodic``: the same trainer with ``--ignore-requests``: only every K steps, and on the
  request it stops at once without saving, as a trainer without a handler dies on the
  preemption signal. Both are preempted at the same step.

When rank 0's step log reaches the run's preemption step, a critical job that needs every
GPU of the victim's node is submitted; Slurm preempts the victim (``B:USR1`` at once,
preempt_send_user_signal), the sidecar checkpoints (or not) and requeues, attempt 1 resumes.
The preemption step moves across runs over one K interval (100, 100 + K/runs, ...), so the
baseline's loss samples the interval instead of one point of it. From each victim's ledger
(events.jsonl) and step logs::

    signal → committed    checkpoint_committed.time - signal_received.when
    write                 checkpoint_committed.seconds (checkpoint-done.json: the save)
    committed → requeue   requeue_issued.time - checkpoint_committed.time
    overhead              (requeue_issued.time - signal_received.when) - write
    restart gap           attempt 1's attempt_start.time - requeue_issued.time
    steps lost            last step attempt 0 trained - step attempt 1 resumed after

Every job ends COMPLETED and all final weights are equal (checked). Every job submitted
here (victims and preemptors) is cancelled at the end, also on errors or Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.supervise.ledger import read_ledger  # noqa: E402
from tests.integration.conftest import Cli  # noqa: E402

STEPS = 200
EVERY = 40  # K: the periodic checkpoint interval of both variants
FIRST_PREEMPT = 100
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
VENV = str(REPO / ".venv")


@dataclass
class Victim:
    key: str  # e.g. hpclaunch-0
    variant: str  # hpclaunch | periodic
    preempt_at: int
    log_dir: Path
    job_id: str = ""
    preemptor: str = ""
    preempted_at: float | None = None
    state: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    def steps(self, attempt: int) -> list[int]:
        path = self.log_dir / f"steps-attempt-{attempt}.log"
        try:
            return [int(x) for x in path.read_text().split()]
        except (OSError, ValueError):
            return []


def run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()


def submit(cli: Cli, spec_dir: Path, victim: Victim) -> str:
    command = ["python", "examples/ddp_train.py", "--steps", str(STEPS), "--every", str(EVERY)]
    command += ["--log-dir", str(victim.log_dir), "--hash-out", str(victim.log_dir / "final")]
    if victim.variant == "periodic":
        command.append("--ignore-requests")
    spec = {
        "name": f"bench-pre-{victim.key}",
        "project": "research",
        "command": command,
        "launcher": "torchrun",
        "tier": "low",
        "venv": VENV,
        "resources": {
            "nodes": 1,
            "gpus_per_node": 2,
            "exclusive": True,
            "time": "00:04:00",
            "mem": "200M",
        },
    }
    path = spec_dir / f"{victim.key}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = cli("submit", str(path))
    if out.returncode != 0:
        raise RuntimeError(f"submit {victim.key} failed: {out.stderr.strip()}")
    return out.stdout.strip().splitlines()[-1]


def preempt(job_id: str) -> str:
    """Submit a critical job that needs every GPU of ``job_id``'s node; return its id."""
    node = run(["squeue", "-h", "-j", job_id, "-o", "%N"])
    argv = ["sbatch", "--parsable", "--qos=critical", "--account=research", "-N1"]
    argv += [f"--nodelist={node}", "--gres=gpu:4", "--time=1", "--mem=50M"]
    argv += ["--output=/dev/null", "--job-name=bench-preemptor", "--wrap=sleep 3"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def final_state(job_id: str) -> str | None:
    """The job's final sacct state, or ``None`` while squeue still lists it."""
    if run(["squeue", "-h", "-j", job_id, "-o", "%T"]):
        return None  # a requeued job is PENDING again: squeue is the truth while it lives
    acct = run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"]).split()
    state = acct[0] if acct else "UNKNOWN"
    return state if state in FINAL else None


def first(events: list[dict[str, Any]], name: str, attempt: int) -> dict[str, Any]:
    for event in events:
        if event.get("event") == name and event.get("attempt") == attempt:
            return event
    return {}


def measure(victim: Victim, job_dir: Path) -> dict[str, Any]:
    """The victim's numbers from its ledger and rank 0's step logs."""
    events = read_ledger(job_dir)
    sig = first(events, "signal_received", 0)
    committed = first(events, "checkpoint_committed", 0)
    requeue = first(events, "requeue_issued", 0)
    start1 = first(events, "attempt_start", 1)
    if not (sig and requeue and start1):
        raise RuntimeError(f"{victim.key}: incomplete ledger in {job_dir}: {events}")
    before, after = victim.steps(0), victim.steps(1)
    resumed_after = after[0] - 1 if after else STEPS
    m: dict[str, Any] = {
        "signal": sig["signal"],
        "preemptor→signal": sig["when"] - victim.preempted_at if victim.preempted_at else None,
        "signal→requeue": requeue["time"] - sig["when"],
        "restart gap": start1["time"] - requeue["time"],
        "last step": max(before),
        "resumed after": resumed_after,
        "steps lost": max(before) - resumed_after,
    }
    assert resumed_after <= max(before), f"{victim.key}: steps skipped"
    if committed:
        write = float(committed["seconds"])
        m |= {
            "committed step": committed["step"],
            "signal→committed": committed["time"] - sig["when"],
            "write": write,
            "committed→requeue": requeue["time"] - committed["time"],
            "overhead": requeue["time"] - sig["when"] - write,
        }
    else:
        m["overhead"] = m["signal→requeue"]  # nothing written
    return m


def wait_all(victims: list[Victim]) -> None:
    """Preempt each victim at its step, then wait until every job has ended."""
    deadline = time.monotonic() + 120 + 30 * len(victims)  # 4 nodes: ~4 at a time
    pending = list(victims)
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {[v.key for v in pending]}")
        for victim in list(pending):
            if not victim.preemptor:
                done = victim.steps(0)
                if done and done[-1] >= victim.preempt_at:
                    victim.preempted_at = time.time()
                    victim.preemptor = preempt(victim.job_id)
                    print(f"  {victim.key} ({victim.job_id}) at step {done[-1]}: preempted")
                continue
            state = final_state(victim.job_id)
            if state is not None:
                victim.state = state
                pending.remove(victim)
                print(f"  {victim.key} ({victim.job_id}) ended {state}")
        time.sleep(0.1)


def med(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def spread(rows: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in rows if r.get(key) is not None]
    if not values:
        return "-"
    if all(isinstance(x, int) for x in values):
        return f"{min(values)}..{max(values)}"
    return f"{min(values):.2f}..{max(values):.2f}"


def report(victims: list[Victim]) -> None:
    keys = [
        "preemptor→signal",
        "signal→committed",
        "write",
        "committed→requeue",
        "signal→requeue",
        "overhead",
        "restart gap",
    ]
    print("\nper job (seconds; steps):")
    for v in victims:
        m = v.metrics
        times = "  ".join(f"{k} {m[k]:.3f}" for k in keys if isinstance(m.get(k), float | int))
        print(
            f"  {v.key:12s} {v.job_id:>6s} preempt@{v.preempt_at} last {m['last step']} "
            f"resumed after {m['resumed after']} lost {m['steps lost']}  {times}"
        )
    print(f"\nmedians over {len(victims) // 2} runs (min..max):")
    for variant in ("hpclaunch", "periodic"):
        rows = [v.metrics for v in victims if v.variant == variant]
        parts = [f"steps lost {med(rows, 'steps lost')} ({spread(rows, 'steps lost')})"]
        for k in keys:
            value = med(rows, k)
            if value is not None:
                parts.append(f"{k} {value:.3f} s ({spread(rows, k)})")
        print(f"  {variant:9s} " + "; ".join(parts))
    ours = [v.metrics for v in victims if v.variant == "hpclaunch"]
    base = [v.metrics for v in victims if v.variant == "periodic"]
    lost_ours, lost_base = med(ours, "steps lost") or 0, med(base, "steps lost") or 0
    ratio = f"{lost_base / lost_ours:.1f}x" if lost_ours else "n/a (hpclaunch lost 0)"
    print(
        f"\nsteps lost per preemption: hpclaunch {lost_ours} vs periodic-only (K={EVERY}) "
        f"{lost_base}; ratio periodic/hpclaunch {ratio}"
    )
    overhead = med(ours, "overhead")
    if overhead is not None:
        verdict = "met" if overhead <= 1.0 else "NOT met"
        print(
            f"preemption overhead (signal → requeue - write): {overhead:.3f} s, "
            f"goal ≤ 1 s {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    shared = Path.home() / ".hpclaunch-bench" / uuid.uuid4().hex[:8]  # every node sees it
    shared.mkdir(parents=True)
    cli = Cli(shared / "state")
    victims = [
        Victim(
            f"{variant}-{i}",
            variant,
            FIRST_PREEMPT + round(i * EVERY / args.runs),
            shared / f"{variant}-{i}",
        )
        for i in range(args.runs)
        for variant in ("hpclaunch", "periodic")
    ]
    try:
        for v in victims:
            v.job_id = submit(cli, shared, v)
        print(
            f"submitted {len(victims)} jobs: " + ", ".join(f"{v.key}={v.job_id}" for v in victims)
        )
        wait_all(victims)
        records = cli.submitted()
        for v in victims:
            if v.state != "COMPLETED":
                raise RuntimeError(f"{v.key} ({v.job_id}) ended {v.state}")
            v.metrics = measure(v, Path(records[v.job_id]["job_dir"]))
        hashes = {(v.log_dir / "final").read_text().strip() for v in victims}
        assert len(hashes) == 1, f"final weights differ: {hashes}"
        report(victims)
        print("all jobs COMPLETED with equal final weights")
    finally:
        ids = [x for v in victims for x in (v.job_id, v.preemptor) if x]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    main()
