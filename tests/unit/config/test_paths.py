"""hpclaunch's own directories (hpclaunch/config/paths.py): the XDG variable wins, else
platformdirs' default under the environment's HOME."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

from hpclaunch.config.paths import user_dir
from hpclaunch.config.settings import user_config_path
from hpclaunch.store.capabilities import cache_path
from hpclaunch.store.history import history_path
from hpclaunch.store.sweeps import sweeps_dir


@pytest.mark.parametrize("kind", ["config", "cache", "data", "state"])
def test_the_xdg_variable_wins(kind: str) -> None:
    env = {f"XDG_{kind.upper()}_HOME": "/x", "HOME": "/h"}
    assert user_dir(kind, env) == Path("/x/hpclaunch")  # type: ignore[arg-type]


def test_the_default_is_platformdirs_under_the_environments_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for kind in ("CONFIG", "CACHE", "DATA", "STATE"):
        monkeypatch.delenv(f"XDG_{kind}_HOME", raising=False)
    real = Path(platformdirs.user_data_dir("hpclaunch", appauthor=False))
    assert user_dir("data") == real
    other = user_dir("data", {"HOME": "/elsewhere"})
    assert other == Path("/elsewhere") / real.relative_to(os.path.expanduser("~"))


def test_every_store_uses_it() -> None:
    env = {
        "XDG_CONFIG_HOME": "/c",
        "XDG_CACHE_HOME": "/k",
        "XDG_DATA_HOME": "/d",
        "XDG_STATE_HOME": "/s",
    }
    assert user_config_path(env) == Path("/c/hpclaunch/config.yaml")
    assert cache_path("my site", env) == Path("/k/hpclaunch/my_site.json")
    assert history_path(env) == Path("/d/hpclaunch/history.sqlite")
    assert sweeps_dir(env) == Path("/s/hpclaunch/sweeps")


def test_write_private_is_whole_and_private(tmp_path: Path) -> None:
    import stat

    from hpclaunch.store.files import write_private

    path = tmp_path / "new" / "record.json"
    write_private(path, '{"a": 1}')
    write_private(path, '{"a": 2}')
    assert path.read_text() == '{"a": 2}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]  # no temporary left

    with pytest.raises(TypeError):
        write_private(path, 42)  # type: ignore[arg-type]
    assert path.read_text() == '{"a": 2}'  # the old file stays whole
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]
