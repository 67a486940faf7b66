"""The report pages' HTML: ``templates/*.html.j2`` rendered with every value HTML-escaped
(autoescape), no script and nothing fetched; the pictures are inline SVG whose geometry
:mod:`hpclaunch.report.charts` computes."""

from __future__ import annotations

import functools
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jinja2

from hpclaunch._resources import shipped_dir
from hpclaunch.errors import ConfigError
from hpclaunch.report.usage import format_size
from hpclaunch.slurm.times import format_elapsed
from hpclaunch.store.files import write_private

__all__ = ["COLOURS", "render_page", "write_page"]

#: One colour per GPU, in order (Tableau 10).
COLOURS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


@functools.cache
def _environment() -> jinja2.Environment:
    templates = shipped_dir("templates")
    if templates is None:
        raise RuntimeError("hpclaunch's templates/ directory is missing from this install")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["elapsed"] = lambda s: format_elapsed(s) or "-"
    env.filters["number"] = lambda v, digits=0: "-" if v is None else f"{v:.{digits}f}"
    env.filters["gib"] = lambda v: "-" if v is None else f"{v / 1024:.1f}"
    env.filters["size"] = format_size
    env.filters["percent"] = lambda v: "-" if v is None else f"{v:.0%}"
    return env


def render_page(template: str, **values: Any) -> str:
    """``template`` (under ``templates/``) with ``values``, the colours and hpclaunch's
    version."""
    values.setdefault("colours", COLOURS)
    values.setdefault("version", version("hpclaunch"))
    return _environment().get_template(template).render(**values)


def write_page(path: str | Path, page: str) -> Path:
    """Write ``page`` to ``path`` as :func:`write_private` does (atomically, 0600 even over
    an existing file: the page names your jobs and paths); its absolute path.

    Raises:
        ConfigError: ``path``'s directory does not exist (a typo would otherwise make it).
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError(
            f"{path}: the directory {target.parent} does not exist: the page is not written",
            hint="give a path in an existing directory (make it first if you meant a new one)",
        )
    write_private(target, page)
    return target.resolve()
