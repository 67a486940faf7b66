"""A sweep's report (``hpclaunch report SWEEP``, ``SweepRun.report()``): its tasks' states,
a table of parameters against final metrics, and a metric against each parameter, as data,
text and one self-contained HTML page (``templates/sweep.html.j2``).

From :class:`~hpclaunch.ops.sweep_status.SweepStatus` (one squeue, at most one sacct, the
tasks' final-metrics files): the report asks Slurm nothing more.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.report.charts import Scatter, scatter
from hpclaunch.study.summary import summary_line

if TYPE_CHECKING:
    from hpclaunch.ops.sweep_status import SweepStatus

__all__ = ["SweepReport"]


@dataclass(frozen=True)
class SweepReport:
    """A sweep now.

    Attributes:
        status: Every task's state, parameters and final metrics.
        metric: The metric drawn against each parameter (default: the first one reported).
        study: An adaptive sweep's study (``SweepRun.study_summary()``): its trials, best
            trial and the parameters' importances.
    """

    status: SweepStatus
    metric: str | None = None
    study: dict[str, Any] | None = None

    @property
    def parameters(self) -> list[str]:
        return self.status.parameters

    @property
    def metrics(self) -> list[str]:
        return self.status.metric_names

    @property
    def chosen_metric(self) -> str | None:
        """:attr:`metric`, or the first metric a task reported."""
        return self.metric or next(iter(self.metrics), None)

    def scatters(self) -> list[Scatter]:
        """The chosen metric against each parameter, over the tasks that reported it."""
        metric = self.chosen_metric
        if metric is None:
            return []
        found = []
        for parameter in self.parameters:
            rows = [
                (
                    t.params[parameter],
                    float(t.metrics[metric]),
                    f"point {t.point} ({t.job_id}): {parameter}={t.params[parameter]}, "
                    f"{metric}={float(t.metrics[metric]):g}",
                )
                for t in self.status.tasks
                if parameter in t.params
                and isinstance((t.metrics or {}).get(metric), (int, float))
                and t.metrics is not None
            ]
            drawn = scatter(rows, parameter, metric)
            if drawn is not None:
                found.append(drawn)
        return found

    def history(self) -> Scatter | None:
        """An adaptive sweep's trials in order: the metric of each completed trial, and the
        last value of each pruned one (the optimisation history)."""
        if self.study is None:
            return None
        metric = self.study["metric"]
        rows = [
            (
                t["trial"],
                float(t["value"]),
                f"trial {t['trial']} ({t['state']}, step {t['last_step']}): {metric}="
                f"{float(t['value']):g}; " + ", ".join(f"{k}={v}" for k, v in t["params"].items()),
            )
            for t in self.study["history"]
            if t["state"] in ("complete", "pruned") and isinstance(t["value"], (int, float))
        ]
        return scatter(rows, "trial", metric)

    def importance_bars(self) -> list[tuple[str, float, float]]:
        """(parameter, share, bar width in px) of the study's importances, largest first."""
        found = (self.study or {}).get("importances") or {}
        return [(name, share, round(share * 400, 1)) for name, share in found.items()]

    def to_dict(self) -> dict[str, Any]:
        """As ``hpclaunch report SWEEP --json`` prints it (``sweep status --json``'s, plus the
        metric drawn and an adaptive sweep's study)."""
        return {**self.status.to_dict(), "metric": self.chosen_metric, "study": self.study}

    def lines(self) -> list[str]:
        """The report as text: counts by state, then one line per task."""
        rec = self.status.record
        counts = ", ".join(f"{state} {n}" for state, n in self.status.counts.items())
        out = [f"sweep {rec.sweep_id} {rec.name!r}: {rec.points} points; {counts}"]
        if self.study is not None:
            out.append(summary_line(self.study))
            out += [f"importance of {n}: {share:.2f}" for n, share, _ in self.importance_bars()]
        out += [f"Warning: {problem}" for problem in self.status.problems]
        params, metrics = self.parameters, self.metrics
        headers = ("POINT", "JOB", "STATE", *params, *metrics)
        rows = [
            (
                str(t.point),
                t.job_id,
                t.state,
                *t.cells(params, metrics),
            )
            for t in self.status.tasks
        ]
        widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
        out += [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in (headers, *rows)
        ]
        return out

    def write_html(self, path: str | os.PathLike[str], *, now: float | None = None) -> Path:
        """Write :meth:`html` to ``path`` (atomically, mode 0600); its absolute path."""
        from hpclaunch.report.page import write_page  # noqa: PLC0415 (jinja2)

        return write_page(Path(path), self.html(now=now))

    def html(self, *, now: float | None = None) -> str:
        """The report as one self-contained HTML page: the counts, the table (sorted by a
        click on a column: a few lines of inline script) and the scatters."""
        from hpclaunch.report.page import render_page  # noqa: PLC0415 (jinja2)

        made = datetime.fromtimestamp(time.time() if now is None else now, timezone.utc)
        return render_page(
            "sweep.html.j2",
            r=self,
            status=self.status,
            scatters=self.scatters(),
            history=self.history(),
            importances=self.importance_bars(),
            study_line=summary_line(self.study) if self.study else None,
            made=made.isoformat(timespec="seconds"),
        )
