"""`submit --sync` of a 1,000-file tree: first upload vs an unchanged second one.

    .venv/bin/python bench/sync.py

Scans a fresh tree (1,000 files of ~1 KiB) and uploads it through a private sshd as hpcuser
(tests/integration/sshd.py) into a throwaway store under /home/hpcuser, twice; reports objects
and bytes sent, stdin bytes of the remote commands (hash list and snapshot script), and time.
Goal (issue 6): the second sync sends no object and costs a few round trips.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from _sshbench import ssh_runner

from hpclaunch.transport.sync import materialise_script, scan, upload


def main() -> None:
    tree_dir = Path(tempfile.mkdtemp(prefix="hpclaunch-benchtree-"))
    salt = uuid.uuid4().hex
    for n in range(1000):
        sub = tree_dir / f"pkg{n % 20}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{n}.py").write_text(f"# {salt}\n" + f"x_{n} = {n}\n" * 60)
    store_top = f"/home/hpcuser/.hpclaunch-bench-{salt[:8]}"
    store = f"{store_top}/snapshots"
    try:
        with ssh_runner() as runner:
            runner.run(["true"])
            for label in ("first", "second"):
                channels = runner.channels_opened
                start = time.perf_counter()
                tree = scan(tree_dir)
                stats = upload(runner, tree, store)
                took = time.perf_counter() - start
                script = len(materialise_script(tree, store)) if stats.built else 0
                stdin = 65 * len(tree.files) + script
                print(
                    f"{label}: {stats.files} files, {stats.sent} objects sent, "
                    f"{stats.bytes_sent} bytes of objects, {stdin} bytes of command input, "
                    f"{runner.channels_opened - channels} channels, {took:.2f} s"
                )
    finally:
        shutil.rmtree(tree_dir, ignore_errors=True)
        if os.path.isdir(store_top):
            shutil.rmtree(store_top, ignore_errors=True)


if __name__ == "__main__":
    main()
