"""The CLI only parses and prints: what it runs comes from ``Session`` and ``Job``.

Issue 30's rule is ``cli → ops.session / ops.job / errors``. The modules the CLI still
imports at run time besides those are listed in :data:`NOT_YET`; each goes once its use
case is a ``Session`` or ``Job`` method. The list only shrinks: a new import fails the first
test, an entry no longer imported fails the second. (Imports under ``TYPE_CHECKING`` are
types only and do not count.)
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[3] / "hpclaunch" / "cli"
ALLOWED = ("hpclaunch.cli", "hpclaunch.ops.session", "hpclaunch.ops.job", "hpclaunch.errors")
#: What the CLI still takes from elsewhere (2026-11-28).
NOT_YET = frozenset(
    {
        "hpclaunch.backends.base",
        "hpclaunch.config.settings",
        "hpclaunch.jobspec.job",
        "hpclaunch.ops.logs",
        "hpclaunch.ops.pipeline",
        "hpclaunch.ops.resize",
        "hpclaunch.ops.snapshot",
        "hpclaunch.ops.status",
        "hpclaunch.ops.submit",
        "hpclaunch.ops.tier",
        "hpclaunch.planning.pipeline",
        "hpclaunch.scheduling.simulate",
        "hpclaunch.scheduling.simulate.engine",
        "hpclaunch.scheduling.simulate.policies",
        "hpclaunch.scheduling.simulate.report",
        "hpclaunch.slurm.usage",
        "hpclaunch.store.history",
    }
)


def _run_time_imports() -> dict[str, set[str]]:
    """hpclaunch module → the CLI files that import it outside ``if TYPE_CHECKING:``."""
    found: dict[str, set[str]] = {}
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        typing_only = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            if module.startswith("hpclaunch") and not module.startswith(ALLOWED):
                found.setdefault(module, set()).add(path.name)
    return found


def test_the_cli_takes_nothing_new_from_the_library_but_session_job_and_errors() -> None:
    new = {m: sorted(files) for m, files in _run_time_imports().items() if m not in NOT_YET}
    assert new == {}, "add the use case to Session or Job and call it from the CLI"


def test_the_list_of_what_is_left_only_shrinks() -> None:
    gone = sorted(NOT_YET - set(_run_time_imports()))
    assert gone == [], "no longer imported by the CLI: remove from NOT_YET"
