"""``hpclaunch sweep SPEC`` (submit a sweep as job arrays), ``sweep status ID``, ``sweep rerun
ID`` (the points that never ran), ``sweep list``, ``sweep cancel ID``."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli._jobargs import quota_option
from hpclaunch.cli._options import json_option, no_check_option, partition_option
from hpclaunch.cli._session import pass_session
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session
    from hpclaunch.ops.sweep import SweepPreview
    from hpclaunch.ops.sweep_status import SweepStatus


class _SweepGroup(click.Group):
    """``hpclaunch sweep SPEC`` is ``hpclaunch sweep submit SPEC``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["submit", *args]
        return super().parse_args(ctx, args)


@click.group("sweep", cls=_SweepGroup)
def sweep_command() -> None:
    """Run a spec once per point of its sweep, as Slurm job arrays.

    hpclaunch sweep SPEC submits (prints the sweep id); hpclaunch sweep status ID shows
    the tasks' states and final metrics.
    """


@sweep_command.command("submit")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Print the points, sbatch argv and script only.")
@no_check_option
@click.option(
    "--sweep-id",
    metavar="ID",
    help="Your own id for the sweep (letters, digits, _ and -). Submitting again with the "
    "id of a sweep that was interrupted (Slurm down, a lost link) submits only its arrays "
    "that are not in Slurm yet: a script can retry safely.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a field of SPEC for this sweep, e.g. --set resources.gpus_per_node=2 "
    "--set sweep.max_concurrent=8 (the value is YAML; validated as the file is; repeatable).",
)
@partition_option
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until every task has ended, then print the sweep's status; exit 0 only if "
    "every task COMPLETED.",
)
@quota_option
@pass_session
def submit_command(
    app: Session,
    spec: str,
    dry_run: bool,
    no_check: bool,
    sweep_id: str | None = None,
    overrides: tuple[str, ...] = (),
    partition: str | None = None,
    wait: bool = False,
    quota: str | None = None,
) -> None:
    """Submit SPEC's sweep; stdout is only the sweep id (with --wait, then its status)."""
    app.set_typed("quota", quota)
    if partition is not None:
        overrides = (*overrides, f"resources.partition={partition}")
    if dry_run:
        _print_dry_run(
            app.sweeps.dryrun(spec, check=not no_check, sweep_id=sweep_id, overrides=overrides)
        )
        return
    run = app.sweeps.submit(spec, check=not no_check, sweep_id=sweep_id, overrides=overrides)
    click.echo(run.sweep_id)
    arrays = ", ".join(
        f"{r.job_id} (--array={spec})" for r, spec in zip(run.arrays, run.array_specs, strict=True)
    )
    click.echo(
        f"sweep {run.sweep_id}: {run.points} points in {len(run.arrays)} array(s): "
        f"{arrays}; hpclaunch sweep status {run.sweep_id}",
        err=True,
    )
    if wait:
        done = run.wait()
        counts = ", ".join(f"{n} {state}" for state, n in sorted(done.counts.items()))
        click.echo(f"sweep {run.sweep_id}: {counts}", err=True)
        if set(done.counts) != {"COMPLETED"}:
            raise click.exceptions.Exit(1)


#: A dry run shows the sbatch calls of this many arrays, and the last one.
_SHOWN_ARRAYS = 5


def _space_text(space: dict[str, Any]) -> str:
    """A study parameter's space in words: its choices, or its range."""
    if "choices" in space:
        return "one of " + ", ".join(json.dumps(c) for c in space["choices"])
    kind = ("integers" if space["int"] else "numbers") + (" on a log scale" if space["log"] else "")
    return f"{kind} from {space['low']:g} to {space['high']:g}"


def _print_dry_run(preview: SweepPreview) -> None:
    sweep, job = preview.sweep, preview.job
    if sweep.study is not None:
        study = sweep.study
        click.echo(
            f"# sweep {sweep.sweep_id}: {len(sweep.points)} trials; each task asks the study "
            f"({study.method}) for its parameters when it starts"
        )
        for name, space in study.parameters.items():
            click.echo(f"#   {name}: {_space_text(space)}")
    else:
        click.echo(f"# sweep {sweep.sweep_id}: {len(sweep.points)} points")
    for index, point in enumerate(() if sweep.study else sweep.points[:20]):
        click.echo(f"#   {index}: {json.dumps(point, ensure_ascii=False)}")
    if len(sweep.points) > 20 and sweep.study is None:
        click.echo(f"#   ... and {len(sweep.points) - 20} more")
    count = len(sweep.arrays)
    for index in range(count):
        if _SHOWN_ARRAYS <= index < count - 1:  # 600 lines that differ in one number
            if index == _SHOWN_ARRAYS:
                click.echo(f"# ... {count - _SHOWN_ARRAYS - 1} more sbatch calls like these")
            continue
        same_part = index and sweep.part_of(index - 1) == sweep.part_of(index)
        previous = "<array before>" if same_part else None
        click.echo(f"# sbatch argv: {shlex.join(sweep.sbatch_argv(index, previous))}")
    click.echo("# plan:")
    click.echo("\n".join(f"#   {line}" for line in sweep.plan.describe().splitlines()))
    click.echo(f"# script ({job.script_path}):")
    click.echo(job.script, nl=False)
    if sweep.overquota is not None and preview.overquota is not None:
        over = preview.overquota
        click.echo("# the over-quota part's plan:")
        click.echo("\n".join(f"#   {line}" for line in sweep.overquota.describe().splitlines()))
        click.echo(f"# the over-quota part's script ({over.script_path}):")
        click.echo(over.script, nl=False)


@sweep_command.command("status")
@click.argument("sweep_id")
@json_option()
@click.option("--no-metrics", is_flag=True, help="Do not read the tasks' final metrics.")
@click.option(
    "--sort",
    "sort_by",
    metavar="METRIC",
    help="Order the tasks by this final metric (or parameter), smallest first; "
    "'-METRIC' for largest first (e.g. --sort loss, --sort -accuracy).",
)
@pass_session
def status_command(
    app: Session, sweep_id: str, as_json: bool, no_metrics: bool, sort_by: str | None = None
) -> None:
    """Counts by state and a table of parameters vs final metrics for SWEEP_ID (the id
    'hpclaunch sweep' printed, a unique prefix of it, or one of its arrays' job ids)."""
    run = app.sweeps.find(sweep_id)
    try:
        status = run.status(metrics=not no_metrics, sort_by=sort_by)
    except KeyError as exc:
        raise click.BadParameter(
            f"no task has a metric or parameter {(sort_by or '').lstrip('-')!r} "
            f"(known: {exc.args[0]})",
            param_hint="--sort",
        ) from None
    study = run.study_summary()
    if as_json:
        click.echo(json.dumps({**status.to_dict(), "study": study}, indent=2))
        return
    _print_status(status)
    if study is not None:
        click.echo(helpers.summary_line(study))


def _print_status(status: SweepStatus) -> None:
    from rich.console import Console  # noqa: PLC0415 (rich)
    from rich.markup import escape  # noqa: PLC0415 (rich)
    from rich.table import Table  # noqa: PLC0415 (rich)

    rec = status.record
    console = Console()
    arrays = ", ".join(a.job_id for a in rec.arrays)
    counts = ", ".join(f"{state} {n}" for state, n in status.counts.items())
    console.print(f"sweep {rec.sweep_id} {rec.name!r}: {rec.points} points, arrays {arrays}")
    console.print(counts, highlight=False)
    warn = Console(stderr=True)
    for problem in status.problems:
        warn.print(f"[yellow]Warning:[/] {problem}", highlight=False)
    params, metrics = status.parameters, status.metric_names
    table = Table(box=None, header_style="bold")
    for column in ("POINT", "JOB", "STATE", *params):
        table.add_column(column, overflow="fold")
    for column in metrics:
        table.add_column(column, justify="right", style="cyan")
    for task in status.tasks:
        table.add_row(
            str(task.point),
            task.job_id,
            task.state + (f" (Slurm: {task.slurm_state})" if task.slurm_state else ""),
            *(escape(cell) for cell in task.cells(params, metrics)),
        )
    console.print(table)


@sweep_command.command("list")
@pass_session
def list_command(app: Session) -> None:
    """The sweeps submitted from here (no Slurm call)."""
    sweeps = app.sweeps.recorded()
    if not sweeps:
        click.echo("No sweeps recorded yet; submit one with 'hpclaunch sweep SPEC'.")
        return
    rows = [("SWEEP", "SUBMITTED", "POINTS", "ARRAYS", "NAME")]
    for rec in sweeps:
        arrays = ",".join(a.job_id for a in rec.arrays)
        rows.append((rec.sweep_id, rec.submitted_at, str(rec.points), arrays, rec.name))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        *fixed, name = row
        cells = [
            cell.rjust(width) if i == 2 else cell.ljust(width)  # POINTS right-aligned
            for i, (cell, width) in enumerate(zip(fixed, widths, strict=True))
        ]
        click.echo("  ".join([*cells, name]))


@sweep_command.command("rerun")
@click.argument("sweep_id")
@pass_session
def rerun_command(app: Session, sweep_id: str) -> None:
    """Submit again the points of SWEEP_ID that never ran (Slurm ended their tasks before
    the batch script started, e.g. after a slurmctld restart). Safe to repeat: a point
    runs once, and a rerun already in Slurm is not submitted again."""
    rerun = app.sweeps.find(sweep_id).rerun()
    sid = rerun.record.sweep_id
    if not rerun.points:
        click.echo(f"sweep {sid}: every point has run or is queued; nothing to rerun")
        return
    arrays = ", ".join(
        f"{a.job_id} (--array={','.join(map(str, a.task_ids()))})" for a in rerun.arrays
    )
    click.echo(
        f"sweep {sid}: {len(rerun.points)} point(s) submitted again ({rerun.points_text}) as "
        f"{arrays}; "
        f"hpclaunch sweep status {sid}"
    )


@sweep_command.command("cancel")
@click.argument("sweep_id")
@pass_session
def cancel_command(app: Session, sweep_id: str) -> None:
    """Cancel every task of SWEEP_ID (one scancel per array; safe to repeat)."""
    run = app.sweeps.find(sweep_id)
    run.cancel()
    arrays = ", ".join(a.job_id for a in run.arrays) or "none"
    click.echo(
        f"sweep {run.sweep_id}: cancelled arrays {arrays} ({run.points} points); "
        "finished tasks keep their results"
    )
