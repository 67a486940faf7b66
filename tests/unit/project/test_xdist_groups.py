"""The cluster tests' grouping under pytest-xdist works: tests/integration/conftest.py marks
each test ``xdist_group(module[backend])`` and scripts/lib.sh runs the side-by-side pass with
``--dist loadgroup``, so that a module's tests run in one worker and its module-scoped
fixtures (jobs its tests share, minutes on the cluster) are made once. Here the same hook,
copied from that conftest, on two small modules in two workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HOOK = (Path(__file__).resolve().parents[2] / "integration" / "conftest.py").read_text()

TEST_MODULE = """
import os
from pathlib import Path

def _seen(name):
    with open(Path(__file__).parent / "workers.txt", "a") as out:
        out.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")

def test_1(): _seen("1")
def test_2(): _seen("2")
def test_3(): _seen("3")
def test_4(): _seen("4")
"""


def _hook_source() -> str:
    """tests/integration/conftest.py's ``pytest_collection_modifyitems`` and its decorator,
    with the marker naming the module only (no backend parametrization here)."""
    start = HOOK.index("@pytest.hookimpl(tryfirst=True)\ndef pytest_collection_modifyitems")
    end = HOOK.index("\n\n\n", start)
    return "import pytest\n\n\n" + HOOK[start:end] + "\n"


def test_each_module_runs_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(_hook_source())
    for name in ("test_first", "test_second", "test_third"):
        (tmp_path / f"{name}.py").write_text(TEST_MODULE)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    run = subprocess.run(
        [*argv, "--dist", "loadgroup", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = {}
    for line in (tmp_path / "workers.txt").read_text().splitlines():
        module, worker = line.split()
        workers.setdefault(module, set()).add(worker)
    assert len(workers) == 3
    spread = {m: w for m, w in workers.items() if len(w) > 1}
    assert not spread, f"a module's tests ran in more than one worker: {spread}"


@pytest.mark.parametrize("version", [pytest.__version__])
def test_pytest_is_one_xdist_groups_with(version: str) -> None:
    major, minor = (int(x) for x in version.split(".")[:2])
    assert (major, minor) < (9, 2), "pytest 9.2 breaks --dist loadgroup (xdist#1386)"
