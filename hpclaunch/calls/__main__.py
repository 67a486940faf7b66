"""``python -m hpclaunch.calls``: run the job's pickled function, inside the job.

Reads ``$HPCLAUNCH_JOB_DIR/call/call.pkl`` (the batch script exports the job directory),
runs the function and writes ``result.pkl`` (:mod:`hpclaunch.calls.payload`). Exit codes:
0 with a value; 1 when the function raised (its exception is the result) or the call could
not be loaded. A preemption's SIGTERM ends the process before any result: the sidecar
requeues the job and the next attempt calls the function again (it resumes from its own
checkpoint through :mod:`hpclaunch.runtime`, as a trainer does).
"""

from __future__ import annotations

import os
import socket
import sys
import traceback

from hpclaunch.calls.payload import (
    CALL_DIR,
    CALL_FILE,
    RESULT_FILE,
    dump_error,
    dump_value,
    load_call,
    write_atomic,
)
from hpclaunch.errors import CallError


def main() -> int:
    job_dir = os.environ.get("HPCLAUNCH_JOB_DIR")
    if not job_dir:
        print("hpclaunch.calls: HPCLAUNCH_JOB_DIR is not set (run inside an hpclaunch job)")
        return 2
    call_dir = os.path.join(job_dir, CALL_DIR)
    result = os.path.join(call_dir, RESULT_FILE)
    where = f"{socket.gethostname()}, {sys.executable}"
    try:
        with open(os.path.join(call_dir, CALL_FILE), "rb") as fh:
            fn, args, kwargs = load_call(fh.read(), where=where)
    except Exception as exc:  # a mismatch, a module missing here: the result says which
        traceback.print_exc()
        write_atomic(result, dump_error(exc, traceback.format_exc()))
        return 1
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        traceback.print_exc()
        write_atomic(result, dump_error(exc, traceback.format_exc()))
        return 1
    try:
        data = dump_value(value)
    except CallError as exc:
        print(f"hpclaunch.calls: {exc}")
        write_atomic(result, dump_error(exc, traceback.format_exc()))
        return 1
    write_atomic(result, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
