"""The pyslurm backend: Slurm's own library (libslurm, through pyslurm) in this process.

No command is started per call: ``status`` of any number of jobs is one slurmctld RPC (the
job list) and, for the jobs it no longer knows or saw end, one slurmdbd query; ``submit``
and ``cancel`` are one RPC each. Answers become the same :class:`~hpclaunch.slurm.jobs.JobInfo`
as the cli backend's and are merged the same way (:mod:`hpclaunch.backends.merge`).

A login-node library: pyslurm is built against one Slurm release (its major.minor must be
the cluster's; ``pip install`` refuses any other) and needs that release's libslurm on this
machine. Over SSH hpclaunch uses the cli backend.

Where pyslurm 25.11 cannot do a step, the cli backend does it, and the method says why:
``attempts`` and ``usage`` (``sacct --duplicates``), ``hold`` (``scontrol uhold``), and the
steps that name an array task not yet started or change an array (``cancel``,
``update_job``, ``requeue``, ``release``, ``signal`` of ``123_4``).
"""

from __future__ import annotations

import errno
import importlib
import os
import pwd
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from hpclaunch.backends.abilities import (
    ArbiterView,
    ControlsJobs,
    EstimatesStart,
    ReadsAccounting,
    ReadsQueue,
)
from hpclaunch.backends.arrays import held_problem
from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.backends.cli import (
    GONE,
    LOST_REPLY,
    SUBMISSION_LOOKBACK,
    CliBackend,
    sbatch_hint,
)
from hpclaunch.backends.jobdesc import (
    JobDescription,
    describe_job,
    merged_options,
    script_options,
)
from hpclaunch.backends.merge import merge_status
from hpclaunch.backends.pyslurm_discover import discover_with_pyslurm
from hpclaunch.backends.slurm_text import ended_by, is_held, wanted_ref
from hpclaunch.errors import (
    ACCOUNTING_UNAVAILABLE,
    CONTROLLER_UNREACHABLE,
    BackendError,
    BackendUnavailable,
    ControllerUnreachable,
    HpclaunchError,
    SubmissionError,
    UpdateRefused,
)
from hpclaunch.slurm.capabilities import version_said
from hpclaunch.slurm.cluster import (
    JOB_STATES,
    RUNNING_STATES,
    ClusterJob,
    NodeGpus,
    expand_hosts,
    usable,
)
from hpclaunch.slurm.jobs import Attempt, JobInfo, JobState, parse_state
from hpclaunch.slurm.queue import WHOLE_QUEUE, QueueQuery, QueueRow
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.slurm.text import field
from hpclaunch.slurm.times import format_elapsed
from hpclaunch.slurm.tres import gpus_per_node, gres_count, tres_value

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.slurm.estimate import StartEstimate
    from hpclaunch.slurm.usage import AttemptUsage
    from hpclaunch.transport.base import Runner

__all__ = ["INSTALL_HINT", "PyslurmBackend", "load_pyslurm", "pyslurm_release"]

INSTALL_HINT = (
    "build pyslurm for the cluster's Slurm: SLURM_INCLUDE_DIR=<slurm>/include "
    "SLURM_LIB_DIR=<slurm>/lib pip install 'hpclaunch[pyslurm]' 'pyslurm==<major.minor>.*' "
    "(e.g. pyslurm==25.11.* for Slurm 25.11); or use the cli backend (--backend cli)"
)
_T = TypeVar("_T")

#: Refusals after which sbatch sleeps and submits again, up to 15 times, 1, 2, ... seconds
#: apart (src/sbatch/sbatch.c, 25.11.7): EAGAIN ("Slurm temporarily unable to accept job"),
#: ESLURM_ERROR_ON_DESC_TO_RECORD_COPY (queue full), ESLURM_NODES_BUSY, ESLURM_PORTS_BUSY
#: (slurm/slurm_errno.h). No job was made, so submitting again cannot make a second one.
#: Seen with pyslurm, which does not retry: "Resource temporarily unavailable" for a
#: 1,000-task sweep right after another (bench/backends.py).
_RETRY_ERRNOS = frozenset({errno.EAGAIN, 2007, 2016, 2059})
_MAX_RETRIES = 15


class _NoProfile(tuple[str, ...]):
    """No accounting profile types, yet true: see ``_submit_described``."""

    def __bool__(self) -> bool:
        return True


_NO_PROFILE = _NoProfile()


def load_pyslurm() -> ModuleType:
    """Import pyslurm, or say why it cannot be used.

    Raises:
        BackendUnavailable: Not installed, or its libslurm is not on this machine.
    """
    try:
        pyslurm = importlib.import_module("pyslurm")
    except ImportError as exc:
        if exc.name == "pyslurm":
            raise BackendUnavailable(
                "the pyslurm backend needs the Python package 'pyslurm', which is not installed",
                hint=INSTALL_HINT,
            ) from exc
        # pyslurm is there but its libslurm is not (another Slurm release runs here, or
        # the library directory is not known to the loader: ldconfig or LD_LIBRARY_PATH).
        raise BackendUnavailable(
            f"pyslurm is installed but cannot load Slurm's library: {exc}",
            hint="pyslurm runs only with the libslurm of the release it was built for: "
            "put that release's lib/ on the loader's path, or rebuild pyslurm for the "
            f"cluster's Slurm ({INSTALL_HINT})",
        ) from exc
    return pyslurm


def pyslurm_release(pyslurm: ModuleType) -> str:
    """The Slurm major.minor pyslurm was built for (its version is ``25.11.2``: 25.11)."""
    return ".".join(str(pyslurm.__version__).split(".")[:2])


class PyslurmBackend(
    Backend, ReadsQueue, ControlsJobs, ReadsAccounting, EstimatesStart, ArbiterView
):
    """Slurm through libslurm in this process (pyslurm), on the login node.

    Raises:
        BackendUnavailable: pyslurm missing or built for another Slurm than the cluster's,
            slurmctld unreachable, or Slurm reached over SSH.
    """

    name = "pyslurm"
    asked_for_submissions = "slurmctld's job list and the accounting database"

    def __init__(self, runner: Runner, site: SiteConfig) -> None:
        super().__init__(runner, site)
        if not runner.is_local:
            raise BackendUnavailable(
                f"the pyslurm backend calls Slurm's library in this process; Slurm is "
                f"reached over SSH here ({runner.where})",
                hint="use the cli backend over SSH (--backend cli), or run hpclaunch on "
                "the login node",
            )
        self.pyslurm = load_pyslurm()
        #: Steps pyslurm cannot do go through Slurm's commands (see the module docstring).
        self.cli = CliBackend(runner, site)
        self.cluster_release = self._check_release()
        #: How the submission waits between retries (tests pass their own).
        self.sleep: Callable[[float], None] = time.sleep

    def _check_release(self) -> str:
        built = pyslurm_release(self.pyslurm)
        try:
            version = str(self.pyslurm.slurmctld.Config.load().version)
        except self.pyslurm.RPCError as exc:
            if CONTROLLER_UNREACHABLE in str(exc):
                raise ControllerUnreachable(
                    f"slurmctld did not answer pyslurm: nothing was done ({exc})"
                ) from exc
            # A slurmctld of another release may not understand this libslurm at all (a
            # 25.11 client and a 22.05 controller: "Zero Bytes were transmitted or
            # received", seen): the cluster's own commands say which release it is.
            version = self._commands_version()
            if version.startswith(f"{built}.") or version == "unknown":
                raise BackendUnavailable(
                    f"pyslurm could not read slurmctld's config: {exc}",
                    hint="is slurmctld running and reachable? (scontrol ping)",
                ) from exc
        running = ".".join(version.split(".")[:2])
        if running != built:
            raise BackendUnavailable(
                f"pyslurm is built for Slurm {built}, but the cluster runs Slurm {version}",
                hint=INSTALL_HINT.replace("<major.minor>", running),
            )
        return version

    def _commands_version(self) -> str:
        """The release of the Slurm commands (``scontrol --version``), or ``unknown``."""

        try:
            result = self.runner.run(["scontrol", "--version"], timeout=30)
        except HpclaunchError:
            return "unknown"
        return version_said(result.stdout) if result.ok else "unknown"

    def describe(self) -> str:
        return f"pyslurm {self.pyslurm.__version__}, slurmctld {self.cluster_release}"

    def capabilities(self, *, now: Callable[[], float] | None = None) -> Capabilities:
        """Config, partitions, nodes and the user's associations through pyslurm (three
        RPCs, one slurmdbd query), the QOS through sacctmgr (:mod:`.pyslurm_discover`)."""

        return self._rpc(
            lambda: discover_with_pyslurm(
                self.pyslurm, self.runner, self._commands_version(), now=now or time.time
            ),
            "read the cluster's configuration",
        )

    def dryrun(self, plan: SubmissionPlan) -> RenderedJob:
        """Render ``plan``, and refuse it now if this backend could not submit it."""
        job = super().dryrun(plan)
        describe_job(*merged_options(plan.sbatch_options, job.sbatch_argv, plan.script_path))
        return job

    # -- submit -------------------------------------------------------------------------

    def submit(self, job: RenderedJob, *, script_written: bool = False) -> JobRef:
        """Write the script into the private job directory (unless ``script_written``), then
        submit it with every option it and the sbatch argv set (:mod:`.jobdesc`).

        When the reply is lost the job may exist anyway: it is looked up by its submission
        id and returned instead of being submitted a second time.
        """
        options, args = merged_options(
            job.plan.sbatch_options, job.sbatch_argv, job.plan.script_path
        )
        described = describe_job(options, args)
        if not script_written:
            self.runner.put_file(job.script_path, job.script, 0o700)
        return self._submit_described(
            described, job.script_path, job.plan.submission_id, job.plan.job_name
        )

    def submit_script(
        self, script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
    ) -> JobRef:
        """Submit a script already written, with its ``#SBATCH`` options read back from
        it and ``sbatch_argv``'s over them (as sbatch would)."""
        written = script_options(self.runner.read_file(script_path))
        options, args = merged_options(written, sbatch_argv, script_path)
        return self._submit_described(describe_job(options, args), script_path, submission_id, name)

    def _submit_described(
        self, described: JobDescription, script_path: str, submission_id: str, name: str
    ) -> JobRef:
        attributes = dict(described.attributes)
        # What sbatch puts in the job's environment besides the caller's own (sbatch.c,
        # _set_submit_dir_env, _set_umask_env; common/env.c set_prio_process_env; and from
        # its options, jobdesc.sbatch_environment): the sidecar and users' scripts read them.
        umask = os.umask(0)
        os.umask(umask)
        attributes["environment"] = {
            **os.environ,
            **described.environment,
            "SLURM_PRIO_PROCESS": str(os.getpriority(os.PRIO_PROCESS, 0)),
            "SLURM_SUBMIT_DIR": os.getcwd(),
            "SLURM_SUBMIT_HOST": socket.gethostname(),
            "SLURM_UMASK": f"{umask:04o}",
        }
        # pyslurm 25.11.2 sends "no --profile" as NO_VAL, every profile bit set (the job
        # got SLURM_PROFILE=Energy,Lustre,Network,Task: where acct_gather_profile is set
        # up, every series written for every job). An empty iterable that is true gives
        # 0, ACCT_GATHER_PROFILE_NOT_SET, what sbatch sends (core/job/util.pyx,
        # acctg_profile_list_to_int: "if not types: return NO_VAL", then ORs each type).
        attributes.setdefault("profile_types", _NO_PROFILE)
        sid = submission_id
        try:
            description = self.pyslurm.JobSubmitDescription(
                script=script_path,
                # argv[0] is the script's path, as sbatch gives it: slurmctld keeps it as the
                # job's Command (squeue %o), where the arbiter finds the job directory.
                # pyslurm sets argv only when there are arguments (core/job/submission.pyx).
                script_args=[script_path, *described.script_args],
                **attributes,
            )
            job_id = self._submit_retrying(description)
        except self.pyslurm.RPCError as exc:
            message = str(exc)
            if any(text in message for text in LOST_REPLY):
                return self.recover_submission(
                    sid, f"the submission lost its reply: {message}", exc
                )
            raise SubmissionError(
                f"Slurm refused job {name!r}: {message}",
                hint=sbatch_hint(message),
            ) from exc
        except ValueError as exc:  # pyslurm's own checks of the description
            raise SubmissionError(
                f"pyslurm refused job {name!r}: {exc}",
                hint="'hpclaunch render SPEC' shows the options; the cli backend "
                "(--backend cli) submits them with sbatch",
            ) from exc
        return JobRef(str(job_id))

    def _submit_retrying(self, description: Any) -> int:
        """``description.submit()``, asked again as sbatch does when Slurm is busy."""
        for retry in range(1, _MAX_RETRIES + 1):
            try:
                return int(description.submit())
            except self.pyslurm.RPCError as exc:
                if exc.errno not in _RETRY_ERRNOS:
                    raise
            self.sleep(retry)
        return int(description.submit())

    def find_submission(self, submission_id: str) -> JobRef | None:
        """The job tagged ``--comment=hpclaunch:<submission_id>``: in slurmctld's job list,
        then in the accounting database (its comment, stored with
        ``AccountingStoreFlags=job_comment``; else its output file, which lies in the
        submission's own job directory, ``<job_root>/<submission_id>/slurm-%j.out``).
        """
        tag = f"hpclaunch:{submission_id}"
        uid = os.getuid()
        for job in self._live_jobs():
            if job.comment == tag and job.user_id == uid:
                return JobRef(_live_id(job))
        pyslurm = self.pyslurm
        try:
            wanted = pyslurm.db.JobFilter(users=[_user_name()], start_time=SUBMISSION_LOOKBACK)
            records = pyslurm.db.Jobs.load(wanted)
        except pyslurm.RPCError:
            return None  # no accounting on this site: the job list was all we could ask
        directory = f"/{submission_id}/slurm-"
        for record in records.values():
            out = record.standard_output or ""
            if record.comment == tag or directory in out:
                return JobRef(_db_id(record)[0])
        return None

    # -- status ---------------------------------------------------------------------------

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """One job-list RPC for all jobs; one accounting query for those slurmctld did not
        know or saw finished (for their exit codes), merged as the cli backend merges
        squeue's and sacct's answers."""
        return merge_status(refs, self._live_infos, self._accounted_infos)

    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        """:meth:`status` of every task: one job-list RPC and, for the tasks slurmctld no
        longer knows, one accounting query."""
        try:
            found = self.status([JobRef(task) for task in wanted])
        except HpclaunchError as exc:
            problems.append(f"pyslurm: {exc.message.splitlines()[0]}")
            return {}
        held = held_problem(
            {
                ref.job_id: info.reason or ""
                for ref, info in found.items()
                if is_held(info.state.value, info.reason or "")
            }
        )
        if held:
            problems.append(held)
        return {
            ref.job_id: info.state.value
            for ref, info in found.items()
            if info.state is not JobState.UNKNOWN
        }

    def _live_infos(self, by_id: Mapping[str, JobRef]) -> dict[JobRef, JobInfo]:
        infos: dict[JobRef, JobInfo] = {}
        gres = self.site.gres_name
        for job in self._live_jobs():
            fields: dict[str, Any] | None = None  # one record may stand for many tasks
            for job_id, waiting in _live_ids(job):
                ref = wanted_ref(job_id, by_id)
                if ref is not None:
                    fields = fields or _live_fields(job, gres, waiting)
                    infos[ref] = JobInfo(ref=ref, **fields)
        return infos

    def _accounted_infos(
        self, by_id: Mapping[str, JobRef]
    ) -> tuple[dict[JobRef, JobInfo], str | None]:
        pyslurm = self.pyslurm
        ids = sorted({int(job_id.partition("_")[0]) for job_id in by_id})
        try:
            records = pyslurm.db.Jobs.load(pyslurm.db.JobFilter(ids=ids))
        except pyslurm.RPCError as exc:
            return {}, f"{ACCOUNTING_UNAVAILABLE}: {exc}"
        infos: dict[JobRef, JobInfo] = {}
        gres = self.site.gres_name
        for record in records.values():
            for job_id in _db_id(record):
                ref = wanted_ref(job_id, by_id)
                if ref is not None:
                    infos[ref] = _db_info(ref, record, gres)
        return infos, None

    def estimate_start(self, job: RenderedJob) -> StartEstimate | None:
        """``sbatch --test-only`` (the cli backend): pyslurm 25.11.2 wraps no will-run call
        (``slurm_job_will_run2`` appears in none of its ``.pyx`` files)."""
        return self.cli.estimate_start(job)

    def attempts(self, ref: JobRef) -> list[Attempt]:
        """Every run of ``ref``, from ``sacct --duplicates`` (the cli backend): pyslurm's
        ``db.JobFilter`` has no duplicates flag, so slurmdbd would return only the last run
        of a requeued job (pyslurm 25.11.2, ``db/job.pyx``)."""
        return self.cli.attempts(ref)

    def usage(self, since: datetime, until: datetime, user: str | None) -> list[AttemptUsage]:
        """Every attempt from ``sacct -X -D`` (the cli backend): ``hpclaunch cost`` counts
        each run of a requeued job, and pyslurm's ``db.JobFilter`` has no duplicates flag
        (see :meth:`attempts`)."""
        return self.cli.usage(since, until, user)

    def find_jobs(self, name: str) -> list[JobInfo]:
        """Your unfinished jobs named exactly ``name``."""
        uid = os.getuid()
        found = []
        for job in self._live_jobs():
            if job.user_id != uid or job.name != name:
                continue
            state = parse_state(job.state)
            if not state.is_finished:
                ref = JobRef(_live_id(job))
                found.append(JobInfo(ref, state, name=name, source="squeue"))
        return found

    def update_job(self, job_id: str, changes: Mapping[str, str]) -> None:
        """One update RPC with the changes. Through ``scontrol update`` (the cli backend)
        instead: an array or one of its tasks (pyslurm updates by a job's own numeric id, so
        the tasks of an array already split off its record would keep their tier), and
        ``Nice=0`` (pyslurm 25.11 reads a nice of 0 as not given: core/job/submission.pyx),
        and ``NumNodes`` (its update description sets no node count: min/max nodes are
        filled in only ``if not self.is_update``, same file)."""
        by_cli = "_" in job_id or changes.get("Nice") == "0" or "NumNodes" in changes
        if by_cli or self._is_array(job_id):
            self.cli.update_job(job_id, changes)
            return
        attributes: dict[str, object] = {}
        for key, value in changes.items():
            if key == "QOS":
                attributes["qos"] = value
            elif key == "Account":
                attributes["account"] = value
            elif key == "Nice":
                attributes["nice"] = int(value)
            elif key == "Requeue":
                attributes["is_requeueable"] = value == "1"
            else:
                raise ValueError(f"update_job: unknown field {key!r}")
        try:
            self.pyslurm.Job(int(job_id)).modify(self.pyslurm.JobSubmitDescription(**attributes))
        except self.pyslurm.RPCError as exc:
            raise UpdateRefused(str(exc)) from exc

    def _is_array(self, job_id: str) -> bool:
        return any(str(job.array_id) == job_id for job in self._live_jobs() if job.array_id)

    def requeue(self, job_id: str) -> None:
        """One requeue RPC (``slurm_requeue``)."""
        self._act(job_id, "requeue", lambda job: job.requeue())

    def hold(self, job_id: str) -> None:
        """``scontrol uhold`` (the cli backend): a hold its user may release (reason
        ``JobHeldUser``). pyslurm 25.11.2's ``Job.hold(mode="user")`` crashes the process
        (SIGSEGV, seen on 25.11.7), and its default, an admin hold (``JobHeldAdmin``), is
        one only an operator may release."""
        self.cli.scontrol("uhold", job_id)

    def release(self, job_id: str) -> None:
        """One update RPC releasing the job."""
        self._act(job_id, "release", lambda job: job.release())

    def signal(self, job_id: str, signal: str) -> None:
        """One signal RPC to the batch step (``slurm_signal_job``)."""
        if "_" in job_id:
            self.cli.signal(job_id, signal)
            return
        name = signal if signal.isdigit() or signal.startswith("SIG") else f"SIG{signal}"
        try:
            self.pyslurm.Job(int(job_id)).send_signal(
                int(name) if name.isdigit() else name, steps="batch"
            )
        except self.pyslurm.RPCError as exc:
            raise UpdateRefused(str(exc)) from exc

    def _act(self, job_id: str, verb: str, call: Callable[[Any], object]) -> None:
        """``call`` on ``job_id``'s job; an array task (``123_4``), which has no job id of
        its own to give pyslurm until it starts, through ``scontrol VERB`` (the cli
        backend)."""
        if "_" in job_id:
            self.cli.scontrol(verb, job_id)
            return
        try:
            call(self.pyslurm.Job(int(job_id)))
        except self.pyslurm.RPCError as exc:
            raise UpdateRefused(str(exc)) from exc

    # -- the queue ------------------------------------------------------------------------

    def queue(self, query: QueueQuery = WHOLE_QUEUE) -> list[QueueRow]:
        """The rows squeue would print (:func:`hpclaunch.slurm.queue.queue_argv`), from one
        job-list RPC, filtered here as squeue filters them."""

        wanted = frozenset(query.states.split(","))
        uid = os.getuid()
        rows = []
        for job in self._live_jobs():
            if query.me and job.user_id != uid:
                continue
            if query.partition is not None and query.partition not in (job.partition or "").split(
                ","
            ):
                continue
            if query.account is not None and job.account != query.account:
                continue
            if str(job.state) in wanted:
                rows.append(_queue_row(job))
        return rows

    def queue_job(self, job_id: str) -> list[QueueRow]:
        """The rows of ``squeue --jobs=ID --states=all`` from one job-list RPC: ``123`` is
        the job or every task of array 123; ``123_4`` that task, started or not."""
        base, _, task = job_id.partition("_")
        rows = []
        for job in self._live_jobs():
            if base not in (str(job.id), str(job.array_id or "")):
                continue
            if not task:
                rows.append(_queue_row(job))
            elif job.array_id and job.array_tasks_waiting:
                if int(task) in task_ids(job.array_tasks_waiting):
                    rows.append(_queue_row(job, job_id=job_id))
            elif job.array_id and str(_task_id(job)) == task:
                rows.append(_queue_row(job))
        return rows

    # -- the arbiter's snapshot -----------------------------------------------------------

    def cluster_jobs(self) -> list[ClusterJob]:
        """The jobs of :func:`hpclaunch.slurm.cluster.jobs_argv`, from one job-list
        RPC."""

        jobs = []
        for job in self._live_jobs():
            state = str(job.state)
            if state not in JOB_STATES:
                continue
            row = _queue_row(job)
            running = state != "PENDING"
            jobs.append(
                ClusterJob(
                    job_id=row.job_id,
                    unique_id=str(job.id),
                    user=row.user,
                    account=row.account,
                    qos=row.qos,
                    state=state,
                    reason=row.reason,
                    priority=row.priority or 0,
                    nodes=row.nodes,
                    gpus=row.gpus,
                    hosts=expand_hosts(job.allocated_nodes)
                    if running and job.allocated_nodes
                    else (),
                    start=float(job.start_time) if running and job.start_time else None,
                    partition=row.partition,
                    command=job.command or None,
                )
            )
        return jobs

    def node_gpus(self) -> list[NodeGpus]:
        """Every node's GPUs from one node-list RPC (``slurm_load_node``)."""

        gres = self.site.gres_name
        nodes = self._rpc(self.pyslurm.Nodes.load, "load the node list")
        out = []
        for node in nodes.values():
            configured = ",".join(f"{k}:{v}" for k, v in (node.configured_gres or {}).items())
            allocated = ",".join(f"{k}={v}" for k, v in (node.allocated_tres or {}).items())
            out.append(
                NodeGpus(
                    name=node.name,
                    total=gres_count(configured, gres),
                    used=tres_value(allocated, f"gres/{gres}") or 0,
                    partitions=frozenset(node.partitions or ()),
                    usable=usable(str(node.state)),
                )
            )
        return out

    def restart_counts(self) -> dict[str, int]:
        """Each running job's ``requeue_count`` (squeue's RestartCnt), from one RPC."""

        return {
            _live_id(job): int(job.requeue_count or 0)
            for job in self._live_jobs()
            if str(job.state) in RUNNING_STATES
        }

    # -- cancel ---------------------------------------------------------------------------

    def cancel(self, ref: JobRef) -> None:
        """Cancel ``ref`` (a whole array by its own id); a job already ended or forgotten is
        not an error. A task of an array (``123_4``) is cancelled with ``scancel`` (the cli
        backend): a pending task has no job id of its own to give pyslurm yet."""
        if "_" in ref.job_id:
            self.cli.cancel(ref)
            return
        try:
            self.pyslurm.Job(int(ref.job_id)).cancel()
        except self.pyslurm.RPCError as exc:
            if any(text in str(exc) for text in GONE):
                return
            raise BackendError(f"cancelling job {ref.job_id} failed: {exc}") from exc

    # -- calling libslurm -----------------------------------------------------------------

    def _live_jobs(self) -> Iterable[Any]:
        jobs = self._rpc(self.pyslurm.Jobs.load, "load the job list")
        return list(jobs.values())

    def _rpc(self, call: Callable[[], _T], what: str) -> _T:
        try:
            return call()
        except self.pyslurm.RPCError as exc:
            raise BackendUnavailable(
                f"pyslurm could not {what}: {exc}",
                hint="is slurmctld running and reachable? (scontrol ping)",
            ) from exc


def _user_name() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def _live_id(job: Any) -> str:
    """The id as squeue prints it: ``123``, or ``123_4`` for a task of an array."""
    if not job.array_id:
        return str(job.id)
    return f"{job.array_id}_{_task_id(job)}"


def _task_id(job: Any) -> int:
    """The task id of an array task's record. pyslurm 25.11 reads a task id of 0 as "not
    set" (``u32_parse``: zero is no value), as it reads the not-a-task value of the record
    that holds an array's tasks not yet started; a record with no waiting tasks is a task."""
    return 0 if job.array_task_id is None else int(job.array_task_id)


def _live_ids(job: Any) -> list[tuple[str, bool]]:
    """(id, is a not yet started array task) of every job ``job`` stands for: the tasks of
    an array that have not started are one record (``array_tasks_waiting`` ``3-7``), which
    squeue --array prints one line per task."""
    waiting = job.array_tasks_waiting
    if not job.array_id or not waiting:
        return [(_live_id(job), False)]
    return [(f"{job.array_id}_{task}", True) for task in task_ids(waiting)]


def _live_fields(job: Any, gres: str, waiting: bool) -> dict[str, Any]:
    """A :class:`JobInfo`'s fields but its ref, from a job-list record. The record of an
    array's tasks not yet started stands for each of them (a cancelled array's too: squeue
    --array prints its state on every task's line)."""
    state = parse_state(job.state)
    finished = state.is_finished
    return {
        "state": state,
        "name": job.name or None,
        "reason": _reason(job.state_reason),
        "nodes": None if waiting else field(job.allocated_nodes or ""),
        "exit_code": job.exit_code if finished else None,
        "exit_signal": (job.exit_code_signal or None) if finished else None,
        "elapsed": format_elapsed(0 if waiting else job.run_time),
        "source": "squeue",
        "qos": job.qos,
        "node_count": job.num_nodes,
        "gpus": _gpus(job.allocated_tres or job.requested_tres, gres),
        "restarts": job.requeue_count,
        # squeue's StartTime of a pending job: when Slurm expects it to start (0: no plan).
        "expected_start": (
            datetime.fromtimestamp(job.start_time).isoformat()
            if state is JobState.PENDING and job.start_time
            else None
        ),
    }


def _queue_row(job: Any, *, job_id: str | None = None) -> QueueRow:
    """squeue's line for a job-list record (:data:`hpclaunch.slurm.queue.QUEUE_FORMAT`): an
    array's tasks not yet started are one row, ``123_[4-9%2]``, as squeue folds them."""

    if job_id is None:
        job_id = _live_id(job)
        waiting = job.array_tasks_waiting
        if job.array_id and waiting:
            limit = f"%{job.array_tasks_parallel}" if job.array_tasks_parallel else ""
            job_id = f"{job.array_id}_[{waiting}{limit}]"
    submit = job.submit_time
    pending = str(job.state) == "PENDING"
    return QueueRow(
        job_id=job_id,
        user=job.user_name or str(job.user_id),
        account=job.account or None,
        qos=job.qos or None,
        state=str(job.state),
        reason=_reason(job.state_reason),
        priority=job.priority,
        # squeue %V: the cluster's local time, ISO 8601 without a zone.
        submit=None if not submit else datetime.fromtimestamp(submit).isoformat(),
        nodes=job.num_nodes or 1,
        gpus=_job_gpus(job),
        nice=job.nice or 0,
        partition=job.partition or None,
        elapsed=format_elapsed(0 if pending else job.run_time or 0),
        name=job.name or "",
        # squeue's StartTime: for a pending job the scheduler's estimate (0: none yet).
        start=datetime.fromtimestamp(job.start_time).isoformat() if job.start_time else None,
    )


def _job_gpus(job: Any, gres: str = "gpu") -> int:
    """The GPUs a job holds (running) or asks for (pending), as squeue's ``tres-alloc``
    gives them (:func:`hpclaunch.slurm.tres.job_gpus`): the allocated TRES, else the
    requested ones, which count ``--gpus`` and ``--gpus-per-task`` too (recorded on 25.11).
    Where the site does not track ``gres/gpu``, the per-node request times the nodes."""
    counted = _gpus(job.allocated_tres or job.requested_tres, gres)
    if counted:
        return counted
    return _gpus_per_node(job.gres_per_node) * (job.num_nodes or 1)


def _gpus_per_node(gres_per_node: Mapping[str, int] | None) -> int:
    """GPUs per node from pyslurm's ``gres_per_node`` (``{"gres/gpu": 4}``; with a type,
    ``{"gres/gpu:a100": 2}``): put back into squeue's %b text (``gres/gpu:4``, seen on
    25.11) and read by the same rule as squeue's."""

    asked = (gres_per_node or {}).items()
    return gpus_per_node(",".join(f"{name}:{count}" for name, count in asked))


def _db_id(record: Any) -> list[str]:
    """The ids an accounting record answers for, as sacct prints them (one per task of the
    tasks of an array that never started, which slurmdbd keeps as one record)."""
    if not record.array_id:
        return [str(record.id)]
    waiting = record.array_tasks_waiting
    if waiting:
        return [f"{record.array_id}_{task}" for task in task_ids(waiting)]
    return [f"{record.array_id}_{_task_id(record)}"]


def _db_info(ref: JobRef, record: Any, gres: str) -> JobInfo:
    state = parse_state(record.state)
    finished = state.is_finished
    info = JobInfo(
        ref=ref,
        state=state,
        name=record.name or None,
        reason=_reason(record.state_reason),
        nodes=field(record.nodelist or ""),
        exit_code=record.exit_code if finished else None,
        exit_signal=(record.exit_code_signal or None) if finished else None,
        elapsed=format_elapsed(record.elapsed_time),
        source="sacct",
        qos=record.qos,
        node_count=record.num_nodes,
        gpus=_gpus(record.allocated_tres or record.requested_tres, gres),
        restarts=record.requeue_count,
    )
    # The allocation says 0:0 for a job Slurm cancelled or timed out; its batch step holds
    # the signal: the same rule as for sacct's lines.
    batch = record.steps.get("batch") if record.steps else None
    batch_exit = None if batch is None else (batch.exit_code, batch.exit_code_signal or None)
    return ended_by(info, batch_exit)


def _reason(text: str | None) -> str | None:
    return field(text or "")


def _gpus(tres: Any, gres: str) -> int | None:
    """GPUs in a pyslurm TrackableResources (``.gres``: name → resource with ``count``)."""
    if tres is None:
        return None
    found = tres.gres.get(gres) if tres.gres else None
    return int(found.count) if found is not None else 0
