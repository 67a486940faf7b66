"""Runs one submission of the ``local`` backend: ``python -m hpclaunch.backends.local_run DIR``.

Started detached (a session of its own) by :class:`~hpclaunch.backends.local.LocalBackend`:
it waits for the submission's dependencies, then runs the batch script once, or once per
array task (``SLURM_ARRAY_TASK_ID`` set, at most ``%N`` at a time, else one per CPU), and
writes each task's state to ``DIR/state/<job|task>.json`` as Slurm would report it.
SIGUSR2 means "look at the cancel files": a cancelled task that runs gets SIGTERM (the
sidecar's end of a job: it stops the command and records it), one not started never starts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hpclaunch.backends.local import local_info
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.store.files import write_private

#: Dependency types of sbatch(1) run here, by what a dependency's final state must be.
_NEEDS = {
    "afterok": {"COMPLETED"},
    "afternotok": {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"},
    "afterany": None,  # any final state
}


class Submission:
    """One submission's directory and its running tasks."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.request: dict[str, Any] = json.loads((directory / "request.json").read_text())
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.cancels_seen = False

    def keys(self) -> list[str]:
        tasks = self.request["tasks"]
        return ["job"] if tasks is None else [str(t) for t in tasks]

    def cancelled(self, key: str) -> bool:
        return (self.dir / "cancel").exists() or (self.dir / f"cancel-{key}").exists()

    def write(self, key: str, **state: Any) -> None:
        write_private(self.dir / "state" / f"{key}.json", json.dumps(state))

    def run(self) -> None:
        unmet = self.wait_for_dependencies()
        pending = self.keys()
        if unmet:
            for key in pending:
                self.write(key, state="CANCELLED", reason=unmet)
            return
        limit = self.request["limit"] or os.cpu_count() or 1
        while pending or self.running:
            self.reap()
            for key in [k for k in pending if self.cancelled(k)]:
                pending.remove(key)
                self.write(key, state="CANCELLED", reason="cancelled before it started")
            while pending and len(self.running) < limit:
                self.start(pending.pop(0))
            time.sleep(0.05)

    def start(self, key: str) -> None:
        env = dict(os.environ)
        # The job's id for its log's first line (never SLURM_JOB_ID: the sidecar would
        # take the job for a Slurm one and call scontrol).
        env["HPCLAUNCH_LOCAL_JOB_ID"] = self.dir.name
        if key != "job":
            env["SLURM_ARRAY_TASK_ID"] = key
            env["HPCLAUNCH_LOCAL_JOB_ID"] = f"{self.dir.name}_{key}"
        workdir = self.request["chdir"] or os.getcwd()
        with open(self.dir / f"output-{key}.log", "ab") as out:
            proc = subprocess.Popen(
                ["/bin/bash", self.request["script"], *self.request["args"]],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        self.running[key] = proc
        self.write(key, state="RUNNING", pid=proc.pid, host=socket.gethostname())

    def reap(self) -> None:
        for key, proc in list(self.running.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.running[key]
            if self.cancelled(key):
                self.write(key, state="CANCELLED", exit_code=code, reason="cancelled")
            elif code < 0:
                self.write(key, state="FAILED", exit_code=0, exit_signal=-code)
            else:
                self.write(key, state="COMPLETED" if code == 0 else "FAILED", exit_code=code)

    def on_cancel(self, *_: object) -> None:
        for key, proc in self.running.items():
            if self.cancelled(key) and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def wait_for_dependencies(self) -> str | None:
        """``None`` once every dependency is met; else why one never will be."""
        text = self.request.get("dependency") or ""
        for part in filter(None, text.split(",")):
            kind, _, ids = part.partition(":")
            if kind not in _NEEDS:
                continue  # singleton and the rest: nothing to wait for on one machine
            for job_id in filter(None, ids.split(":")):
                state = self.wait_final(job_id)
                if state is None:
                    return "cancelled while it waited for its dependencies"
                wanted = _NEEDS[kind]
                if wanted is not None and state not in wanted:
                    return f"DependencyNeverSatisfied ({kind}:{job_id} ended {state})"
        return None

    def wait_final(self, job_id: str) -> str | None:
        """The final state of local job ``job_id`` (an array's summed up, as status shows
        it); ``None`` when this submission is cancelled meanwhile."""

        while not (self.dir / "cancel").exists():
            info = local_info(self.dir.parent, JobRef(job_id))
            if info is None:
                return "UNKNOWN"
            if info.state.is_finished:
                return info.state.value
            time.sleep(0.2)
        return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--detach"]:
        return detach(Path(argv[1]))
    submission = Submission(Path(argv[0]))
    signal.signal(signal.SIGUSR2, submission.on_cancel)
    submission.run()
    return 0


def detach(directory: Path) -> int:
    """Fork the runner into a session of its own and return at once (the submitter waits
    for this process only); the runner writes its pid to ``runner.pid``, its output to
    ``runner.log``."""
    if os.fork() > 0:
        return 0
    os.setsid()
    log = os.open(directory / "runner.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    write_private(directory / "runner.pid", str(os.getpid()))
    try:
        code = main([str(directory)])
    finally:
        sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
