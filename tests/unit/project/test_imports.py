"""Start-up cost: `hpclaunch --help` and `import hpclaunch` load nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.unit.conftest import PROBE, loaded_after


def test_help_is_light() -> None:
    # Every command's --help: the root group's callback runs before it, so the session
    # (which loads every use case) must be made only when a command runs.
    body = (
        "from hpclaunch.cli import COMMANDS, main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "for name in COMMANDS:\n"
        "    try:\n        main([name, '--help'])\n    except SystemExit:\n        pass\n"
    )
    assert loaded_after(body) == []


def test_help_imports_no_command_module() -> None:
    # --help prints each command's one line from hpclaunch.cli.SUMMARIES.
    body = (
        "from hpclaunch.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    code = PROBE.format(body=body, heavy=("hpclaunch.cli.",))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_help_summaries_are_the_commands_own() -> None:
    import click

    from hpclaunch.cli import COMMANDS, SUMMARIES, cli

    ctx = click.Context(cli)
    assert sorted(SUMMARIES) == sorted(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        assert SUMMARIES[name] == command.get_short_help_str(limit=1000), name


def test_site_subcommands_help_is_light() -> None:
    body = (
        "from hpclaunch.cli import main\n"
        "for args in (['site', 'check', '--help'], ['site', 'show', '--help']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
    )
    assert loaded_after(body) == []


def test_discovery_and_checks_are_light() -> None:
    # Checked before every submit: they must not pull in rich, jinja2 or yaml.
    body = "import hpclaunch.slurm.capabilities, hpclaunch.planning.checks"
    assert loaded_after(body) == []


def test_import_hpclaunch_is_light() -> None:
    assert loaded_after("import hpclaunch") == []


def test_public_api_resolves() -> None:
    import hpclaunch

    for name in hpclaunch.__all__:
        assert getattr(hpclaunch, name) is not None
    assert hpclaunch.__version__ == "0.1.0"


def test_the_errors_users_catch_are_exported() -> None:
    """A bad spec, a site that cannot run it, Slurm's refusal, an unknown job, a cluster
    out of reach: each is caught as ``hpclaunch.<Name>``, all as ``HpclaunchError``."""
    import hpclaunch
    from hpclaunch import errors

    caught = {"ConfigError", "SpecError", "PlanError", "SubmissionError", "JobNotFound"}
    caught |= {"TransportError", "BackendUnavailable", "WatchTimeout", "JobFailed"}
    for name in caught:
        assert getattr(hpclaunch, name) is getattr(errors, name)
        assert issubclass(getattr(hpclaunch, name), hpclaunch.HpclaunchError)


def test_no_unit_test_module_imports_another() -> None:
    """Helpers and fixtures of the unit tests live in conftest.py and fakes.py: a test module
    that imports another hides where a helper lives and ties the two together."""
    import re
    from pathlib import Path

    unit = Path(__file__).resolve().parents[1]
    pattern = re.compile(
        r"^\s*from (?:\.+|tests\.unit\.)(?:\w+\.)*(?: import test_\w+|test_\w+ import .*)$", re.M
    )
    found = [
        f"{path.relative_to(unit)}: {match.group(0).strip()}"
        for path in sorted(unit.rglob("test_*.py"))
        for match in pattern.finditer(path.read_text())
    ]
    assert found == []
