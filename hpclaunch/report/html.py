"""A job report as one self-contained HTML page (``hpclaunch report JOB --html FILE``): no
script, no stylesheet or font from the network; the timeline and the GPU charts are inline
SVG (:mod:`hpclaunch.report.charts`), drawn by ``templates/report.html.j2`` with every value
HTML-escaped."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import jinja2

from hpclaunch._resources import shipped_dir
from hpclaunch.report.charts import metric_chart, timeline
from hpclaunch.report.job import JobReport
from hpclaunch.slurm.times import format_elapsed

__all__ = ["render_html"]

TEMPLATE = "report.html.j2"
#: One colour per GPU, in order (Tableau 10).
COLOURS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


def _environment() -> jinja2.Environment:
    templates = shipped_dir("templates")
    if templates is None:
        raise RuntimeError("hpclaunch's templates/ directory is missing from this install")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["elapsed"] = lambda s: format_elapsed(s) or "-"
    env.filters["number"] = lambda v, digits=0: "-" if v is None else f"{v:.{digits}f}"
    env.filters["gib"] = lambda v: "-" if v is None else f"{v / 1024:.1f}"
    return env


def render_html(report: JobReport, *, now: float | None = None) -> str:
    """The page of ``report`` (``now``: the end of a job still running, default now)."""
    from importlib.metadata import version

    now = time.time() if now is None else now
    line = timeline(report.attempts, report.checkpoints, now)
    charts = []
    times = [float(s["ts"]) for s in report.samples if isinstance(s.get("ts"), (int, float))]
    span = (
        (line.start, line.end) if line is not None else (min(times), max(times)) if times else None
    )
    if span is not None:
        for key, title, unit, top in (
            ("util", "Utilisation", "%", 100.0),
            ("mem_used", "Memory used", "MiB", None),
            ("power_w", "Power", "W", None),
        ):
            chart = metric_chart(report.samples, key, title, unit, *span, top)
            if chart is not None:
                charts.append(chart)
    duration = ""
    if line is not None:
        duration = (
            f"({format_elapsed(round(line.end - line.start))} from the first to the last moment)"
        )
    made = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            r=report,
            timeline=line,
            charts=charts,
            colours=COLOURS,
            duration=duration,
            version=version("hpclaunch"),
            made=made,
        )
    )
