"""Render a :class:`~hpclaunch.planning.plan.SubmissionPlan` into a batch script and the sbatch
argv.

Templates are jinja2 with ``StrictUndefined`` (a missing variable is an error, never an
empty string) and no autoescaping; every user value goes through a quoting filter:

* ``shquote`` / ``shjoin``: POSIX shell quoting (:func:`shlex.quote`) for the script body;
* ``sbatch_quote``: quoting for ``#SBATCH`` lines, which sbatch parses itself (not bash):
  it splits on blanks, strips ``'``/``"`` quotes, takes ``\\`` as an escape everywhere, ends
  an argument at an unquoted ``#`` and a line at a newline (src/sbatch/opt.c
  ``_get_argument``, Slurm 22.05). So values are double-quoted with ``\\`` and ``"``
  escaped, and values with a newline (or ``hetjob``/``packjob``, which older sbatch versions
  read as a heterogeneous-job separator; see :mod:`hpclaunch.jobspec.job`) are refused;
* ``envname``: checks an environment variable name.

The options go into the script as ``#SBATCH`` lines, so the script describes itself and can
be submitted again as it is; the sbatch argv is only ``sbatch --parsable <script>``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from hpclaunch import jobdir
from hpclaunch._private import make_private_dirs
from hpclaunch._resources import shipped_dir
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import RenderError
from hpclaunch.jobspec.words import ENV_NAME
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.script_start import EXIT_NO_WORKDIR

__all__ = [
    "SCRIPT_TEMPLATE",
    "RenderedJob",
    "render",
    "render_command_section",
    "sbatch_quote",
    "template_dirs",
]

SCRIPT_TEMPLATE = "sbatch.sh.j2"
COMMAND_TEMPLATE = "command.sh.j2"
_SBATCH_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+,=-]+$")
_HETJOB = re.compile(r"hetjob|packjob", re.IGNORECASE)


@dataclass(frozen=True)
class RenderedJob:
    """A job ready to submit.

    Attributes:
        script: The batch script text (``#SBATCH`` lines included).
        sbatch_argv: The command that submits it, e.g. ``("sbatch", "--parsable", path)``;
            one argv element per argument, never a shell string.
        plan: The plan it was rendered from.
    """

    script: str
    sbatch_argv: tuple[str, ...]
    plan: SubmissionPlan

    @property
    def script_path(self) -> str:
        """Where the backend writes :attr:`script` before running :attr:`sbatch_argv`."""
        return self.plan.script_path


def template_dirs(extra: Iterable[str | Path] = ()) -> tuple[Path, ...]:
    """Template search path: ``extra`` dirs first (site overrides), then the shipped ones."""
    shipped = shipped_dir("templates")
    dirs = [Path(d) for d in extra]
    if shipped is not None:
        dirs.append(shipped)
    return tuple(dirs)


def render(plan: SubmissionPlan, *, extra_template_dirs: Sequence[str | Path] = ()) -> RenderedJob:
    """Render ``plan`` into a :class:`RenderedJob`.

    Args:
        plan: From :func:`hpclaunch.planning.plan.build_plan`.
        extra_template_dirs: Directories searched before the shipped templates.

    Raises:
        RenderError: The template is missing or broken, uses an undefined variable, or a
            value cannot be put safely into the script (e.g. a newline in an option value).
    """
    script = _render(SCRIPT_TEMPLATE, plan, template_dirs(extra_template_dirs))
    return RenderedJob(
        script=script,
        sbatch_argv=("sbatch", "--parsable", plan.script_path),
        plan=plan,
    )


def render_command_section(plan: SubmissionPlan) -> str:
    """Render only the environment + command part of the script (for tests and debugging)."""
    return _render(COMMAND_TEMPLATE, plan, template_dirs())


def _render(name: str, plan: SubmissionPlan, dirs: tuple[Path, ...]) -> str:
    env = _environment(dirs)
    try:
        template = env.get_template(name)
        return template.render(plan=plan)
    except jinja2.TemplateNotFound as exc:
        raise RenderError(
            f"template {exc.name!r} not found in {', '.join(map(str, dirs)) or 'no directory'}",
            hint="reinstall hpclaunch, or check the site's template directory",
        ) from exc
    except jinja2.UndefinedError as exc:
        raise RenderError(
            f"template {name!r}: {exc.message or exc}",
            hint="the template uses a variable the plan does not provide",
        ) from exc
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(
            f"template {exc.name or name!r}, line {exc.lineno}: syntax error: {exc.message}"
        ) from exc


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates on disk, so that each ``hpclaunch`` process does not compile the
    batch template again (about 10 ms of a command's start-up; loading it takes < 1 ms).

    jinja2 stores each template's source checksum with its code and recompiles when the
    source changed (a site's override edited) or the jinja2/Python version differs. A cache
    that cannot be written only costs time: the error is dropped.
    """

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _template_cache() -> jinja2.BytecodeCache | None:
    """``$XDG_CACHE_HOME/hpclaunch/templates`` (``~/.cache``), private; ``None`` when it
    cannot be made private (then templates are compiled in memory, as before)."""

    directory = user_dir("cache") / "templates"
    try:
        make_private_dirs(directory)
        info = directory.stat()
    except OSError:
        return None
    # Code is loaded from here: only from a directory no one else can write to.
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return _TemplateCache(str(directory))


@functools.lru_cache(maxsize=8)
def _environment(dirs: tuple[Path, ...]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
        bytecode_cache=_template_cache(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell scripts, not HTML: values are shell-quoted
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shquote"] = _shquote
    env.filters["shjoin"] = _shjoin
    env.filters["sbatch_quote"] = sbatch_quote
    env.filters["envname"] = _envname
    env.globals["EXIT_NO_WORKDIR"] = EXIT_NO_WORKDIR
    env.globals["START_FAILURE_NAME"] = jobdir.START_FAILURE
    return env


def _shquote(value: object) -> str:
    return shlex.quote(_text(value))


def _shjoin(values: Iterable[object]) -> str:
    return " ".join(_shquote(v) for v in values)


def _text(value: object) -> str:
    if isinstance(value, jinja2.Undefined) or not isinstance(value, (str, int)):
        raise RenderError(f"cannot shell-quote {type(value).__name__} {value!r}")
    text = str(value)
    if "\x00" in text:
        raise RenderError(f"value {text!r} contains a NUL character")
    return text


def sbatch_quote(value: object) -> str:
    """Quote ``value`` for an ``#SBATCH --flag=<value>`` line (see the module docstring).

    Raises:
        RenderError: The value holds a control character (a newline would end the
            ``#SBATCH`` line) or the word ``hetjob``/``packjob``.
    """
    text = _text(value)
    if not text.isprintable():
        raise RenderError(
            f"#SBATCH value {text!r} contains a newline or control character",
            hint="sbatch reads #SBATCH options one line at a time; use one-line values",
        )
    if _HETJOB.search(text):
        raise RenderError(
            f"#SBATCH value {text!r} contains 'hetjob'/'packjob', which older sbatch versions "
            "read as a heterogeneous-job separator",
            hint="rename it",
        )
    if _SBATCH_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _envname(value: object) -> str:
    text = _text(value)
    if not ENV_NAME.match(text):
        raise RenderError(f"{text!r} is not a valid environment variable name")
    return text
