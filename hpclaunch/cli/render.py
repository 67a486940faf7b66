"""``hpclaunch render SPEC``: print the batch script a spec becomes (nothing is submitted)."""

from __future__ import annotations

import click

from hpclaunch.ops.session import Session


@click.command("render")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--argv", "show_argv", is_flag=True, help="Also print the sbatch argv first.")
@click.option("--explain", is_flag=True, help="Print why each option was chosen, to stderr.")
@click.pass_obj
def render_command(app: Session, spec: str, show_argv: bool, explain: bool) -> None:
    """Print the batch script for SPEC without submitting it."""
    from hpclaunch.ops.plan_job import naming, plan_spec
    from hpclaunch.planning.plan import describe
    from hpclaunch.planning.render import render

    with naming(spec):
        plan = plan_spec(app, spec)
    job = render(plan)
    if explain:
        click.echo(describe(plan), err=True)
    if show_argv:
        import shlex

        click.echo(shlex.join(job.sbatch_argv))
    click.echo(job.script, nl=False)
