"""The validated-site cache (hpclaunch.store.site_cache): a site read before comes from the
cache, an edit of the file is seen at once, a broken entry is ignored, a bad file still
fails with its error and leaves nothing cached."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from hpclaunch.config.site import load_site
from hpclaunch.errors import ConfigError
from hpclaunch.store.site_cache import load_site_cached

LOCAL = Path(__file__).resolve().parents[3] / "site-configs" / "local.yaml"


@pytest.fixture
def site_file(tmp_path: Path) -> Path:
    path = tmp_path / "mysite.yaml"
    path.write_text(LOCAL.read_text())
    return path


def entries(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_CACHE_HOME"]) / "hpclaunch" / "sites").glob("*.pickle"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_a_site_read_before_comes_from_the_cache(site_file: Path, env: dict[str, str]) -> None:
    first = load_site_cached(site_file, env)
    assert first == load_site(site_file)
    [entry] = entries(env)
    assert entry.stat().st_mode & 0o777 == 0o600
    # What the entry holds is what comes back (a site no file says, to tell them apart).
    other = first.model_copy(update={"name": "from-the-cache"})
    entry.write_bytes(pickle.dumps(other))
    assert load_site_cached(site_file, env).name == "from-the-cache"


def test_an_edited_file_is_read_again(site_file: Path, env: dict[str, str]) -> None:
    assert load_site_cached(site_file, env).name == "hpclaunch"
    site_file.write_text(site_file.read_text().replace("name: hpclaunch", "name: edited", 1))
    assert load_site_cached(site_file, env).name == "edited"
    assert len(entries(env)) == 2


def test_a_broken_entry_is_ignored_and_written_again(site_file: Path, env: dict[str, str]) -> None:
    load_site_cached(site_file, env)
    [entry] = entries(env)
    entry.write_bytes(b"not a pickle")
    assert load_site_cached(site_file, env) == load_site(site_file)
    assert pickle.loads(entry.read_bytes()) == load_site(site_file)


def test_a_bad_site_fails_as_before_and_is_not_cached(site_file: Path, env: dict[str, str]) -> None:
    site_file.write_text(site_file.read_text() + "\nsurprise: 1\n")
    with pytest.raises(ConfigError, match="surprise"):
        load_site_cached(site_file, env)
    assert entries(env) == []
    with pytest.raises(ConfigError, match="does not exist"):
        load_site_cached(site_file.with_name("missing.yaml"), env)
