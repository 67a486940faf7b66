"""``python -m hpclaunch.calls [--item N]``: run the job's pickled function, inside the job.

Reads ``$HPCLAUNCH_JOB_DIR/call/call.pkl`` (the batch script exports the job directory),
runs the function and writes ``result.pkl`` (:mod:`hpclaunch.calls.payload`). A task of a
``session.map`` array (``--item N``, the sweep's ``{i}``) reads the array's one file in
``$HPCLAUNCH_SWEEP_DIR/call/``, calls the function on item N and writes its result in its
own ``$HPCLAUNCH_JOB_DIR/call/`` (``<job dir>/tasks/N/``, set by the sweep's task step). Exit codes:
0 with a value; 1 when the function raised (its exception is the result) or the call could
not be loaded. A preemption's SIGTERM ends the process before any result: the sidecar
requeues the job and the next attempt calls the function again (it resumes from its own
checkpoint through :mod:`hpclaunch.runtime`, as a trainer does).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch._private import foreign_or_open
from hpclaunch.calls.payload import (
    dump_error,
    load_call,
    write_value,
)
from hpclaunch.errors import CallError
from hpclaunch.jobdir import JobDir
from hpclaunch.store.files import write_private, write_private_with


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpclaunch.calls")
    parser.add_argument("--item", type=int, help="a map's item (its sweep point)")
    item = parser.parse_args(argv).item
    job_dir = os.environ.get("HPCLAUNCH_JOB_DIR")
    if not job_dir:
        print("hpclaunch.calls: HPCLAUNCH_JOB_DIR is not set (run inside an hpclaunch job)")
        return 2
    call_dir = os.path.join(os.environ.get("HPCLAUNCH_SWEEP_DIR", job_dir), jobdir.CALL_DIR)
    # Written atomically, 0600, its directory made 0700 (a map's task has none yet).
    result = Path(JobDir(job_dir).result)
    where = f"{socket.gethostname()}, {sys.executable}"
    call_file = os.path.join(call_dir, jobdir.CALL)
    try:
        for path in (call_dir, call_file):
            why = foreign_or_open(path)  # the call is code: only the submitter's own
            if why is not None:
                raise CallError(f"{why}: the call is not loaded")
        with open(call_file, "rb") as fh:
            fn, args, kwargs = load_call(fh.read(), where=where, item=item)
    except Exception as exc:  # a mismatch, a module missing here: the result says which
        traceback.print_exc()
        write_private(result, dump_error(exc, traceback.format_exc()))
        return 1
    try:
        value = fn(*args, **kwargs)
    except SystemExit as exc:  # raised back at the submitter's, it would end their program
        said = CallError(
            f"the function called sys.exit({exc.code!r}) instead of returning a value",
            hint="return a value (or raise an exception) from the function",
        )
        print(f"hpclaunch.calls: {said.message}")
        write_private(result, dump_error(said, traceback.format_exc()))
        return 1
    except Exception as exc:
        traceback.print_exc()
        write_private(result, dump_error(exc, traceback.format_exc()))
        return 1
    try:  # streamed into the file: a large value is never held twice
        write_private_with(result, lambda out: write_value(out, value))
    except CallError as exc:
        print(f"hpclaunch.calls: {exc}")
        write_private(result, dump_error(exc, traceback.format_exc()))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
