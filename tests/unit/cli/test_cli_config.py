"""``hpclaunch config show``: each setting, its value and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from hpclaunch.cli import cli

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No user config, no HPCLAUNCH_* variables."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "HPCLAUNCH_SITE": "",
        "HPCLAUNCH_BACKEND": "",
        "HPCLAUNCH_REMOTE": "",
    }


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, prog_name="hpclaunch")


def lines(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_show_values(env: dict[str, str]) -> None:
    assert lines(run(env, "config", "show")) == [
        "site    = local",
        "backend = cli",
        "remote  = (not set)",
        "quota   = allow",
    ]


def test_show_sources_defaults_and_site(env: dict[str, str]) -> None:
    # local.yaml's defaults: section suggests backend: cli.
    assert lines(run(env, "config", "show", "--sources")) == [
        "site    = local    # built-in default",
        "backend = cli    # site config local",
        "remote  = (not set)    # built-in default",
        "quota   = allow    # built-in default",
    ]


def test_show_sources_user_env_and_flags(env: dict[str, str], tmp_path: Path) -> None:
    user = tmp_path / "config" / "hpclaunch" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("backend: from-user\nremote: me@login\n")
    site = tmp_path / "mine.yaml"
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site.write_text(yaml.safe_dump(data))
    env["HPCLAUNCH_REMOTE"] = "me@other"
    out = lines(run(env, "--site", str(site), "config", "show", "--sources"))
    assert out == [
        f"site    = {site}    # command-line flag",
        f"backend = from-user    # user config ({user})",
        "remote  = me@other    # environment (HPCLAUNCH_REMOTE)",
        "quota   = allow    # built-in default",
    ]
    out = lines(run(env, "--backend", "flagged", "config", "show", "--sources"))
    assert out[1] == "backend = flagged    # command-line flag"


def test_show_json(env: dict[str, str]) -> None:
    env["HPCLAUNCH_BACKEND"] = "cli"
    data = json.loads(run(env, "config", "show", "--json").stdout)
    assert data == {
        "site": {"value": "local", "source": "default", "origin": None},
        "backend": {"value": "cli", "source": "env", "origin": "HPCLAUNCH_BACKEND"},
        "remote": {"value": None, "source": "default", "origin": None},
        "quota": {"value": "allow", "source": "default", "origin": None},
    }


def test_bad_user_config_is_a_clean_config_error(env: dict[str, str], tmp_path: Path) -> None:
    user = tmp_path / "config" / "hpclaunch" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("sites: big\n")
    result = run(env, "config", "show")
    assert result.exit_code == 2
    assert "Error: " in result.stderr
    assert "unknown key(s) 'sites'" in result.stderr
    assert "Traceback" not in result.output


def test_quota_from_the_site_the_user_config_and_a_bad_value(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "strict.yaml"
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    data["defaults"]["quota"] = "strict"
    site.write_text(yaml.safe_dump(data))
    out = lines(run(env, "--site", str(site), "config", "show", "--sources"))
    assert out[3] == f"quota   = strict    # site config {site}"
    user = tmp_path / "config" / "hpclaunch" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("quota: allow\n")
    out = lines(run(env, "--site", str(site), "config", "show", "--sources"))
    assert out[3] == f"quota   = allow    # user config ({user})"
    env["HPCLAUNCH_QUOTA"] = "never"
    result = run(env, "config", "show")
    assert result.exit_code == 2, result.output
    assert "quota: 'never' is not one of allow, strict (from env HPCLAUNCH_QUOTA)" in (
        result.stderr
    )


def test_config_alone_shows_the_settings_and_where_they_came_from(env: dict[str, str]) -> None:
    """Issue 27: ``hpclaunch config`` alone exited 2 with a usage text."""
    result = run(env, "config")
    assert result.exit_code == 0, result.output
    assert result.output == run(env, "config", "show", "--sources").output
    assert result.output.startswith("site ")
