"""The ``local`` backend: a job's batch script runs on this machine, without Slurm.

For debugging and for tests of user code (submitit's ``local`` executor): the same script
as on the cluster (sidecar, checkpoints, results, logs in the job directory), started as a
child process here. ``Session(backend="local")``, or ``--backend local``.

Each submission is a directory ``$XDG_STATE_HOME/hpclaunch/local-jobs/<id>/`` (id
``local-<n>``): ``request.json`` (what sbatch was asked), ``state/<job|task>.json`` (each
task's state, written by the runner :mod:`hpclaunch.backends.local_run`, which runs the
submission detached from the submitting process) and ``output-<job|task>.log`` (what Slurm
writes to ``slurm-%j.out``). From sbatch's options it keeps ``--array`` (``%N`` included),
``--dependency`` (``afterok``, ``afterany``, ``afternotok`` on other local jobs) and the
script's arguments; ``--chdir`` comes from the script. Resources, partitions, QOS and time
limits are Slurm's business: here a job takes what the machine has and runs to its end.
There is no cluster to check a plan against, and no preemption or requeue.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from hpclaunch._private import make_private_dirs
from hpclaunch.backends.arrays import summarise_array
from hpclaunch.backends.base import Backend
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import BackendUnavailable, SubmissionError
from hpclaunch.slurm.job_ids import LOCAL_PREFIX
from hpclaunch.slurm.jobs import JobInfo, JobRef, JobState
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.store.files import write_private
from hpclaunch.transport.local import LocalRunner

if TYPE_CHECKING:
    from collections.abc import Callable

    from hpclaunch.config.site import SiteConfig
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.transport.base import Runner

__all__ = ["PREFIX", "LocalBackend", "local_info", "local_root"]

#: Local job ids are ``local-<n>``: never taken for a Slurm job's.
PREFIX = LOCAL_PREFIX
#: The state file of a job that is not an array.
WHOLE = "job"


def local_root(env: Mapping[str, str] | None = None) -> Path:
    """Where the local backend keeps its submissions."""
    return user_dir("state", env) / "local-jobs"


class LocalBackend(Backend):
    """Runs batch scripts on this machine (see the module docstring)."""

    name = "local"
    has_cluster: ClassVar[bool] = False
    can_expedite: ClassVar[bool] = False
    asked_for_submissions = "this machine's local jobs"

    def __init__(self, runner: Runner, site: SiteConfig) -> None:
        super().__init__(runner, site)
        if not isinstance(runner, LocalRunner):  # over SSH the job would run here, not there
            raise BackendUnavailable(
                "the 'local' backend runs jobs on this machine; it cannot be used with remote=",
                hint="drop remote= (or --remote), or use the 'cli' backend",
            )
        self.root = local_root()

    def describe(self) -> str:
        return f"local (jobs run on this machine, in {self.root})"

    def capabilities(self, *, now: Callable[[], float] | None = None) -> Capabilities:
        raise BackendUnavailable(
            "the 'local' backend has no cluster to ask", hint="use the 'cli' backend"
        )

    def submit(self, job: RenderedJob, *, script_written: bool = False) -> JobRef:
        if not script_written:
            self.runner.put_file(job.script_path, job.script, 0o700)
        return self.submit_script(
            job.script_path, job.sbatch_argv, job.plan.submission_id, job.plan.job_name
        )

    def submit_script(
        self, script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
    ) -> JobRef:
        request = _request(script_path, sbatch_argv, submission_id, name)
        job_id, directory = self._new_job()
        write_private(directory / "request.json", json.dumps(request))
        for key in _keys(request):
            write_private(_state_file(directory, key), json.dumps({"state": "PENDING"}))
        # The runner detaches itself (a session of its own, its parent gone at once): it
        # outlives the submitting process, as a Slurm job does.
        started = subprocess.run(
            [sys.executable, "-m", "hpclaunch.backends.local_run", "--detach", str(directory)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=_job_env(os.environ),
            check=False,
        )
        if started.returncode != 0:
            raise SubmissionError(f"the local job runner did not start: {started.stderr.strip()}")
        return JobRef(job_id)

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        return {ref: self._info(ref) for ref in refs}

    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        infos = self.status([JobRef(task) for task in wanted])
        return {
            ref.job_id: info.state.value
            for ref, info in infos.items()
            if info.state is not JobState.UNKNOWN
        }

    def cancel(self, ref: JobRef) -> None:
        base, _, task = ref.job_id.partition("_")
        if local_info(self.root, JobRef(base)) is None:
            return
        directory = self.root / base
        write_private(directory / (f"cancel-{task}" if task else "cancel"), "")
        pid = _read_int(directory / "runner.pid")
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # it ended
                os.kill(pid, signal.SIGUSR2)  # the runner looks at the cancel files now

    def find_submission(self, submission_id: str) -> JobRef | None:
        if not self.root.is_dir():
            return None
        for directory in sorted(self.root.iterdir()):
            request = _read_json(directory / "request.json")
            if request and request.get("submission_id") == submission_id:
                return JobRef(directory.name)
        return None

    def find_jobs(self, name: str) -> list[JobInfo]:
        found = []
        for directory in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            request = _read_json(directory / "request.json")
            if request and request.get("name") == name:
                info = self._info(JobRef(directory.name))
                if not info.state.is_finished:
                    found.append(info)
        return found

    def _info(self, ref: JobRef) -> JobInfo:
        found = local_info(self.root, ref)
        return (
            JobInfo(ref, JobState.UNKNOWN, reason="no such local job") if found is None else found
        )

    def _new_job(self) -> tuple[str, Path]:
        """The next id, its directory made (a lock file keeps two submitters apart)."""
        make_private_dirs(self.root)
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            taken = [int(p.name[len(PREFIX) :]) for p in self.root.glob(f"{PREFIX}*")]
            job_id = f"{PREFIX}{max(taken, default=0) + 1}"
            directory = self.root / job_id
            directory.mkdir(mode=0o700)
        return job_id, directory


def local_info(root: Path, ref: JobRef) -> JobInfo | None:
    """What the state files under ``root`` say of local job ``ref`` (an array: its tasks
    summed up as Slurm's are); ``None`` when there is no such job."""
    base, _, task = ref.job_id.partition("_")
    if not base.startswith(PREFIX) or not base[len(PREFIX) :].isdigit():
        return None
    directory = root / base
    request = _read_json(directory / "request.json")
    if request is None:
        return None
    name = str(request["name"])
    if task:
        return _task_info(ref, directory, task, name)
    if request["tasks"] is None:
        return _task_info(ref, directory, WHOLE, name)
    tasks = [_task_info(JobRef(f"{base}_{t}"), directory, str(t), name) for t in request["tasks"]]
    return summarise_array(ref, tasks)


def _request(
    script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
) -> dict[str, Any]:
    """What the runner needs of an sbatch command line (see the module docstring)."""
    try:
        at = list(sbatch_argv).index(script_path)
    except ValueError:
        raise SubmissionError(f"the local backend found no script in {list(sbatch_argv)}") from None
    options = dict(_option(arg) for arg in sbatch_argv[1:at] if arg.startswith("--"))
    tasks: list[int] | None = None
    limit: int | None = None
    if "--array" in options:
        spec, _, throttle = options["--array"].partition("%")
        tasks = task_ids(spec)
        limit = int(throttle) if throttle else None
    script = Path(script_path).read_text(encoding="utf-8")
    chdir = next(
        (
            line.split("=", 1)[1].strip().strip("'\"")
            for line in script.splitlines()
            if line.startswith("#SBATCH --chdir=")
        ),
        None,
    )
    return {
        "script": script_path,
        "args": list(sbatch_argv[at + 1 :]),
        "name": name,
        "submission_id": submission_id,
        "tasks": tasks,
        "limit": limit,
        "dependency": options.get("--dependency"),
        "chdir": chdir,
    }


def _option(arg: str) -> tuple[str, str]:
    flag, _, value = arg.partition("=")
    return flag, value


def _keys(request: Mapping[str, Any]) -> list[str]:
    return [WHOLE] if request["tasks"] is None else [str(t) for t in request["tasks"]]


def _job_env(env: Mapping[str, str]) -> dict[str, str]:
    """The submitter's environment (sbatch's default ``--export=ALL``) without Slurm's own
    variables: from inside an allocation they would make the sidecar start ``srun``."""
    return {k: v for k, v in env.items() if not k.startswith("SLURM_")}


def _task_info(ref: JobRef, directory: Path, key: str, name: str) -> JobInfo:
    data = _read_json(_state_file(directory, key))
    if data is None:
        return JobInfo(ref, JobState.UNKNOWN, name=name, reason="no such task")
    state = JobState(data["state"])
    return JobInfo(
        ref,
        state,
        name=name,
        reason=data.get("reason"),
        exit_code=data.get("exit_code"),
        exit_signal=data.get("exit_signal"),
        nodes=data.get("host") if state is JobState.RUNNING else None,
        source="local",
    )


def _state_file(directory: Path, key: str) -> Path:
    return directory / "state" / f"{key}.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
