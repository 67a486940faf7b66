"""``hpclaunch completion SHELL``: print the shell completion script (click's)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from hpclaunch.cli import cli

#: The variable click's completion reads; ``hpclaunch`` → ``_HPCLAUNCH_COMPLETE``.
COMPLETE_VAR = "_HPCLAUNCH_COMPLETE"


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), default="bash")
def completion_command(shell: str) -> None:
    """Print the completion script for SHELL (commands, options and job ids).

    \b
    bash:  eval "$(hpclaunch completion bash)"     # in ~/.bashrc
           (or: eval "$(_HPCLAUNCH_COMPLETE=bash_source hpclaunch)")
    zsh:   eval "$(hpclaunch completion zsh)"      # in ~/.zshrc
    fish:  hpclaunch completion fish > ~/.config/fish/completions/hpclaunch.fish

    Job ids complete from your hpclaunch history, without asking Slurm.
    """

    cls = get_completion_class(shell)
    assert cls is not None  # the Choice allows only shells click supports
    click.echo(cls(cli, {}, "hpclaunch", COMPLETE_VAR).source())
