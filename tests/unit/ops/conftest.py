"""The session the use-case tests share: the test's settings (``env``) against the fake
Slurm, warnings dropped, the working directory the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

import hpclaunch
from tests.unit.fakes import FakeSlurm


@pytest.fixture
def session(
    env: dict[str, str], slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> hpclaunch.Session:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    return hpclaunch.Session(warn=lambda _: None)
