"""docker/slurm-cluster/build-slurm.sh's refusals, run for real (no build: --check stops after
the tarball is verified): unknown versions, a missing tarball, a wrong checksum."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "docker" / "slurm-cluster" / "build-slurm.sh"
RELEASES = SCRIPT.with_name("slurm-releases.txt")


def build(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_release_has_a_tarball_a_sha256_and_a_tag() -> None:
    rows = [line.split() for line in RELEASES.read_text().splitlines() if line and line[0] != "#"]
    assert [r[0] for r in rows] == ["24.11", "25.11", "26.05"]
    for version, tarball, sha, tag in rows:
        assert tarball == f"slurm-{version}.{tarball.split('.')[2]}.tar.xz"
        assert len(sha) == 64
        assert tag.startswith(f"slurm-{version.replace('.', '-')}-")


@pytest.mark.parametrize(("version", "words"), [("23.02", "no Slurm 23.02"), ("22.05", "Debian")])
def test_a_version_without_a_release_is_refused(version: str, words: str) -> None:
    out = build(version, "--check")
    assert out.returncode == 2, out.stderr
    assert words in out.stderr


def test_a_missing_tarball_says_what_to_get_and_where(tmp_path: Path) -> None:
    out = build("25.11", "--check", HPCLAUNCH_SLURM_SRC=str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert f"no tarball for Slurm 25.11 at {tmp_path}/slurm-25.11.7.tar.xz" in out.stderr
    assert "SchedMD's tag slurm-25-11-7-1" in out.stderr
    assert "f71f1e5f33a72e7864104a6857e86862eac3c4e5e348c92dd0c10dbe03a82dec" in out.stderr


def test_a_tarball_with_another_sha256_is_refused_unless_stated(tmp_path: Path) -> None:
    fake = tmp_path / "slurm-25.11.7.tar.xz"
    fake.write_bytes(b"not slurm")
    out = build("25.11", "--check", HPCLAUNCH_SLURM_SRC=str(tmp_path))
    assert out.returncode == 1, out.stderr
    have = hashlib.sha256(b"not slurm").hexdigest()
    assert f"sha256 {have}, but f71f1e5f" in out.stderr
    assert "not building from it" in out.stderr
    ok = build("25.11", "--check", HPCLAUNCH_SLURM_TARBALL=str(fake), HPCLAUNCH_SLURM_SHA256=have)
    assert ok.returncode == 0, ok.stderr
    assert "sha256 ok" in ok.stderr
