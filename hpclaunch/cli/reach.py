"""``hpclaunch shell JOB`` and ``hpclaunch forward JOB PORT``: into a running job."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._signals import stop_on_signals

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("shell", context_settings={"ignore_unknown_options": True})
@job_argument
@click.option("--node", metavar="NODE", help="One of the job's nodes (default: its first).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_session
def shell_command(app: Session, job_id: str, node: str | None, command: tuple[str, ...]) -> None:
    """Open a shell on a node of running job JOB (or run COMMAND there, after --), as a
    step sharing the job's CPUs and GPUs (srun --overlap); it ends with the job."""
    argv = app.job(job_id).shell_argv(node=node, command=command)
    click.echo(f"job {job_id}: {' '.join(argv[:6])} ...", err=True)
    try:
        code = subprocess.run(argv, check=False).returncode
    except FileNotFoundError as exc:
        raise click.ClickException(f"{argv[0]} not found here: {exc}") from None
    raise click.exceptions.Exit(code if code >= 0 else 128 - code)


@click.command("forward")
@job_argument
@click.argument("port", type=click.IntRange(1, 65535))
@click.option(
    "--local", "local_port", type=click.IntRange(0, 65535), help="The port here (default: PORT)."
)
@click.option("--node", metavar="NODE", help="One of the job's nodes (default: its first).")
@pass_session
def forward_command(
    app: Session, job_id: str, port: int, local_port: int | None, node: str | None
) -> None:
    """Forward 127.0.0.1:PORT here (or --local) to PORT on a node of running job JOB, through
    the login node when hpclaunch runs elsewhere, until Ctrl-C or the job ends; across a
    requeue it waits for the next attempt and forwards to its node."""
    forward = app.job(job_id).forward(
        port, local_port=port if local_port is None else local_port, node=node
    )
    stop = stop_on_signals()
    click.echo(
        f"forwarding 127.0.0.1:{forward.local_port} to {forward.node}:{port} (job {job_id}); "
        "Ctrl-C to stop",
        err=True,
    )
    waiting = False
    try:
        while not stop.wait(5):
            state = forward.follow()
            if state == "ended":
                click.echo(f"job {job_id} has ended: forward stopped", err=True)
                return
            if state == "waiting" and not waiting:
                click.echo(
                    f"job {job_id} is waiting for its next attempt (requeued): connections "
                    "fail until it runs again; still listening",
                    err=True,
                )
            elif state == "running" and waiting:
                click.echo(f"job {job_id} runs again on {forward.node}: forwarding", err=True)
            waiting = state == "waiting"
        click.echo("forward stopped", err=True)
    finally:
        forward.close()
