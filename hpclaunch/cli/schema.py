"""``hpclaunch schema``: print the JSON schema of the job spec, for editors."""

from __future__ import annotations

import json

import click

from hpclaunch.ops import helpers


@click.command("schema")
@click.option("--indent", type=int, default=2, show_default=True, help="JSON indentation.")
@click.option("--pipeline", is_flag=True, help="The schema of a multi-job file (jobs:) instead.")
def schema_command(indent: int, pipeline: bool = False) -> None:
    """Print the JSON schema of the job spec (YAML) on stdout.

    Editors use it to check and complete spec files. With the YAML language server
    (VS Code's YAML extension, neovim, ...), save it once and point a spec at it
    with a first-line comment:

    \b
        hpclaunch schema > ~/.config/hpclaunch/spec.schema.json
        # yaml-language-server: $schema=/home/me/.config/hpclaunch/spec.schema.json
        name: my-job
        command: [python, train.py]

    or map a file pattern to it in the editor's settings (e.g. VS Code
    "yaml.schemas": {"/path/spec.schema.json": "jobs/*.yaml"}).
    """
    schema = helpers.spec_schema(pipeline=pipeline)
    click.echo(json.dumps(schema, indent=indent, ensure_ascii=False))
