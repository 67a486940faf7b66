"""A job's own OCI bundle: the image's, plus the job's mounts (``runtime: oci``).

Slurm's OCI support (``srun --container=BUNDLE``, oci.conf) starts a container from a
bundle's ``config.json`` and has no option for a job's mounts: what is mounted is what that
file says (containers.html, 23.02 to 25.11). So the batch script runs this first::

    python -m hpclaunch.supervise.oci_bundle --image IMAGE --bundle <job dir>/oci-bundle \\
        --mount SRC:DST[:ro] ... [--venv DIR]

It writes ``<bundle>/config.json``: the image's, with ``root.path`` made absolute (the
rootfs stays the image's, nothing is copied) and a bind mount added per ``--mount`` (the
site's mounts, the job, log and checkpoint directories, the start directory, the spec's
mounts), and for ``--venv`` the environment and the interpreter it was made from (its
``pyvenv.cfg``'s ``home``), read-only, where no mount covers them, with its ``bin`` first on
the bundle's ``PATH`` (Slurm passes the job's environment in, but not ``PATH``). The step
then runs with ``--container=<bundle>``. Written atomically, again at every attempt.

Slurm 22.05 ignores ``root.path`` and always uses ``<bundle>/rootfs`` (slurmstepd
container.c, ``_modify_config``; 23.02 reads ``root.path``), so ``<bundle>/rootfs`` is also a
link to the image's rootfs (crun follows it; runc refuses a linked rootfs, so a native 22.05
cluster with runc cannot run ``runtime: oci`` jobs).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpclaunch._fs import write_json_atomic
from hpclaunch._private import make_private_dirs

__all__ = ["bundle_config", "main", "mounted_at_same_path", "venv_paths"]

#: runc's and crun's PATH for a process.env without one.
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def mounted_at_same_path(path: str, mounts: Iterable[tuple[str, str, bool]]) -> bool:
    """Whether one of ``mounts`` (source, destination, read-only) already shows ``path``
    at its own path inside: a same-path mount of it or of a directory above it."""
    return any(
        src == dst and (path == dst or path.startswith(dst.rstrip("/") + "/"))
        for src, dst, _ in mounts
    )


def venv_paths(venv: str) -> list[str]:
    """The venv and the prefix of the interpreter it was made from (``home`` in its
    ``pyvenv.cfg`` is that prefix's ``bin``): both must exist inside for its python to run."""
    paths = [venv]
    try:
        text = (Path(venv) / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return paths
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            paths.append(str(Path(value.strip()).parent))
    return paths


def bundle_config(
    image_config: dict[str, Any],
    image: str,
    mounts: list[tuple[str, str, bool]],
    venv: str | None = None,
) -> dict[str, Any]:
    """``image_config`` (the image's ``config.json``) with an absolute root and the mounts."""
    config: dict[str, Any] = json.loads(json.dumps(image_config))  # a deep copy
    root = config.setdefault("root", {})
    root["path"] = os.path.join(image, root.get("path", "rootfs"))
    added: list[dict[str, Any]] = config.setdefault("mounts", [])
    wanted = list(mounts)
    for path in venv_paths(venv) if venv else []:
        if not mounted_at_same_path(path, wanted):
            wanted.append((path, path, True))
    if venv:
        # Slurm passes the job's environment into the container but not its PATH (the
        # bundle's process.env keeps it; seen on 25.11 with crun): the venv goes first there.
        process = config.setdefault("process", {})
        env = [e for e in process.get("env", []) if not e.startswith(("PATH=", "VIRTUAL_ENV="))]
        path = next((e[5:] for e in process.get("env", []) if e.startswith("PATH=")), _DEFAULT_PATH)
        process["env"] = [*env, f"PATH={venv}/bin:{path}", f"VIRTUAL_ENV={venv}"]
    for source, destination, read_only in wanted:
        added[:] = [m for m in added if m.get("destination") != destination]
        added.append(
            {
                "destination": destination,
                "source": source,
                "type": "bind",
                "options": ["rbind", "rprivate", "ro" if read_only else "rw"],
            }
        )
    return config


def _mount(text: str) -> tuple[str, str, bool]:
    source, _, rest = text.partition(":")
    destination, _, mode = rest.partition(":")
    return source, destination or source, mode == "ro"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpclaunch.supervise.oci_bundle")
    parser.add_argument("--image", required=True, help="the image's bundle directory")
    parser.add_argument("--bundle", required=True, help="the job's bundle directory")
    parser.add_argument("--mount", action="append", default=[], help="SRC:DST[:ro]")
    parser.add_argument("--venv", help="a virtual environment to mount read-only")
    args = parser.parse_args(argv)
    try:
        image_config = json.loads((Path(args.image) / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        parser.exit(2, f"hpclaunch: cannot read the OCI bundle {args.image}/config.json: {exc}\n")
    config = bundle_config(image_config, args.image, [_mount(m) for m in args.mount], args.venv)
    # Here, not at the top: planning imports this module for mounted_at_same_path, and the
    # runtime package's import (~15 ms: its checkpoint module) would be in every render.

    bundle = Path(args.bundle)
    make_private_dirs(bundle)
    write_json_atomic(bundle / "config.json", config)
    link_rootfs(bundle, config["root"]["path"])
    return 0


def link_rootfs(bundle: Path, rootfs: str) -> None:
    """``<bundle>/rootfs`` -> ``rootfs``, replaced atomically (for Slurm 22.05, above)."""
    link = bundle / "rootfs"
    if link.is_symlink() and os.readlink(link) == rootfs:
        return
    staged = bundle / f".rootfs.{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(rootfs)
    staged.replace(link)


if __name__ == "__main__":
    raise SystemExit(main())
