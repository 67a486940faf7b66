"""A job's report (``hpclaunch report JOB``, ``Job.report()``): its attempts, its GPUs and
what to change, as data (:class:`JobReport`, ``to_dict`` for ``--json``) and as one screen
of text (:meth:`JobReport.lines`).

Built from what hpclaunch keeps anyway (:mod:`hpclaunch.ops.report` reads it): the history's
record, Slurm's accounting of each attempt, the sidecar's ledger and the GPU samples.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpclaunch.report.attempts import AttemptSummary
from hpclaunch.report.charts import metric_chart, timeline
from hpclaunch.report.eta import Eta
from hpclaunch.report.gpus import GpuStats
from hpclaunch.report.usage import JobUsage
from hpclaunch.slurm.times import format_elapsed

__all__ = ["IDLE_MEAN_UTIL", "JobReport", "advise"]

#: A GPU whose mean utilisation stays below this (percent) was mostly idle.
IDLE_MEAN_UTIL = 10.0
#: Fewer samples than this say too little to advise on.
_MIN_SAMPLES = 3


@dataclass(frozen=True)
class JobReport:
    """What is known about one job's life.

    Attributes:
        job_id, name, tier, project: The job (name, tier and project from the history).
        state: Slurm's state of its last attempt (``None``: Slurm's accounting not read).
        submitted: When it was submitted (the history's time, UTC).
        attempts: Each attempt, oldest first.
        gpus: Each GPU's figures from the samples (none without NVML or the sidecar).
        gpu_note: Why there are no GPU samples, when there are none.
        accounting_problem: Why Slurm's accounting could not be read.
        advice: What to change, one line each.
        samples: The GPU samples themselves (for the HTML page's charts; not in ``to_dict``).
        checkpoints: Each checkpoint committed: (unix time, step).
        usage: GPU-hours, CPU and memory efficiency and the time limit's use, from Slurm's
            accounting (``None``: not read, or no attempt ran).
        eta: A running job's progress and expected end (``None``: not running, or its
            trainer reports no total).
        progress: The trainer's step over time, from the ledger: each attempt's start
            (the step it resumed from) and end (its last step), with its world size and
            samples per second where it reported them (an elastic job's sizes).
        retries: What its ``retry:`` policy did, a line each (``user_error (exit code 3):
            retry 1 of 2 in 20 s``; a retry it skipped says why).
        recorded_attempts: How many attempts hpclaunch recorded, where Slurm's accounting
            of them is gone (its id names another job now); ``None``: ``attempts`` says.
        trackers: Where its tracker runs are, a line each (its MLflow run, W&B runs still to
            upload, TensorBoard's files).
    """

    job_id: str
    name: str | None
    tier: str | None
    project: str | None
    state: str | None
    submitted: str | None
    attempts: tuple[AttemptSummary, ...]
    gpus: tuple[GpuStats, ...]
    gpu_note: str | None
    accounting_problem: str | None
    advice: tuple[str, ...]
    samples: tuple[Mapping[str, Any], ...] = ()
    checkpoints: tuple[tuple[float, int | None], ...] = ()
    usage: JobUsage | None = None
    eta: Eta | None = None
    progress: tuple[Mapping[str, Any], ...] = ()
    retries: tuple[str, ...] = ()
    recorded_attempts: int | None = None
    trackers: tuple[str, ...] = ()

    @property
    def energy_kwh(self) -> float | None:
        """The energy the GPU samples account for (``None``: no power sampled)."""
        known = [g.energy_kwh for g in self.gpus if g.energy_kwh is not None]
        return sum(known) if known else None

    @property
    def steps_lost(self) -> int:
        """The steps redone after requeues, over all attempts."""
        return sum(a.steps_lost or 0 for a in self.attempts)

    def to_dict(self) -> dict[str, Any]:
        """As ``hpclaunch report --json`` prints it."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "tier": self.tier,
            "project": self.project,
            "state": self.state,
            "submitted": self.submitted,
            "attempts": [a.to_dict() for a in self.attempts],
            "gpus": [g.to_dict() for g in self.gpus],
            "gpu_note": self.gpu_note,
            "energy_kwh": self.energy_kwh,
            "steps_lost": self.steps_lost,
            "accounting_problem": self.accounting_problem,
            "advice": list(self.advice),
            "checkpoints": [list(c) for c in self.checkpoints],
            "usage": self.usage.to_dict() if self.usage else None,
            "eta": self.eta.to_dict() if self.eta else None,
            "progress": [dict(p) for p in self.progress],
            "retries": list(self.retries),
            "trackers": list(self.trackers),
        }

    def throughput(self) -> list[str]:
        """Each attempt's samples per second at its world size (``attempt 1: 4 ranks, 230
        samples/s``), where the trainer reported samples; with the global batch it ended
        with where its batch plan says (``, batch 70, lr x3.87``)."""
        return [
            f"attempt {p['attempt']}: {p['world_size']} ranks, {p['samples_per_s']:g} samples/s"
            + _batch(p)
            for p in self.progress
            if p.get("samples_per_s") is not None and p.get("world_size") is not None
        ]

    def write_html(self, path: str | os.PathLike[str], *, now: float | None = None) -> Path:
        """Write :meth:`html` to ``path`` (atomically, mode 0600); its absolute path."""
        from hpclaunch.report.page import write_page  # noqa: PLC0415 (jinja2)

        return write_page(Path(path), self.html(now=now))

    def html(self, *, now: float | None = None) -> str:
        """The report as one self-contained HTML page (``templates/report.html.j2``): a
        timeline of the job's life, each GPU's utilisation, memory and power over time, the
        figures and the advice (``now``: where a running job's bars end; default now)."""
        from hpclaunch.report.page import render_page  # noqa: PLC0415 (jinja2)

        now = time.time() if now is None else now
        line = timeline(self.attempts, self.checkpoints, now)
        times = [float(s["ts"]) for s in self.samples if isinstance(s.get("ts"), (int, float))]
        span = (line.start, line.end) if line else (min(times), max(times)) if times else None
        charts = []
        for key, title, unit, top in (
            ("util", "Utilisation", "%", 100.0),
            ("mem_used", "Memory used", "MiB", None),
            ("power_w", "Power", "W", None),
        ):
            chart = metric_chart(self.samples, key, title, unit, *span, top) if span else None
            if chart is not None:
                charts.append(chart)
        steps = [  # the trainer's step, one line per attempt (an elastic job's per size)
            {
                "ts": p["time"],
                "node": f"attempt {p['attempt']}:",
                "gpu": p.get("size") or "size unknown",
                "step": p["step"],
            }
            for p in self.progress
            if p.get("step") is not None
        ]
        progress = metric_chart(steps, "step", "Training step", "step", *span) if span else None
        duration = ""
        if line is not None:
            length = format_elapsed(round(line.end - line.start))
            duration = f"({length} from the first to the last moment)"
        made = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")
        return render_page(
            "report.html.j2",
            r=self,
            timeline=line,
            charts=charts,
            progress=progress,
            duration=duration,
            made=made,
        )

    def lines(self) -> list[str]:
        """The report as text, one screen."""
        who = ", ".join(
            part
            for part in (
                f"tier {self.tier}" if self.tier else "",
                f"project {self.project}" if self.project else "",
            )
            if part
        )
        count = len(self.attempts) or self.recorded_attempts or 0
        head = f"job {self.job_id}" + (f" {self.name!r}" if self.name else "")
        head += f" ({who})" if who else ""
        if self.state is not None:
            head += f": {self.state} after {count} attempt{'' if count == 1 else 's'}"
        out = [head]
        if self.eta is not None:
            out.append(f"progress: {self.eta.line()}")
        if self.accounting_problem and self.recorded_attempts is not None:
            out.append(self.accounting_problem)
        elif self.accounting_problem:
            out.append(f"Slurm's accounting is not available: {self.accounting_problem}")
        if self.attempts:
            out.append("attempts (waited: queued before it started; steps: last/committed/lost):")
            out.extend(_attempt_table(self.attempts))
        if self.retries:
            out.append("retry: policy:")
            out.extend(f"  - {line}" for line in self.retries)
        if self.throughput():
            out.append("throughput: " + "; ".join(self.throughput()))
        if self.usage is not None:
            out.extend(self.usage.lines())
        if self.gpus:
            out.append("GPUs (utilisation mean [p10-p90], memory mean/max of total, power):")
            out.extend(f"  {_gpu_line(g)}" for g in self.gpus)
            if self.energy_kwh is not None:
                out.append(
                    f"energy: {self.energy_kwh:.3f} kWh on {len(self.gpus)} GPU(s), as sampled"
                )
        elif self.gpu_note:
            out.append(f"GPUs: no samples ({self.gpu_note})")
        if self.trackers:
            out.append("trackers:")
            out.extend(f"  {line}" for line in self.trackers)
        if self.advice:
            out.append("advice:")
            out.extend(f"  - {line}" for line in self.advice)
        return out


def _attempt_table(attempts: Sequence[AttemptSummary]) -> list[str]:
    headers = ("#", "STATE", "ENDED", "WAITED", "RAN", "NODES", "NxGPU", "STEPS", "CKPTS")
    rows = [
        (
            str(a.index),
            a.state,
            a.ended or "-",
            format_elapsed(a.queued_s) or "-",
            format_elapsed(a.ran_s) or "-",
            a.nodes or "-",
            _compact_size(a.size),
            "/".join(
                "-" if v is None else str(v) for v in (a.last_step, a.committed_step, a.steps_lost)
            ),
            str(a.checkpoints),
        )
        for a in attempts
    ]
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def _compact_size(size: str | None) -> str:
    """``2 nodes x 2 GPUs`` as ``2x2``, ``1 node`` as ``1x0`` (a table cell without spaces)."""
    numbers = re.findall(r"\d+", size or "")
    if not numbers:
        return "-"
    if "," in (size or ""):  # GPUs not spread evenly: nodes and the total
        return f"{numbers[0]}/{numbers[1]}"
    return f"{numbers[0]}x{numbers[1] if len(numbers) > 1 else 0}"


def _gpu_line(gpu: GpuStats) -> str:
    where = f"{gpu.node} {gpu.gpu}" + (f" ({gpu.pci})" if gpu.pci else "")
    parts = []
    if gpu.util_mean is not None:
        parts.append(f"util {gpu.util_mean:.0f} % [{gpu.util_p10:.0f}-{gpu.util_p90:.0f}]")
    if gpu.mem_mean_mib is not None and gpu.mem_max_mib is not None:
        total = f" of {gpu.mem_total_mib / 1024:.1f}" if gpu.mem_total_mib else ""
        parts.append(f"mem {gpu.mem_mean_mib / 1024:.1f}/{gpu.mem_max_mib / 1024:.1f}{total} GiB")
    if gpu.power_mean_w is not None:
        parts.append(f"{gpu.power_mean_w:.0f} W")
    if gpu.energy_kwh is not None:
        parts.append(f"{gpu.energy_kwh:.3f} kWh")
    parts.append(f"{gpu.samples} samples")
    return f"{where}: " + ", ".join(parts)


def advise(attempts: Sequence[AttemptSummary], gpus: Sequence[GpuStats]) -> list[str]:
    """What to change, from the figures: idle GPUs, memory asked far above what was used,
    steps redone after requeues."""
    advice: list[str] = []
    idle = [
        g
        for g in gpus
        if g.samples >= _MIN_SAMPLES and g.util_mean is not None and g.util_mean < IDLE_MEAN_UTIL
    ]
    if idle:
        names = ", ".join(f"{g.node}/{g.pci or g.gpu}" for g in idle)
        advice.append(
            f"{len(idle)} of {len(gpus)} GPU(s) averaged under {IDLE_MEAN_UTIL:.0f} % busy "
            f"({names}): ask for fewer GPUs, or check that the job uses them (data loading, "
            "a rank on the CPU)"
        )
    small = [
        g
        for g in gpus
        if g.samples >= _MIN_SAMPLES
        and g.mem_max_mib is not None
        and g.mem_total_mib
        and g.mem_max_mib < 0.25 * g.mem_total_mib
    ]
    if small and len(small) == len(gpus):
        advice.append(
            "every GPU used under a quarter of its memory: a smaller GPU type (or MIG slice) "
            "would do, or a bigger batch per GPU"
        )
    lost = sum(a.steps_lost or 0 for a in attempts)
    if lost:
        advice.append(
            f"{lost} step(s) were trained again after requeues: checkpoint more often "
            "(checkpoint.every), or answer the checkpoint request (hpclaunch.runtime)"
        )
    return advice


def _batch(point: Mapping[str, Any]) -> str:
    batch, lr = point.get("global_batch"), point.get("lr_factor")
    if not isinstance(batch, int):
        return ""
    return f", batch {batch}" + (f", lr x{lr:.3g}" if isinstance(lr, (int, float)) else "")
