"""The CLI only parses and prints: what it runs comes from ``Session`` and ``Job``.

Issue 30's rule: at run time the CLI imports from the library only ``ops.session``,
``ops.job`` and ``errors`` (its own modules aside). Imports under ``TYPE_CHECKING`` are
types for annotations only and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[3] / "hpclaunch" / "cli"
ALLOWED = (
    "hpclaunch.cli",
    "hpclaunch.ops.session",
    "hpclaunch.ops.job",
    "hpclaunch.ops.helpers",
    "hpclaunch.errors",
)


def _imports_of(tree: ast.Module) -> list[str]:
    """The hpclaunch modules outside :data:`ALLOWED` that ``tree`` imports at run time
    (anywhere but under ``if TYPE_CHECKING:``), in order."""
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "hpclaunch.ops":
            names.extend(f"hpclaunch.ops.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n.split(".")[0] == "hpclaunch" and not n.startswith(ALLOWED)]


def _run_time_imports() -> dict[str, set[str]]:
    """hpclaunch module → the CLI files that import it at run time."""
    found: dict[str, set[str]] = {}
    for path in sorted(CLI.glob("*.py")):
        for module in _imports_of(ast.parse(path.read_text())):
            found.setdefault(module, set()).add(path.name)
    return found


def test_the_cli_takes_from_the_library_only_session_job_and_errors() -> None:
    found = {m: sorted(files) for m, files in _run_time_imports().items()}
    assert found == {}, "add the use case to Session or Job and call it from the CLI"


def test_the_check_sees_run_time_imports_and_not_type_only_ones() -> None:
    tree = ast.parse(
        "from hpclaunch.ops.session import Session\n"
        "from hpclaunch.slurm.jobs import JobState\n"
        "if TYPE_CHECKING:\n    from hpclaunch.ops.queue import QueueEntry\n"
        "def f():\n    from hpclaunch.store.history import history_path\n"
    )
    assert _imports_of(tree) == ["hpclaunch.slurm.jobs", "hpclaunch.store.history"]
