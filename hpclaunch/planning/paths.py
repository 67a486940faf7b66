"""Paths a job needs, checked where it is submitted, before sbatch.

A new user's most common late failure: ``command: [python, train.py]`` submitted from
another directory, a ``venv:`` with a typo, a ``workdir:`` that is not there. Slurm takes the
job, it waits in the queue, then dies in a second with "No such file or directory". The
paths are checked on the submitting host (where Slurm's commands run: this machine, or the
login node over SSH in one round trip), which on a cluster sees the same shared filesystem
as the compute nodes.

Not checked: paths with a ``$`` or a sweep's ``{placeholder}`` (known only in the job);
paths under the site's ``node_only_paths`` (mounted on compute nodes only, such as node-local
scratch); paths under the site's ``job_root`` (hpclaunch creates them at submit: the job
directory, a ``--sync`` snapshot). ``--no-check`` skips the whole check.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.transport.base import Runner

__all__ = ["NeededPath", "check_paths", "missing_paths", "needed_paths"]

Kind = Literal["file", "dir", "exists"]

# Programs whose first operand is a file to run (``python train.py``, ``bash run.sh``).
_INTERPRETERS = re.compile(r"^(python[0-9.]*|bash|sh|zsh|Rscript|julia|perl|ruby|node)$")
# Their options that take the program from elsewhere (``python -m pkg``, ``bash -c '...'``).
_NO_FILE_OPTIONS = frozenset({"-m", "-c", "-e", "--eval", "--version", "-V", "--help", "-h"})


@dataclass(frozen=True)
class NeededPath:
    """One path the job needs.

    Attributes:
        field: The spec field it comes from (``command[1]``, ``script``, ``venv``, ...).
        written: The path as the spec writes it.
        path: The absolute path checked.
        kind: ``file``, ``dir``, or ``exists`` (either: a container image).
    """

    field: str
    written: str
    path: str
    kind: Kind


def needed_paths(
    spec: JobSpec, plan: SubmissionPlan, site: SiteConfig, home: str
) -> list[NeededPath]:
    """The paths of ``spec`` (as ``plan`` resolved them) to check before submitting."""
    found: list[NeededPath] = []
    if spec.script is not None:
        found.append(NeededPath("script", spec.script, plan.command[0], "file"))
    elif spec.command:
        found += _command_paths(spec.command, plan.workdir, home)
    if spec.workdir is not None:
        found.append(NeededPath("workdir", spec.workdir, plan.workdir, "dir"))
    if spec.venv is not None and plan.venv is not None:
        found.append(NeededPath("venv", spec.venv, plan.venv, "dir"))
    if spec.conda is not None and "/" in spec.conda:  # a prefix path, not a name
        found.append(
            NeededPath("conda", spec.conda, _absolute(spec.conda, home, plan.workdir), "dir")
        )
    if plan.container is not None and plan.container.image.startswith("/"):
        # An image file or directory (a .sif, a Charliecloud directory, an OCI bundle);
        # a reference (docker://, name:tag) is the runtime's to fetch.
        assert spec.container is not None
        image, written = plan.container.image, spec.container.image
        if plan.container.runtime == "oci":  # a bundle: a directory with config.json
            found.append(
                NeededPath(
                    "container.image",
                    f"{written} (an OCI bundle's config.json)",
                    posixpath.join(image, "config.json"),
                    "file",
                )
            )
        else:
            found.append(NeededPath("container.image", written, image, "exists"))
    skip = [_absolute(p, home, "/") for p in site.node_only_paths]
    skip.append(_absolute(site.job_root, home, "/"))
    return [n for n in found if _checkable(n, skip)]


def _command_paths(argv: Sequence[str], workdir: str, home: str) -> list[NeededPath]:
    program = argv[0]
    if "/" in program:  # ./run.sh, bin/train, /opt/x/bin/python
        return [NeededPath("command[0]", program, _absolute(program, home, workdir), "file")]
    if not _INTERPRETERS.match(program):
        return []
    for index, word in enumerate(argv[1:], start=1):
        if word in _NO_FILE_OPTIONS:
            return []
        if word.startswith("-"):
            continue
        return [NeededPath(f"command[{index}]", word, _absolute(word, home, workdir), "file")]
    return []


def _absolute(path: str, home: str, base: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return posixpath.normpath(posixpath.join(base, path))


def _checkable(needed: NeededPath, skip: Sequence[str]) -> bool:
    written = needed.written
    if any(c in written for c in "${}") or (written.startswith("~") and written[:2] != "~/"):
        return False  # known only in the job; ~user is not expanded
    return not any(needed.path == s or needed.path.startswith(s.rstrip("/") + "/") for s in skip)


def missing_paths(runner: Runner | None, needed: Sequence[NeededPath]) -> list[NeededPath]:
    """The ``needed`` paths that do not exist (as a file, or as a directory).

    ``runner``: ``None`` checks this machine; a remote runner checks there in ONE command.
    """
    if not needed:
        return []
    if runner is None:
        return [n for n in needed if not _exists_here(n)]
    # test -f / -d for each, printing the index of each missing one: one round trip.
    script = (
        'i=0; for p in "$@"; do k=${p%%:*}; f=${p#*:}; '
        'test "-$k" "$f" || echo "$i"; i=$((i+1)); done'
    )
    letter = {"file": "f", "dir": "d", "exists": "e"}
    args = [f"{letter[n.kind]}:{n.path}" for n in needed]
    result = runner.run(["sh", "-c", script, "sh", *args], timeout=30)
    if not result.ok:
        return []  # cannot tell: sbatch and the job have the last word
    bad = {int(line) for line in result.stdout.split() if line.isdigit()}
    return [n for i, n in enumerate(needed) if i in bad]


def _exists_here(needed: NeededPath) -> bool:
    if needed.kind == "exists":
        return os.path.exists(needed.path)
    return os.path.isfile(needed.path) if needed.kind == "file" else os.path.isdir(needed.path)


def check_paths(
    spec: JobSpec,
    plan: SubmissionPlan,
    site: SiteConfig,
    home: str,
    *,
    source: str,
    runner: Runner | None = None,
    where: str = "this machine",
) -> None:
    """Raise a :class:`~hpclaunch.errors.SpecError` naming every missing path.

    Args:
        source: The spec file (and job, in a multi-job file) for the message.
        runner: ``None``: check this machine; else where Slurm's commands run (SSH).
        where: That machine, for the message.
    """
    missing = missing_paths(runner, needed_paths(spec, plan, site, home))
    if not missing:
        return
    lines = "\n".join(
        f"  - {n.field}: {n.written!r}"
        + (f" ({n.path})" if n.path != n.written else "")
        + {"file": " is not a file", "dir": " is not a directory", "exists": " does not exist"}[
            n.kind
        ]
        + f" on {where}"
        for n in missing
    )
    relative = any(
        not posixpath.isabs(n.written) and not n.written.startswith("~")
        for n in missing
        if n.field != "container.image"
    )
    hint = "fix the path"
    image = next((n for n in missing if n.field == "container.image"), None)
    if image is not None and not posixpath.isabs(image.written) and site.containers:
        # A relative image is the site's image_dir's, not the workdir's.
        hint += (
            f"; a relative container.image is looked up in the site's containers.image_dir "
            f"({site.containers.image_dir}): give an image there, or an absolute path"
        )
    if relative:
        hint += (
            f"; relative paths start from the workdir ({plan.workdir}): run hpclaunch from the "
            "directory they are relative to, or set workdir: in the spec"
        )
    hint += (
        "; if it exists only on the compute nodes, list its mount under node_only_paths in the "
        "site config, or submit with --no-check"
    )
    plural = "s do" if len(missing) > 1 else " does"
    raise SpecError(f"{source}: path{plural} not exist:\n{lines}", hint=hint)
