"""The ``hpclaunch`` command: a thin click layer over the library.

Each command lives in its own module, imported only when that command runs, so that
``hpclaunch --help`` stays fast (no jinja2, rich, pydantic or backends). Exit codes: 0 ok;
1 an hpclaunch error (or a job that did not complete, for ``submit --wait``); 2 a usage or
configuration error. ``Error:`` and ``Hint:`` lines go to stderr; anything else that escapes
is a bug and shows its traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import click

from hpclaunch.errors import EXIT_UNREACHABLE, ConfigError, ControllerUnreachable, HpclaunchError

__all__ = ["cli", "main"]

#: Command name → "module:attribute"; modules are imported on first use.
COMMANDS = {
    "arbiter": "hpclaunch.cli.arbiter:arbiter_command",
    "config": "hpclaunch.cli.config:config_group",
    "cancel": "hpclaunch.cli.cancel:cancel_command",
    "clean": "hpclaunch.cli.clean:clean_command",
    "completion": "hpclaunch.cli.completion:completion_command",
    "cost": "hpclaunch.cli.cost:cost_command",
    "estimate": "hpclaunch.cli.estimate:estimate_command",
    "events": "hpclaunch.cli.events:events_command",
    "forward": "hpclaunch.cli.reach:forward_command",
    "history": "hpclaunch.cli.history:history_command",
    "logs": "hpclaunch.cli.logs:logs_command",
    "ls": "hpclaunch.cli.status:status_command",
    "notify": "hpclaunch.cli.notify:notify_group",
    "queue": "hpclaunch.cli.queue:queue_command",
    "render": "hpclaunch.cli.render:render_command",
    "report": "hpclaunch.cli.report:report_command",
    "rerun": "hpclaunch.cli.rerun:rerun_command",
    "resize": "hpclaunch.cli.resize:resize_command",
    "schema": "hpclaunch.cli.schema:schema_command",
    "shell": "hpclaunch.cli.reach:shell_command",
    "site": "hpclaunch.cli.site:site_command",
    "simulate": "hpclaunch.cli.simulate:simulate_command",
    "status": "hpclaunch.cli.status:status_command",
    "submit": "hpclaunch.cli.submit:submit_command",
    "sweep": "hpclaunch.cli.sweep:sweep_command",
    "sync": "hpclaunch.cli.sync:sync_command",
    "tier": "hpclaunch.cli.tier:tier_command",
    "top": "hpclaunch.cli.top:top_command",
}


#: Command name → its one-line help, for ``hpclaunch --help`` without importing every
#: command's module (each is its docstring's first sentence: tests/unit/cli/test_cli.py checks).
SUMMARIES = {
    "arbiter": "Preempt the running jobs that lose least, when a job of a preempting tier waits.",
    "cancel": "Cancel jobs IDS, jobs named NAME, or --all of your hpclaunch jobs.",
    "clean": "Remove the call and result pickles of ended function jobs older than AGE.",
    "completion": "Print the completion script for SHELL (commands, options and job ids).",
    "config": "Show hpclaunch's own settings.",
    "cost": "GPU-hours used in a period, from sacct's allocated TRES, and their price.",
    "estimate": "Say when SPEC would start if submitted now (Slurm's sbatch --test-only; "
    "nothing is queued), how long its past runs took, and a time limit to ask for.",
    "events": "Show what is known about JOB: its submission and each attempt Slurm accounted.",
    "forward": "Forward 127.0.0.1:PORT here (or --local) to PORT on a node of running job JOB, "
    "through the login node when hpclaunch runs elsewhere, until Ctrl-C or the job ends; "
    "across a requeue it waits for the next attempt and forwards to its node.",
    "history": "List the jobs submitted from here (the local history), oldest first.",
    "logs": "Print the logs of JOB, a job submitted with hpclaunch.",
    "ls": "Show the state of jobs IDS, or of your recent hpclaunch jobs.",
    "notify": "Save the webhooks that specs name in notify: {webhook: NAME}.",
    "queue": "Show pending and running jobs as the scheduler will take them.",
    "render": "Print the batch script for SPEC without submitting it.",
    "report": "Sum up JOB: its attempts, its GPUs' use and energy, and what to change; or "
    "SWEEP (a sweep id or a unique prefix of it): its tasks by state and its parameters "
    "against their final metrics.",
    "rerun": "Submit again the spec JOB ran with, changed by --set and --tier, and print the "
    "new job id.",
    "resize": "Resize elastic job JOB to --nodes nodes (one of its spec's elastic.nodes).",
    "schema": "Print the JSON schema of the job spec (YAML) on stdout.",
    "shell": "Open a shell on a node of running job JOB (or run COMMAND there, after --), as a "
    "step sharing the job's CPUs and GPUs (srun --overlap); it ends with the job.",
    "simulate": "Simulate policies on a synthetic workload (or a trace) and print TE/BE "
    "slowdowns, waits, lost GPU-hours, preemptions and utilisation, mean ± 95 % CI over "
    "the seeds.",
    "site": "The site config and the live cluster.",
    "status": "Show the state of jobs IDS, or of your recent hpclaunch jobs.",
    "submit": "Submit SPEC to Slurm and print the job id.",
    "sweep": "Run a spec once per point of its sweep, as Slurm job arrays.",
    "sync": "Upload the offline W&B runs of JOB or SWEEP (each attempt's, into its one run) "
    "from here, for compute nodes without internet (tracking: {wandb: {mode: offline}}, or "
    "auto on a site whose tracking: says offline: true).",
    "tier": "Move pending job JOB to tier NEWTIER: its QOS and, on a site with quotas, its "
    "account and nice (in-quota or over-quota is decided again from the project's usage).",
    "top": "Show the latest GPU sample of each GPU of JOB, per node (from its metrics.jsonl).",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when used, and which turns
    :class:`~hpclaunch.errors.HpclaunchError` into ``Error:``/``Hint:`` and an exit code."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module_name, _, attr = self.lazy[cmd_name].partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their one-line help (:data:`SUMMARIES`: no command imported)."""
        rows = [(name, SUMMARIES[name]) for name in self.list_commands(ctx)]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, _shorten(text, limit)) for name, text in rows])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HpclaunchError as exc:
            report_error(exc)
            if isinstance(exc, ControllerUnreachable):
                ctx.exit(EXIT_UNREACHABLE)
            ctx.exit(2 if isinstance(exc, ConfigError) else 1)


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word to fit ``limit`` characters, with ``...`` (as click does)."""
    if len(text) <= limit:
        return text
    words: list[str] = []
    used = 3
    for word in text.split():
        if used + len(word) + bool(words) > limit:
            break
        words.append(word)
        used += len(word) + (len(words) > 1)
    return " ".join(words) + "..."


def report_error(exc: HpclaunchError) -> None:
    """Print ``Error: ...`` and ``Hint: ...`` to stderr."""
    click.echo(f"Error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"Hint: {exc.hint}", err=True)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--site",
    metavar="NAME|PATH",
    help="Site config: a name from site-configs/ or a YAML path [env: HPCLAUNCH_SITE; "
    "default: local].",
)
@click.option(
    "--backend",
    metavar="NAME",
    help="How to talk to Slurm [env: HPCLAUNCH_BACKEND; default: cli].",
)
@click.option(
    "--remote",
    metavar="[USER@]HOST[:PORT]",
    help="Run Slurm's commands on this login node over SSH (a Host alias of ~/.ssh/config "
    "works) [env: HPCLAUNCH_REMOTE; default: the site's, else this machine].",
)
@click.option(
    "--accept-new-host-key",
    is_flag=True,
    help="With --remote: record the login node's host key in known_hosts if it is not "
    "known yet (a changed key is always refused).",
)
@click.version_option(package_name="hpclaunch", prog_name="hpclaunch")
@click.pass_context
def cli(
    ctx: click.Context,
    site: str | None,
    backend: str | None,
    remote: str | None = None,
    accept_new_host_key: bool = False,
) -> None:
    """Submit and follow ML jobs on Slurm from a job spec (YAML).

    Settings come from, lowest first: built-in defaults, the site's defaults, the user
    config (~/.config/hpclaunch/config.yaml), HPCLAUNCH_* variables, and these flags.
    """
    # The session is made when a command runs (cli/_session.py): --help stays light.
    given = ctx.obj if isinstance(ctx.obj, dict) else {}
    ctx.obj = {
        **given,
        "site": site,
        "backend": backend,
        "remote": remote,
        "accept_new_host_key": accept_new_host_key,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``hpclaunch`` console script."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="hpclaunch")
