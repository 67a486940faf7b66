"""Code snapshots for ``submit --sync``: the working tree, frozen on the cluster.

The tree (git-tracked plus untracked-not-ignored files; every file outside a git repo) is
hashed locally; each file's content goes to a content-addressed store on the cluster,
``<store>/objects/<sha256>``, only if the store does not have it yet (one remote command
checks all hashes, and whether the snapshot exists already); then one shell script, fed on
stdin, builds ``<store>/<tree hash>/`` from hard links to the objects (copies for
executables, whose mode a hard link would share).
The job runs from that directory, so editing the local tree later changes no queued job,
and an unchanged tree costs one listing round trip and nothing else.

Objects are read-only (0444): a job that writes into a snapshot file fails instead of
corrupting every snapshot that shares it. Directories stay writable, for outputs.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.errors import CommandFailed, ConfigError
from hpclaunch.transport.base import Runner

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SyncStats",
    "Tree",
    "TreeFile",
    "find_root",
    "scan",
    "snapshot_dir",
    "store_dir",
    "upload",
]

#: Largest tree ``--sync`` sends (bytes of all files together).
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: Hashes per existence-check command (each is 65 bytes of stdin).
CHECK_BATCH = 20000
#: Age (minutes) after which a temporary left in the store by a cut upload is removed.
STALE_MINUTES = 60


@dataclass(frozen=True)
class TreeFile:
    """One file of the tree: ``path`` is relative, with ``/`` separators."""

    path: str
    sha256: str
    size: int
    executable: bool


@dataclass(frozen=True)
class Tree:
    """A scanned working tree.

    Attributes:
        root: The local directory (the git top level, or the submit directory).
        files: Its files, sorted by path.
        digest: The tree's hash (paths, modes and contents): the snapshot's name.
    """

    root: Path
    files: tuple[TreeFile, ...]
    digest: str

    @property
    def size(self) -> int:
        """Bytes of all files together."""
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class SyncStats:
    """What :func:`upload` did: files in the tree, objects and bytes sent, the snapshot's
    directory, and whether it was built now (``False``: it existed already)."""

    files: int
    sent: int
    bytes_sent: int
    snapshot: str
    built: bool = True


def find_root(cwd: Path) -> Path:
    """The git top level containing ``cwd``, or ``cwd`` itself outside a git repo."""
    found = _git(cwd, "rev-parse", "--show-toplevel")
    return Path(found.strip()) if found is not None else cwd


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _list(root: Path) -> list[str]:
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is not None:
        return sorted({p for p in listed.split("\0") if p})
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        rel = os.path.relpath(directory, root)
        found += [f if rel == "." else f"{rel}/{f}".replace(os.sep, "/") for f in files]
    return sorted(found)


def scan(root: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Tree:
    """Hash the files of the tree at ``root``.

    Raises:
        ConfigError: The tree is larger than ``max_bytes``.
    """
    files: list[TreeFile] = []
    total = 0
    for rel in _list(root):
        path = root / rel
        if not path.is_file():  # deleted but still in the index, a submodule, a dangling link
            continue
        size = path.stat().st_size
        total += size
        if total > max_bytes:
            raise ConfigError(
                f"--sync: the tree at {root} is larger than {max_bytes // 2**20} MiB "
                f"(reached at {rel})",
                hint="keep data and checkpoints out of the code tree (add them to .gitignore), "
                "or copy them to the cluster once yourself",
            )
        files.append(TreeFile(rel, _hash_file(path), size, executable=os.access(path, os.X_OK)))
    index = "".join(f"{int(f.executable)} {f.sha256} {f.path}\0" for f in files)
    return Tree(root, tuple(files), hashlib.sha256(index.encode()).hexdigest())


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def store_dir(job_root: str, home: str) -> str:
    """``<job_root>/../snapshots``, with ``~`` expanded to ``home``."""
    root = home + job_root[1:] if job_root == "~" or job_root.startswith("~/") else job_root
    return posixpath.join(posixpath.dirname(posixpath.normpath(root)), "snapshots")


def snapshot_dir(store: str, tree: Tree) -> str:
    """Where ``tree``'s snapshot lives in ``store``."""
    return posixpath.join(store, tree.digest)


def missing_objects(
    runner: Runner, store: str, hashes: Sequence[str], snapshot: str | None = None
) -> tuple[set[str], bool]:
    """The hashes ``store`` has no object for (one command per :data:`CHECK_BATCH`), and
    whether the directory ``snapshot`` exists already (asked in the same command)."""
    objects = posixpath.join(store, "objects")
    script = (
        '[ -n "$2" ] && [ -d "$2" ] && echo snapshot-exists; '
        # No store yet: nothing is there; read the hashes all the same, so the sender
        # never writes to a command that has ended.
        'cd "$1" 2>/dev/null || { cat >/dev/null; exit 0; }; '
        'while read -r h; do [ -e "$h" ] && echo "$h"; done; exit 0'
    )
    present: set[str] = set()
    exists = False
    for start in range(0, max(len(hashes), 1), CHECK_BATCH):
        batch = hashes[start : start + CHECK_BATCH]
        result = runner.run(
            ["sh", "-c", script, "sh", objects, snapshot or ""],
            stdin="".join(h + "\n" for h in batch),
        )
        if not result.ok:
            raise CommandFailed(result)
        words = result.stdout.split()
        exists = exists or "snapshot-exists" in words
        present.update(w for w in words if w != "snapshot-exists")
    return set(hashes) - present, exists


def upload(
    runner: Runner,
    tree: Tree,
    store: str,
    *,
    progress: Callable[[int], None] | None = None,
) -> SyncStats:
    """Send what ``store`` lacks of ``tree``, then build its snapshot directory.

    Args:
        progress: Called with the bytes of each object sent.

    Raises:
        TransportError: A file could not be sent or the snapshot not built.
    """
    by_hash = {f.sha256: f for f in tree.files}
    snapshot = snapshot_dir(store, tree)
    missing, exists = missing_objects(runner, store, sorted(by_hash), snapshot)
    if exists:  # the same tree was sent before: nothing to send or build
        return SyncStats(len(tree.files), 0, 0, snapshot, built=False)
    sent_bytes = 0
    for digest in sorted(missing):
        data = (tree.root / by_hash[digest].path).read_bytes()
        runner.put_bytes(posixpath.join(store, "objects", digest), data, 0o444)
        sent_bytes += len(data)
        if progress is not None:
            progress(len(data))
    result = runner.run(["sh", "-s"], stdin=materialise_script(tree, store))
    if not result.ok:
        raise CommandFailed(result, hint=f"could not build the snapshot {snapshot}")
    return SyncStats(len(tree.files), len(missing), sent_bytes, snapshot)


def materialise_script(tree: Tree, store: str) -> str:
    """The POSIX shell script that builds ``tree``'s snapshot from the objects."""
    q = shlex.quote
    snapshot = snapshot_dir(store, tree)
    lines = [
        "set -eu",
        "umask 077",
        f"snap={q(snapshot)}",
        f"obj={q(posixpath.join(store, 'objects'))}",
        '[ -d "$snap" ] && exit 0',  # same tree already there
        # What a cut link or a killed upload left an hour ago or more: object temporaries
        # (put_bytes' ".<name>.<id>.tmp") and half-built snapshots. Never read as objects
        # or snapshots (their names are not a hash), only space; younger ones may be live.
        f'find "$obj" -maxdepth 1 -name ".*.tmp" -mmin +{STALE_MINUTES} -exec rm -f {{}} + '
        "2>/dev/null || true",
        f'find {q(store)} -maxdepth 1 -name "*.tmp.*" -mmin +{STALE_MINUTES} '
        "-exec rm -rf {} + 2>/dev/null || true",
        'tmp="$snap.tmp.$$"',
        'rm -rf "$tmp"; mkdir -p "$tmp"; cd "$tmp"',
    ]
    dirs = sorted({posixpath.dirname(f.path) for f in tree.files} - {""})
    lines += [f"mkdir -p {q(d)}" for d in dirs]
    for f in tree.files:
        if f.executable:
            lines.append(f'cp "$obj/{f.sha256}" {q(f.path)}; chmod 700 {q(f.path)}')
        else:  # a hard link shares the object; a copy where links are impossible
            lines.append(
                f'ln "$obj/{f.sha256}" {q(f.path)} 2>/dev/null || cp "$obj/{f.sha256}" {q(f.path)}'
            )
    # Another --sync of the same tree may have won the race: keep its copy.
    lines += ["cd /", 'mv -T "$tmp" "$snap" 2>/dev/null || rm -rf "$tmp"', ""]
    return "\n".join(lines)
