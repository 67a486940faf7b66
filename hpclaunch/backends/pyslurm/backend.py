"""PyslurmBackend: each of the backend's calls as slurmctld RPCs and slurmdbd queries through
pyslurm, or through the cli backend where pyslurm cannot (the package docstring lists where)."""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
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
from hpclaunch.backends.pyslurm.discover import discover_with_pyslurm
from hpclaunch.backends.pyslurm.library import INSTALL_HINT, load_pyslurm, pyslurm_release
from hpclaunch.backends.pyslurm.records import (
    db_id,
    db_info,
    live_fields,
    live_id,
    live_ids,
    queue_row,
    task_id,
    user_name,
)
from hpclaunch.backends.slurm_text import is_held, wanted_ref
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
from hpclaunch.slurm.tres import gres_count, tres_value

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.slurm.estimate import StartEstimate
    from hpclaunch.slurm.usage import AttemptUsage
    from hpclaunch.transport.base import Runner

__all__ = ["PyslurmBackend"]

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


class PyslurmBackend(
    Backend, ReadsQueue, ControlsJobs, ReadsAccounting, EstimatesStart, ArbiterView
):
    """Slurm through libslurm in this process (pyslurm), on the login node.

    Raises:
        BackendUnavailable: pyslurm missing or built for another Slurm than the cluster's,
            slurmctld unreachable, or Slurm reached over SSH.
    """

    name = "pyslurm"
    # JobSubmitDescription (pyslurm 25.11.2) has no field for the EXPEDITED_REQUEUE bit,
    # and scontrol update cannot set it after the submission (job_mgr.c, 25.11.7).
    can_expedite = False
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
        RPCs, one slurmdbd query), the QOS through sacctmgr (:mod:`.discover`)."""

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
        # Never the submitter's REST token (SLURM_JWT), as sbatch 26.05 leaves it out: in
        # the job it would make every Slurm command authenticate by JWT (sbatch.sh.j2).
        umask = os.umask(0)
        os.umask(umask)
        attributes["environment"] = {
            **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
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
                return JobRef(live_id(job))
        pyslurm = self.pyslurm
        try:
            wanted = pyslurm.db.JobFilter(users=[user_name()], start_time=SUBMISSION_LOOKBACK)
            records = pyslurm.db.Jobs.load(wanted)
        except pyslurm.RPCError:
            return None  # no accounting on this site: the job list was all we could ask
        directory = f"/{submission_id}/slurm-"
        for record in records.values():
            out = record.standard_output or ""
            if record.comment == tag or directory in out:
                return JobRef(db_id(record)[0])
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
            for job_id, waiting in live_ids(job):
                ref = wanted_ref(job_id, by_id)
                if ref is not None:
                    fields = fields or live_fields(job, gres, waiting)
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
            for job_id in db_id(record):
                ref = wanted_ref(job_id, by_id)
                if ref is not None:
                    infos[ref] = db_info(ref, record, gres)
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
                ref = JobRef(live_id(job))
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
                rows.append(queue_row(job))
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
                rows.append(queue_row(job))
            elif job.array_id and job.array_tasks_waiting:
                if int(task) in task_ids(job.array_tasks_waiting):
                    rows.append(queue_row(job, job_id=job_id))
            elif job.array_id and str(task_id(job)) == task:
                rows.append(queue_row(job))
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
            row = queue_row(job)
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
            live_id(job): int(job.requeue_count or 0)
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
