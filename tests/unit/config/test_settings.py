"""Settings layering: one test per precedence pair, plus where values come from."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hpclaunch.config.settings import (
    Settings,
    load_user_config,
    resolve_settings,
    user_config_path,
)
from hpclaunch.errors import ConfigError

# Lowest first. Each layer can set "backend"; the default layer always does.
LAYERS = ["default", "site", "user", "env", "cli"]


def resolve(layers: dict[str, str]) -> Settings:
    """Resolve with ``backend`` set to the layer's own name in each of ``layers``."""
    return resolve_settings(
        cli={"backend": layers.get("cli")},
        env={"HPCLAUNCH_BACKEND": layers["env"]} if "env" in layers else {},
        user={"backend": layers["user"]} if "user" in layers else {},
        site_defaults=(lambda _name: {"backend": layers["site"]}) if "site" in layers else None,
    )


@pytest.mark.parametrize(
    ("lower", "higher"),
    list(itertools.combinations(LAYERS, 2)),
    ids=lambda layer: str(layer),
)
def test_precedence_pair(lower: str, higher: str) -> None:
    layers = {name: f"from-{name}" for name in (lower, higher) if name != "default"}
    settings = resolve(layers)
    assert settings.backend.value == ("cli" if higher == "default" else f"from-{higher}")
    assert settings.backend.source == higher


def test_pair_count() -> None:
    assert len(list(itertools.combinations(LAYERS, 2))) == 10


def test_defaults_when_nothing_is_set() -> None:
    settings = resolve_settings(cli={}, env={}, user={})
    assert (settings.site.value, settings.site.source) == ("local", "default")
    assert (settings.backend.value, settings.backend.source) == ("cli", "default")
    assert settings.remote.value is None


def test_site_is_chosen_before_its_defaults_apply() -> None:
    asked: list[str] = []

    def site_defaults(name: str) -> dict[str, str | None]:
        asked.append(name)
        return {"backend": "site-backend", "site": "ignored"}

    settings = resolve_settings(
        cli={"site": "from-cli"},
        env={"HPCLAUNCH_SITE": "from-env"},
        user={"site": "from-user"},
        site_defaults=site_defaults,
    )
    assert asked == ["from-cli"]
    assert settings.site.value == "from-cli"
    assert settings.backend.source == "site"
    assert settings.backend.origin == "from-cli"


def test_sources_describe_themselves() -> None:
    settings = resolve_settings(
        cli={}, env={"HPCLAUNCH_REMOTE": "me@login"}, user={"site": "big"}, user_origin="/u.yaml"
    )
    assert settings.remote.describe() == "'me@login' (from env HPCLAUNCH_REMOTE)"
    assert settings.site.describe() == "'big' (from user /u.yaml)"
    assert [name for name, _ in settings.items()] == ["site", "backend", "remote", "quota"]


def test_empty_env_value_does_not_count() -> None:
    settings = resolve_settings(cli={}, env={"HPCLAUNCH_BACKEND": ""}, user={})
    assert settings.backend.source == "default"


def test_user_config_path_honours_xdg(tmp_path: Path) -> None:
    assert user_config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "hpclaunch" / "config.yaml"
    )
    assert user_config_path({}).parts[-3:] == (".config", "hpclaunch", "config.yaml")


def test_user_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    assert load_user_config(path) == {}
    path.write_text("site: big\nremote: null\n")
    assert load_user_config(path) == {"site": "big"}
    path.write_text("sites: big\n")
    with pytest.raises(
        ConfigError, match=r"unknown key.*'sites'.*valid keys: site, backend, remote, quota"
    ):
        load_user_config(path)
    path.write_text("site: 3\n")
    with pytest.raises(ConfigError, match="expected a string"):
        load_user_config(path)


def test_where_a_setting_came_from_in_words() -> None:
    """Issue 27: site check printed "backend 'pyslurm' (from cli)" for the --backend flag."""
    from hpclaunch.config.settings import Sourced

    assert Sourced("pyslurm", "cli").said_by("backend") == "the --backend option"
    assert Sourced("cli", "env").said_by("backend") == "HPCLAUNCH_BACKEND"
    assert Sourced("x", "user", "/u.yaml").said_by("site") == "the user config /u.yaml"
    assert Sourced("cli", "default").said_by("backend") == "the default"
