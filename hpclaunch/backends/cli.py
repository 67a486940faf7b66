"""The command-line backend: sbatch, squeue, sacct and scancel through a Runner.

Written against Slurm 22.05 (Debian 12) and kept defensive: unknown lines are skipped, and
the job name, the one free-text field, is always the last column so that it may contain the
delimiter. Parsing of the commands' answers lives in :mod:`hpclaunch.backends.slurm_text`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hpclaunch import jobdir
from hpclaunch.backends.abilities import (
    ArbiterView,
    ControlsJobs,
    EstimatesStart,
    ReadsAccounting,
    ReadsQueue,
)
from hpclaunch.backends.arrays import held_problem
from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.backends.merge import merge_status
from hpclaunch.backends.slurm_text import (
    ATTEMPT_FIELDS,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    first_line,
    parse_attempts,
    parse_held_tasks,
    parse_sacct,
    parse_squeue,
    parse_task_states,
)
from hpclaunch.errors import (
    ACCOUNTING_UNAVAILABLE,
    CONTROLLER_UNREACHABLE,
    BackendError,
    BackendUnavailable,
    CommandTimeout,
    ConnectionDropped,
    ControllerUnreachable,
    ProgramNotFound,
    SubmissionError,
    TransportError,
    UpdateRefused,
    describe_result,
)
from hpclaunch.slurm.cluster import (
    jobs_argv,
    nodes_argv,
    parse_jobs,
    parse_nodes,
    parse_restarts,
    restarts_argv,
)
from hpclaunch.slurm.estimate import parse_test_only, will_run_argv
from hpclaunch.slurm.jobs import Attempt, JobInfo, parse_state
from hpclaunch.slurm.queue import WHOLE_QUEUE, QueueQuery, job_argv, parse_queue, queue_argv
from hpclaunch.slurm.usage import cost_argv, parse_usage
from hpclaunch.transport.base import CommandResult

if TYPE_CHECKING:
    from datetime import datetime

    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.cluster import ClusterJob, NodeGpus
    from hpclaunch.slurm.estimate import StartEstimate
    from hpclaunch.slurm.queue import QueueRow
    from hpclaunch.slurm.usage import AttemptUsage

__all__ = [
    "GONE",
    "LOST_REPLY",
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "CliBackend",
    "parse_sbatch_parsable",
    "sbatch_hint",
]

#: Seconds to wait for one Slurm command.
COMMAND_TIMEOUT = 60.0
#: How far back sacct is searched for a submission id after a lost sbatch reply.
SUBMISSION_LOOKBACK = "now-7days"

# squeue exits 1 with this when none of the --jobs ids is known (any left MinJobAge ago).
_SQUEUE_UNKNOWN_IDS = "Invalid job id specified"
# Cancelling a job that already ended or is forgotten: not an error for an idempotent cancel
# (scancel prints these; libslurm's error strings, so pyslurm's too).
# 22.05 exits 0 silently in both cases (checked on the test cluster); other versions print
# these errors and exit 1.
GONE = ("already completing or completed", "Invalid job id specified")
# Submissions that failed after which the job may exist even though no job id came back:
# the request reached slurmctld but the reply was lost (slurm_errno strings, 22.05; sbatch
# prints them, pyslurm raises them).
LOST_REPLY = (
    "Socket timed out on send/recv operation",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "Connection reset by peer",
)
_PARSABLE = re.compile(r"^(\d+(?:_\d+)?)(?:;(\S+))?$")

_SBATCH_HINTS = (
    (
        "Invalid account",
        "check the spec's project: the account must exist and you must be "
        "in it (sacctmgr show assoc user=$USER format=account)",
    ),
    (
        "Invalid qos",
        "the tier's QOS is not allowed for you: check the site config's tiers "
        "(sacctmgr show assoc user=$USER format=qos)",
    ),
    ("Invalid partition", "the partition does not exist: check the site config (sinfo -s)"),
    (
        "Requested node configuration is not available",
        "no node has what the job asks for: lower resources, or fix the site config",
    ),
    ("QOSMax", "the request exceeds a QOS limit: ask for less or use another tier"),
    (
        "Invalid generic resource",
        "the GPU request does not match the cluster's GRES: "
        "check gres_style, gres_name and gpu types in the site config",
    ),
)


class CliBackend(Backend, ReadsQueue, ControlsJobs, ReadsAccounting, EstimatesStart, ArbiterView):
    """Slurm through its command-line tools (sbatch, squeue, sacct, scancel)."""

    name = "cli"
    asked_for_submissions = "squeue and sacct"

    def describe(self) -> str:
        return f"Slurm's commands on {self.runner.where}"

    # -- submit -------------------------------------------------------------------------

    def submit(self, job: RenderedJob, *, script_written: bool = False) -> JobRef:
        """Write the script into the private job directory (unless ``script_written``), then
        ``sbatch --parsable`` it.

        When sbatch times out, or fails in a way that means its reply was lost, the job may
        exist anyway: it is looked up by its submission id (the ``--comment`` tag) and
        returned instead of being submitted a second time.
        """
        if not script_written:
            try:
                self.runner.put_file(job.script_path, job.script, 0o700)
            except TransportError as exc:  # e.g. the SSH link dropped: sbatch not run yet
                raise TransportError(
                    "the job script was not written, so nothing was submitted: "
                    + exc.message.splitlines()[0],
                    hint="run the same command again",
                ) from exc
        return self.submit_script(
            job.script_path, job.sbatch_argv, job.plan.submission_id, job.plan.job_name
        )

    def submit_script(
        self, script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
    ) -> JobRef:
        """``sbatch --parsable`` a script already written (see :meth:`submit` for a lost
        reply)."""
        try:
            result = self._run(list(sbatch_argv))
        except CommandTimeout as exc:
            return self.recover_submission(
                submission_id, f"sbatch did not answer within {COMMAND_TIMEOUT:g} s", exc
            )
        except ConnectionDropped as exc:  # over SSH: sbatch may have run; the runner reconnects
            return self.recover_submission(
                submission_id, "the connection dropped while sbatch ran", exc
            )
        if not result.ok:
            if any(text in result.stderr for text in LOST_REPLY):
                lost = f"sbatch lost its reply: {first_line(result)}"
                return self.recover_submission(
                    submission_id, lost, SubmissionError(lost, result=result)
                )
            raise SubmissionError(
                f"sbatch refused job {name!r}",
                result=result,
                hint=sbatch_hint(result.stderr),
            )
        try:
            return parse_sbatch_parsable(result.stdout)
        except ValueError as exc:
            raise SubmissionError(
                f"cannot read a job id in sbatch's answer: {exc}", result=result
            ) from exc

    def find_submission(self, submission_id: str) -> JobRef | None:
        """The job tagged ``--comment=hpclaunch:<submission_id>``, from squeue, then sacct.

        sacct stores the comment only with ``AccountingStoreFlags=job_comment`` (22.05, off
        by default), so sacct's ``SubmitLine`` (stored since 21.08) is matched too: it holds
        the script path, ``<job_root>/<submission_id>/job.sbatch``. A site without sacct can
        only find jobs still in squeue (MinJobAge, 300 s by default).
        """

        tag = f"hpclaunch:{submission_id}"
        argv = ["squeue", "--me", "--noheader", "--states=all", "--format=%i|%k"]
        result = self._run(argv)
        if not result.ok:
            raise BackendUnavailable(f"squeue failed\n{describe_result(result)}")
        for line in result.stdout.splitlines():
            job_id, _, comment = line.partition("|")
            if comment.strip() == tag:
                return JobRef(job_id.strip())
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--starttime={SUBMISSION_LOOKBACK}",
            "--format=JobID,Comment,SubmitLine",
        ]
        try:
            result = self.runner.run(argv, timeout=COMMAND_TIMEOUT)
        except TransportError:
            return None  # no accounting on this site: squeue was all we could ask
        script = f"/{submission_id}/{jobdir.SCRIPT}"
        for line in result.stdout.splitlines() if result.ok else []:
            job_id, _, rest = line.partition("|")
            comment, _, submit_line = rest.partition("|")
            if comment == tag or script in submit_line:
                return JobRef(job_id)
        return None

    # -- status ---------------------------------------------------------------------------

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """One squeue call for all jobs; one sacct call for those squeue did not know or
        saw finished (for their exit codes). Unknown to both: ``JobState.UNKNOWN``.

        An array's own id (``123``, answered with task lines ``123_N``) gets one info that
        sums up its tasks (:func:`~hpclaunch.backends.arrays.summarise_array`). Arrays are
        always in the sacct call: squeue cannot tell which of their tasks it forgot after
        MinJobAge, so each task is squeue's view when it has one, else sacct's.

        Cluster names in refs are not used: hpclaunch submits without ``--clusters``.
        """
        return merge_status(refs, self._squeue, self._sacct)

    def _squeue(self, by_id: Mapping[str, JobRef]) -> dict[JobRef, JobInfo]:
        argv = [
            "squeue",
            "--noheader",
            # Without --array squeue folds pending array tasks into one "123_[3,7]" line,
            # and a task asked for by its "123_7" id would look unknown (22.05).
            "--array",
            f"--jobs={','.join(by_id)}",
            "--states=all",
            f"--Format={SQUEUE_FORMAT}",
        ]
        result = self._run(argv)
        if not result.ok:
            if _SQUEUE_UNKNOWN_IDS in result.stderr:
                return {}
            raise BackendUnavailable(
                f"squeue failed\n{describe_result(result)}",
                hint="is slurmctld running and reachable? (scontrol ping)",
            )
        return parse_squeue(result.stdout, by_id, self.site.gres_name)

    def _sacct(self, by_id: Mapping[str, JobRef]) -> tuple[dict[JobRef, JobInfo], str | None]:
        """Ask sacct; returns (infos, problem). Sites without accounting are not an error:
        the jobs then stay UNKNOWN with ``problem`` as the reason."""
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            # No --allocations: the batch step's ExitCode holds the signal of a job Slurm
            # cancelled or timed out (the allocation's is 0:0); other steps are skipped.
            "--duplicates",  # one record per attempt: their count gives the restarts
            f"--jobs={','.join(by_id)}",
            f"--format={','.join(SACCT_FIELDS)}",
        ]
        try:
            result = self.runner.run(argv, timeout=COMMAND_TIMEOUT)
        except TransportError as exc:
            return {}, f"{ACCOUNTING_UNAVAILABLE}: {exc.message.splitlines()[0]}"
        if not result.ok:
            # slurmdbd down: "...: Connection refused" lines, the last the plainest
            # ("sacct: error: Problem talking to the database: Connection refused").
            said = [line for line in result.stderr.splitlines() if line.strip()]
            why = said[-1].removeprefix("sacct: error: ") if said else first_line(result)
            return {}, f"{ACCOUNTING_UNAVAILABLE}: sacct: {why}"
        return parse_sacct(result.stdout, by_id, self.site.gres_name), None

    def estimate_start(self, job: RenderedJob) -> StartEstimate | None:
        """``sbatch --test-only`` with the job's script on standard input."""

        result = self._run(will_run_argv(), stdin=job.script)
        if not result.ok:
            raise SubmissionError(
                f"Slurm would refuse job {job.plan.job_name!r}",
                result=result,
                hint=sbatch_hint(result.stderr),
            )
        return parse_test_only(result.stderr + result.stdout)

    def attempts(self, ref: JobRef) -> list[Attempt]:
        """Every run of ``ref``, oldest first: ``sacct --duplicates`` lists requeued runs."""
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            "--duplicates",  # steps too: the batch step's exit (parse_attempts)
            f"--jobs={ref.job_id}",
            f"--format={','.join(ATTEMPT_FIELDS)}",
        ]
        result = self._run(argv)
        if not result.ok:
            raise BackendUnavailable(f"sacct failed\n{describe_result(result)}")
        return parse_attempts(result.stdout, ref.job_id)

    def find_jobs(self, name: str) -> list[JobInfo]:
        """Your unfinished jobs named exactly ``name``, as squeue prints the name.

        squeue's own ``--name`` filter is not used: it splits its argument at commas.
        """
        argv = ["squeue", "--me", "--noheader", "--format=%i|%T|%j"]
        result = self._run(argv)
        if not result.ok:
            raise BackendUnavailable(f"squeue failed\n{describe_result(result)}")
        found = []
        for line in result.stdout.splitlines():
            cols = line.split("|", 2)
            if len(cols) == 3 and cols[2] == name:
                ref = JobRef(cols[0].strip())
                found.append(JobInfo(ref, parse_state(cols[1]), name=name, source="squeue"))
        return found

    def update_job(self, job_id: str, changes: Mapping[str, str]) -> None:
        """One ``scontrol update JobId=ID Key=Value...``."""
        argv = ["scontrol", "update", f"JobId={job_id}"]
        argv += [f"{key}={value}" for key, value in changes.items()]
        result = self._run(argv)
        if not result.ok:
            raise UpdateRefused(first_line(result))

    def usage(self, since: datetime, until: datetime, user: str | None) -> list[AttemptUsage]:
        """One ``sacct -X -D`` (:func:`hpclaunch.slurm.usage.cost_argv`)."""

        argv = cost_argv(since, until, all_users=user is None, user=user)
        result = self._run(argv, timeout=120)  # a month of a busy site's accounting
        if not result.ok:
            raise BackendUnavailable(
                f"sacct failed\n{describe_result(result)}",
                hint="is accounting (slurmdbd) enabled and reachable? (sacct -X -S today)",
            )
        return parse_usage(result.stdout, self.site.gres_name)

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue ID``."""
        self.scontrol("requeue", job_id)

    def hold(self, job_id: str) -> None:
        """``scontrol uhold ID``: a hold the job's user may release (``scontrol hold``, run
        by an operator, would be an admin hold only an operator can release)."""
        self.scontrol("uhold", job_id)

    def release(self, job_id: str) -> None:
        """``scontrol release ID``."""
        self.scontrol("release", job_id)

    def signal(self, job_id: str, signal: str) -> None:
        """``scancel --batch --signal=SIG ID``."""
        result = self._run(["scancel", "--batch", f"--signal={signal}", job_id])
        if not result.ok:
            raise UpdateRefused(first_line(result))

    def scontrol(self, verb: str, job_id: str) -> None:
        """``scontrol VERB ID`` (requeue, uhold, release, ...); a refusal is UpdateRefused."""
        result = self._run(["scontrol", verb, job_id])
        if not result.ok:
            raise UpdateRefused(first_line(result))

    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        """Task id (``123_4``) → state: one ``squeue --array``, and one sacct when squeue
        does not know every task of ``wanted``; what failed is added to ``problems``."""
        ids = ",".join(array_ids)
        squeue = ["squeue", "--noheader", "--array", f"--jobs={ids}", "--states=all"]
        live = self._task_lines([*squeue, "--format=%i|%T|%r"], problems)
        states = parse_task_states(live)
        held = held_problem(parse_held_tasks(live))
        if held:
            problems.append(held)
        if not set(wanted) <= states.keys():
            sacct = ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={ids}"]
            accounted = parse_task_states(
                self._task_lines([*sacct, "--format=JobID,State"], problems)
            )
            states = {**accounted, **states}  # squeue's view of live tasks is the newer one
        return states

    def _task_lines(self, argv: list[str], problems: list[str]) -> str:
        try:
            result = self.runner.run(argv, timeout=60)
        except TransportError as exc:
            problems.append(f"{argv[0]}: {exc.message.splitlines()[0]}")
            return ""
        if not result.ok:
            # squeue exits 1 when none of the ids is known any more (MinJobAge): not a problem.
            if CONTROLLER_UNREACHABLE in result.stderr:
                problems.append(
                    f"slurmctld did not answer {argv[0]} (down or restarting): the states "
                    "shown are accounting's, which may lag behind"
                )
            elif "Invalid job id" not in result.stderr:
                problems.append(
                    f"{argv[0]} failed: {(result.stderr or result.stdout).strip()[:200]}"
                )
            return ""
        return result.stdout

    # -- the queue ------------------------------------------------------------------------

    def queue(self, query: QueueQuery = WHOLE_QUEUE) -> list[QueueRow]:
        """One ``squeue`` (:func:`hpclaunch.slurm.queue.queue_argv`)."""

        return parse_queue(self._squeue_stdout(queue_argv(query)), self.site.gres_name)

    def queue_job(self, job_id: str) -> list[QueueRow]:
        """One ``squeue --jobs=ID --states=all`` (:func:`hpclaunch.slurm.queue.job_argv`)."""

        return parse_queue(self._squeue_stdout(job_argv(job_id)), self.site.gres_name)

    def cluster_jobs(self) -> list[ClusterJob]:
        """One ``squeue`` (:func:`hpclaunch.slurm.cluster.jobs_argv`)."""

        return parse_jobs(self._squeue_stdout(jobs_argv()), self.site.gres_name)

    def node_gpus(self) -> list[NodeGpus]:
        """One ``scontrol show nodes --oneliner``."""

        result = self._run(nodes_argv())
        if not result.ok:
            raise BackendUnavailable(
                f"scontrol show nodes failed\n{describe_result(result)}",
                hint="is slurmctld running and reachable? (scontrol ping)",
            )
        return parse_nodes(result.stdout, self.site.gres_name)

    def restart_counts(self) -> dict[str, int]:
        """One ``squeue -O RestartCnt``
        (:func:`hpclaunch.slurm.cluster.restarts_argv`)."""

        return parse_restarts(self._squeue_stdout(restarts_argv()))

    def _squeue_stdout(self, argv: Sequence[str]) -> str:
        """squeue's answer; its "Invalid job id" (no id known any more) is an empty one."""
        result = self._run(argv)
        if not result.ok and _SQUEUE_UNKNOWN_IDS not in result.stderr:
            raise BackendUnavailable(
                f"squeue failed\n{describe_result(result)}",
                hint="is slurmctld running and reachable? (scontrol ping)",
            )
        return result.stdout if result.ok else ""

    # -- cancel ---------------------------------------------------------------------------

    def cancel(self, ref: JobRef) -> None:
        """``scancel ID``; a job that already ended (or is forgotten) is not an error."""
        result = self._run(["scancel", ref.job_id])
        if result.ok or any(text in result.stderr for text in GONE):
            return
        raise BackendError(f"scancel failed for job {ref.job_id}\n{describe_result(result)}")

    # -- running Slurm's commands ---------------------------------------------------------

    def _run(
        self, argv: Sequence[str], timeout: float = COMMAND_TIMEOUT, stdin: str | None = None
    ) -> CommandResult:
        """Run a Slurm command; a missing one says how to reach a cluster, and one that
        could not reach slurmctld raises :class:`ControllerUnreachable` (nothing changed:
        Slurm says so only when it could not connect at all)."""
        try:
            result = self.runner.run(argv, timeout=timeout, stdin=stdin)
        except ProgramNotFound as exc:
            raise BackendUnavailable(
                f"Slurm's {exc.program!r} command is not found on {self.runner.where}: "
                "hpclaunch runs Slurm's commands (sbatch, squeue, sacct, scancel) where it runs",
                hint="run hpclaunch on the cluster's login node (or put Slurm's bin directory "
                "on PATH), with that cluster's site config (--site NAME|PATH or "
                "$HPCLAUNCH_SITE); or reach the login node over SSH (--remote)",
            ) from exc
        if not result.ok and CONTROLLER_UNREACHABLE in result.stderr:
            raise ControllerUnreachable(
                f"slurmctld did not answer {argv[0]}: nothing was done\n{describe_result(result)}"
            )
        return result


def parse_sbatch_parsable(stdout: str) -> JobRef:
    """Parse ``sbatch --parsable`` output: ``jobid`` or ``jobid;cluster``.

    Raises:
        ValueError: No such line.
    """
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    match = _PARSABLE.match(lines[-1]) if lines else None
    if match is None:
        raise ValueError(f"expected 'jobid[;cluster]', got {stdout.strip()!r}")
    return JobRef(job_id=match.group(1), cluster=match.group(2))


def sbatch_hint(stderr: str) -> str:
    for needle, hint in _SBATCH_HINTS:
        if needle.lower() in stderr.lower():
            return hint
    return "read Slurm's message above; 'hpclaunch render SPEC' shows the script it refused"
