"""What a function's large result costs in memory, at the job and at the submitter's, beside
a plain ``pickle.dump``/``pickle.load`` of the same value in the same run (what submitit
does: its result file is one pickle, written and read from the file) and hpclaunch's
earlier format (the value's pickle held as bytes inside a second pickle; issue 45: "a large
result costs 2.1 x its size, submitit 1.0 x").

    .venv/bin/python bench/result_memory.py [--mib 256] [--reps 3]

Each figure is measured in a fresh process: the peak resident memory (``ru_maxrss``) the
step added over what the process held before it, divided by the value's size. The value is
a list of 1 MiB ``bytes`` objects (as a result of arrays or tensors: many large buffers).
``write``: the job writing ``result.pkl`` while it holds the value; ``read``: the submitter
reading it and getting the value (``read_outcome`` through the local runner, then
``Outcome.get``). No cluster needed. Prints medians; record them in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, pickle, resource, sys
sys.path.insert(0, sys.argv[1])
way, step, mib, path = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
from pathlib import Path

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

import cloudpickle
from hpclaunch.calls import payload
from hpclaunch.ops.call import read_outcome
from hpclaunch.store.files import write_private, write_private_with
from hpclaunch.transport.local import LocalRunner

class Ctx:  # what read_outcome uses of a session: its runner
    runner = LocalRunner()

size = mib << 20
if step == "write":
    value = [os.urandom(1 << 20) for _ in range(mib)]
    before = peak()
    if way == "hpclaunch":
        write_private_with(Path(path), lambda out: payload.write_value(out, value))
    elif way == "earlier":
        inner = cloudpickle.dumps(value)
        write_private(Path(path), pickle.dumps(
            {"ok": True, "type": "", "text": "", "traceback": "", "payload": inner}))
    else:
        with open(path, "wb") as fh:
            pickle.dump(value, fh)
else:
    before = peak()
    if way in ("hpclaunch", "earlier"):
        value = read_outcome(Ctx(), os.path.dirname(os.path.dirname(path))).get("bench")
    else:
        with open(path, "rb") as fh:
            value = pickle.load(fh)
    assert len(value) == mib
print(json.dumps((peak() - before) / size))
"""


def measure(way: str, step: str, mib: int, path: Path) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), way, step, str(mib), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="the value's size in MiB")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for way in ("hpclaunch", "earlier", "pickle"):
            # result.pkl where read_outcome looks: <job dir>/call/result.pkl
            path = Path(tmp, way, "call", "result.pkl")
            path.parent.mkdir(parents=True, mode=0o700)
            Path(tmp, way).chmod(0o700)
            for _ in range(args.reps):
                for step in ("write", "read"):
                    rows.setdefault(f"{way} {step}", []).append(measure(way, step, args.mib, path))
                path.unlink()
    print(f"result of {args.mib} MiB, peak memory added / its size (median of {args.reps}):")
    for name, values in rows.items():
        print(f"  {name:16} {statistics.median(values):.2f} x")


if __name__ == "__main__":
    main()
