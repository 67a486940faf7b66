"""hpclaunch's modules import each other without a circle: every import counts, those inside
functions and under ``TYPE_CHECKING`` too (a circle there is still two modules that cannot
be understood, or moved, one without the other). The library never imports click."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "hpclaunch"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The hpclaunch modules ``path`` imports (``from a.b import c``: ``a.b.c`` when that
    is a module, else ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return {name for name in found if name in modules}


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) - {module_name(p)} for p in paths}


def test_no_import_circle() -> None:
    try:
        graphlib.TopologicalSorter(graph()).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_walk_sees_lazy_imports() -> None:
    # ops.session imports ops.submit only inside a method (pydantic): the walk must see it.
    assert "hpclaunch.ops.submit" in graph()["hpclaunch.ops.session"]


def test_only_the_cli_imports_click() -> None:
    users = [
        module_name(p)
        for p in PACKAGE.rglob("*.py")
        if "click" in {n.split(".")[0] for n in _all_imports(p)}
    ]
    assert users
    assert all(name.startswith("hpclaunch.cli") for name in users), users


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_function_level_imports_are_few_and_say_why() -> None:
    """Imports sit at the top of a module (ruff's PLC0415 holds the library to it); the few
    kept inside a function spare a command a heavy module and name it (``# noqa: PLC0415
    (pydantic)``), and there are no more of them than issue 46 allows."""
    import re

    lazy = {
        f"{path.relative_to(PACKAGE)}:{number}": line
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "noqa: PLC0415" in line and re.match(r"\s+(from|import) ", line)
    }
    unexplained = [where for where, line in lazy.items() if not re.search(r"PLC0415 \(.+\)", line)]
    assert unexplained == []
    assert len(lazy) <= 150, len(lazy)
