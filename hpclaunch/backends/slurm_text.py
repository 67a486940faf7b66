"""Reading what squeue and sacct print (Slurm 22.05), for :mod:`hpclaunch.backends.cli`.

Every parser skips lines it does not understand, and the job name, the one free-text field,
is always the last column so that it may contain the ``|`` delimiter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import replace

from hpclaunch.backends.base import JobRef
from hpclaunch.slurm.jobs import Attempt, JobInfo, JobState, parse_state
from hpclaunch.slurm.queue import long_format
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.slurm.text import field
from hpclaunch.slurm.times import format_elapsed, parse_cpu_time, parse_elapsed, read_time_limit
from hpclaunch.slurm.tres import parse_size, to_int, tres_text, tres_value
from hpclaunch.transport.base import CommandResult

__all__ = [
    "ATTEMPT_FIELDS",
    "SACCT_FIELDS",
    "SQUEUE_FIELDS",
    "SQUEUE_FORMAT",
    "ended_by",
    "is_held",
    "is_waiting_reason",
    "is_work_step",
    "parse_attempts",
    "parse_held_tasks",
    "parse_sacct",
    "parse_squeue",
    "parse_task_states",
    "step_out_of_memory",
    "wanted_ref",
]

#: squeue ``--Format`` fields. ``--format`` (``-o``) has no letter for the restart count, so
#: the long form is used; ``JobArrayID`` prints ``123`` or ``123_4`` like ``%i`` (``JobID``
#: would print an array task's own raw id). ``tres-alloc`` is the allocation of a running
#: job and the request of a pending one.
SQUEUE_FIELDS = (
    "JobArrayID",
    "State",
    "Reason",
    "NodeList",
    "TimeUsed",
    "QOS",
    "NumNodes",
    "tres-alloc",
    "RestartCnt",
    # The job's raw wait status (exit code << 8 | signal), as waitpid(2) gives it: known to
    # squeue the moment a job ends, while sacct may not have the record yet (slurmdbd lag).
    "exit_code",
    # A pending job's expected start (backfill's plan; N/A until it has one).
    "StartTime",
    "Name",
)
SQUEUE_FORMAT = long_format(SQUEUE_FIELDS)
#: sacct fields valid in 22.05 (``sacct --helpformat``); there is no "Restarts" field, so
#: the restarts are counted from ``--duplicates`` records. Name last (free text).
SACCT_FIELDS = (
    "JobID",
    "State",
    "ExitCode",
    "Elapsed",
    "NodeList",
    "Reason",
    "QOS",
    "NNodes",
    "AllocTRES",
    "ReqTRES",
    "JobName",
)
#: sacct fields for one line per attempt (``hpclaunch events``).
ATTEMPT_FIELDS = (
    "JobID",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "NodeList",
    "Reason",
    # What it was given and what it used (hpclaunch report's efficiency figures).
    "Timelimit",
    "AllocCPUS",
    "TotalCPU",
    "AllocTRES",
    "TRESUsageInTot",
)

# "None assigned": sacct's NodeList of a job that never ran (22.05).
# sacct's folded pending tasks of an array: "123_[0-4,7%2]" (the %N is the task limit).
_FOLDED = re.compile(r"^(\d+)_\[(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)(?:%\d+)?\]$")


def parse_squeue(stdout: str, by_id: Mapping[str, JobRef], gres: str) -> dict[JobRef, JobInfo]:
    """Parse squeue ``--Format=SQUEUE_FORMAT`` lines for the jobs in ``by_id``, and for the
    tasks (``123_4``) of those that are arrays, keyed by the task's own ref."""
    infos: dict[JobRef, JobInfo] = {}
    width = len(SQUEUE_FIELDS)
    for line in stdout.splitlines():
        cols = line.split("|", width - 1)
        ref = wanted_ref(cols[0].strip(), by_id) if len(cols) == width else None
        if ref is None:
            continue
        _, state, reason, nodes, elapsed, qos, count, tres, restarts, status, start, name = cols
        job_state = parse_state(state)
        code, signal = _wait_status(status) if job_state.is_finished else (None, None)
        infos[ref] = JobInfo(
            ref=ref,
            state=job_state,
            exit_code=code,
            exit_signal=signal,
            name=name.strip() or None,
            reason=field(reason),
            nodes=field(nodes),
            elapsed=_elapsed(elapsed),
            source="squeue",
            qos=field(qos),
            node_count=to_int(count),
            gpus=gpus_in(tres, gres),
            restarts=to_int(restarts),
            expected_start=field(start) if job_state is JobState.PENDING else None,
        )
    return infos


def parse_sacct(stdout: str, by_id: Mapping[str, JobRef], gres: str) -> dict[JobRef, JobInfo]:
    """Parse ``sacct --duplicates --format=SACCT_FIELDS`` lines (steps included).

    With ``--duplicates`` a requeued job has one record per attempt, oldest first: the last
    one is the job now, and the count before it is its restarts. Of the steps, only the
    batch step is read (:func:`ended_by`): the allocation's ``ExitCode`` is ``0:0`` for a
    job Slurm cancelled or timed out, its batch step's holds the signal (``0:15``).
    """
    infos: dict[JobRef, JobInfo] = {}
    records: dict[JobRef, int] = {}
    batch: dict[JobRef, str] = {}
    out_of_memory: dict[JobRef, str] = {}
    width = len(SACCT_FIELDS)
    for line in stdout.splitlines():
        cols = line.split("|", width - 1)
        if len(cols) != width:
            continue
        job_id, _, step = cols[0].partition(".")
        if step:  # "123.batch", "123.extern", "123.0", "123_4.batch": the job's steps
            ref = wanted_ref(job_id, by_id)
            if ref is not None and step == "batch":
                batch[ref] = cols[2]  # the last attempt's batch step comes last
            elif ref is not None and is_work_step(step) and parse_state(cols[1]) is OOM:
                out_of_memory.setdefault(ref, cols[0])
            continue
        for one in _unfold(job_id):
            ref = wanted_ref(one, by_id)
            if ref is None:
                continue
            if records.get(ref):
                batch.pop(ref, None)  # a newer attempt: the older steps are not its
                out_of_memory.pop(ref, None)
            records[ref] = records.get(ref, 0) + 1
            infos[ref] = _sacct_info(ref, cols, records[ref] - 1, gres)
    return {
        ref: step_out_of_memory(
            ended_by(info, exit_status(batch[ref]) if ref in batch else None),
            out_of_memory.get(ref),
        )
        for ref, info in infos.items()
    }


OOM = JobState.OUT_OF_MEMORY


def is_work_step(step: str) -> bool:
    """Whether a step id (``0``, ``batch``, ``extern``, ``interactive``) is one the job
    started with srun (a number), not one Slurm starts itself."""
    return step.isdigit()


def step_out_of_memory(info: JobInfo, step: str | None) -> JobInfo:
    """A job whose srun step ``step`` ended OUT_OF_MEMORY and whose batch script then
    exited non-zero is taken as OUT_OF_MEMORY.

    Slurm's own state is FAILED: it makes a *job* OUT_OF_MEMORY only when its batch step
    saw the OOM kill (the batch step's return code ``SIG_OOM``, src/slurmctld/job_mgr.c,
    22.05-26.05), and the work of an hpclaunch job runs in a step the sidecar (the batch
    script) starts. The step's OOM is the cause: the state says so, the reason names the
    step."""
    if step is None or info.state is not JobState.FAILED:
        return info
    return replace(info, state=OOM, reason=f"OutOfMemory (step {step})")


#: States in which Slurm (not the job's own exit) ended a job that may have run.
_ENDED_BY_SLURM = frozenset(
    {
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.PREEMPTED,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.DEADLINE,
    }
)


def ended_by(info: JobInfo, batch_exit: tuple[int | None, int | None] | None) -> JobInfo:
    """A finished job's real exit: its batch step's ``(code, signal)`` when the allocation
    says ``0:0`` (a CANCELLED or TIMEOUT job: sacct 22.05 shows ``0:0`` for the job and
    ``0:15`` for ``.batch``); ``None`` for a job Slurm ended before it ran (no batch step, no
    node). Used for sacct's lines and pyslurm.db's records alike."""
    if info.state not in _ENDED_BY_SLURM or (info.exit_code, info.exit_signal) != (0, None):
        return info
    if batch_exit is None:
        if info.nodes is None:  # cancelled while pending: it never ran
            return replace(info, exit_code=None, exit_signal=None)
        return info
    code, signal = batch_exit
    return replace(info, exit_code=code, exit_signal=signal)


def _sacct_info(ref: JobRef, cols: list[str], restarts: int, gres: str) -> JobInfo:
    _, state, exit_code, elapsed, nodes, reason, qos, count, alloc, req, name = cols
    parsed = parse_state(state)
    code, signal = exit_status(exit_code) if parsed.is_finished else (None, None)
    gpus = gpus_in(alloc, gres) if field(alloc) else gpus_in(req, gres)
    return JobInfo(
        ref=ref,
        state=parsed,
        name=name or None,
        reason=field(reason),
        nodes=field(nodes),
        exit_code=code,
        exit_signal=signal,
        elapsed=_elapsed(elapsed),
        source="sacct",
        qos=field(qos),
        node_count=to_int(count),
        gpus=gpus,
        restarts=restarts,
    )


def wanted_ref(job_id: str, by_id: Mapping[str, JobRef]) -> JobRef | None:
    """The ref that ``job_id`` answers for: a requested id itself, or a task ``123_4`` of a
    requested array ``123`` (as its own ref, in the array's cluster); else ``None``."""
    if job_id in by_id:
        return by_id[job_id]
    base, _, task = job_id.partition("_")
    if task.isdigit() and base in by_id:
        return JobRef(job_id, by_id[base].cluster)
    return None


def _unfold(job_id: str) -> list[str]:
    """sacct prints an array's not yet started tasks folded, ``123_[2-4,7%2]`` (22.05):
    one id per task. Any other id is returned as it is."""
    folded = _FOLDED.match(job_id)
    if folded is None:
        return [job_id]
    base = folded.group(1)
    ids: list[str] = []
    for part in folded.group(2).split(","):
        low, _, high = part.partition("-")
        ids.extend(f"{base}_{t}" for t in range(int(low), int(high or low) + 1))
    return ids


def parse_attempts(stdout: str, job_id: str) -> list[Attempt]:
    """Parse ``sacct --duplicates --format=ATTEMPT_FIELDS`` lines of one job, oldest first
    (steps included: an attempt Slurm ended takes its batch step's exit).

    An attempt that ended (PREEMPTED, REQUEUED, or final) has an exit status; sacct's
    ``0:0`` for a job still pending or running is dropped.
    """
    attempts: list[Attempt] = []
    for line in stdout.splitlines():
        cols = line.split("|")
        if len(cols) != len(ATTEMPT_FIELDS):
            continue
        if cols[0].startswith(f"{job_id}.") and attempts:  # steps follow their attempt's line
            if cols[0] == f"{job_id}.batch":
                attempts[-1] = _attempt_ended_by(attempts[-1], cols[2])
            elif is_work_step(cols[0].partition(".")[2]) and parse_state(cols[1]) is OOM:
                attempts[-1] = _attempt_out_of_memory(attempts[-1], cols[0])
            attempts[-1] = _step_memory(attempts[-1], cols[-1])
            continue
        if cols[0] != job_id:
            continue
        _, state, exit_code, submit, start, end, elapsed, nodes, reason = cols[:9]
        limit, cpus, cpu_time, tres = cols[9:13]
        parsed = parse_state(state)
        ended = parsed.is_finished or field(end) is not None
        code, signal = exit_status(exit_code) if ended else (None, None)
        if parsed in _ENDED_BY_SLURM and field(nodes) is None:
            code, signal = None, None  # ended before it ran: no exit status at all
        attempts.append(
            Attempt(
                index=len(attempts),
                state=parsed,
                exit_code=code,
                exit_signal=signal,
                submit=field(submit),
                start=field(start),
                end=field(end),
                elapsed=_elapsed(elapsed),
                nodes=field(nodes),
                reason=field(reason),
                time_limit=read_time_limit(field(limit)),
                cpus=to_int(cpus),
                cpu_seconds=parse_cpu_time(field(cpu_time)),
                tres=field(tres),
            )
        )
    return attempts


def _step_memory(attempt: Attempt, usage: str) -> Attempt:
    """The attempt with a step's memory (``TRESUsageInTot``'s ``mem``) taken into its peak."""
    held = parse_size(tres_text(usage, "mem"))
    if held is None or (attempt.mem_peak is not None and attempt.mem_peak >= held):
        return attempt
    return replace(attempt, mem_peak=held)


def _attempt_out_of_memory(attempt: Attempt, step: str) -> Attempt:
    """A FAILED attempt whose step ``step`` ended OUT_OF_MEMORY (:func:`step_out_of_memory`)."""
    if attempt.state is not JobState.FAILED:
        return attempt
    return replace(attempt, state=OOM, reason=f"OutOfMemory (step {step})")


def _attempt_ended_by(attempt: Attempt, batch_exit: str) -> Attempt:
    """An attempt Slurm ended (TIMEOUT, CANCELLED, PREEMPTED...) has ``0:0`` on its own line
    and its signal on its batch step's (see :func:`ended_by`)."""
    if attempt.state not in _ENDED_BY_SLURM or (attempt.exit_code, attempt.exit_signal) != (
        0,
        None,
    ):
        return attempt
    code, signal = exit_status(batch_exit)
    return replace(attempt, exit_code=code, exit_signal=signal)


def gpus_in(tres: str, gres: str) -> int | None:
    """The count of ``gres/<gres>=N`` in a TRES string (``cpu=1,gres/gpu=2,...``).

    Typed entries (``gres/gpu:a100=2``) repeat the untyped total and are not added.
    """
    found = tres_value(tres, f"gres/{gres}")
    if found is not None:
        return found
    return None if not field(tres) else 0


#: squeue(1) "JOB REASON CODES" (22.05) that say why a job *waits*: once it has ended they
#: are stale (squeue keeps the last one: a job cancelled while pending shows BeginTime).
#: Reasons that tell why a job ended (TimeLimit, NodeDown, OutOfMemory, NonZeroExitCode,
#: RaisedSignal:N, DependencyNeverSatisfied, ...) are kept.
_WAITING_REASONS = frozenset(
    {
        "Priority",
        "Resources",
        "None",
        "WaitingForScheduling",
        "BeginTime",
        "Dependency",
        "JobHeldUser",
        "JobHeldAdmin",
        "Reservation",
        "Licenses",
        "PartitionDown",
        "PartitionInactive",
        "ReqNodeNotAvail",
        "BadConstraints",
        "Cleaning",
    }
)


def is_waiting_reason(reason: str) -> bool:
    """Whether ``reason`` only says why a pending job waits (stale once it ended)."""
    code = re.split(r"[,\s(]", reason.strip("()"), maxsplit=1)[0]
    return code in _WAITING_REASONS or code.startswith(("AssocGrp", "AssocMax", "QOSGrp", "QOSMax"))


def _elapsed(text: str) -> str | None:
    """A run time in one format whichever command printed it (squeue ``1:13``, sacct
    ``00:01:13``): squeue's, ``[D-][H:]M:SS``."""
    seconds = parse_elapsed(field(text))
    return None if seconds is None else format_elapsed(seconds)


def exit_status(text: str) -> tuple[int | None, int | None]:
    """sacct ``ExitCode`` is ``code:signal``."""
    code, _, signal = text.partition(":")
    try:
        return int(code), (int(signal) or None) if signal else None
    except ValueError:
        return None, None


def first_line(result: CommandResult) -> str:
    """The first line of a command's error output (or of its output, or its exit code)."""
    text = (result.stderr or result.stdout).strip()
    return text.splitlines()[0] if text else f"exit code {result.returncode}"


def _wait_status(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from squeue's ``exit_code``: a raw wait status in 22.05 (768 is
    exit 3), ``code:signal`` like sacct's ``ExitCode`` from 24.11 on (``3:0``; both recorded
    in tests/unit/data/slurm-<version>/commands.json)."""
    if ":" in text:
        return exit_status(text)
    raw = to_int(text)
    if raw is None:
        return None, None
    return (raw >> 8) & 0xFF, (raw & 0x7F) or None


_TASK_ID = re.compile(r"^(\d+)_(\d+)$")
# A pending array in sacct: "123_[0-4,7%2]" (22.05 prints the not yet started tasks so).
_FOLDED_TASKS = re.compile(r"^(\d+)_\[([0-9,\-]+)(?:%\d+)?\]$")


def parse_task_states(text: str) -> dict[str, str]:
    """``<id>|<state>[|<reason>]`` lines (squeue or sacct) → task id (``123_4``) → state.

    Folded pending ranges (``123_[0-4%2]``) are expanded; sacct's ``CANCELLED by 0`` is
    ``CANCELLED``; other lines (a whole array's ``123``, steps) are skipped.
    """
    return {task: state for task, state, _ in _task_lines(text)}


def parse_held_tasks(text: str) -> dict[str, str]:
    """Task id → reason of the PENDING tasks of ``<id>|<state>|<reason>`` lines (squeue
    ``%i|%T|%r``) that wait on a hold: ``launch failed requeued held`` (Slurm requeues and
    holds a job whose launch failed, job_mgr.c), ``JobHeldUser``, ``JobHeldAdmin``..."""
    return {task: reason for task, state, reason in _task_lines(text) if is_held(state, reason)}


def is_held(state: str, reason: str) -> bool:
    """A pending job waiting on a hold (any reason that says so: see parse_held_tasks)."""
    return state == "PENDING" and "held" in reason.lower()


def _task_lines(text: str) -> Iterator[tuple[str, str, str]]:
    for line in text.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        state = state.split(" ")[0].strip().upper()
        if not state:
            continue
        if _TASK_ID.match(job):
            yield job, state, reason.strip()
            continue
        folded = _FOLDED_TASKS.match(job)
        if folded:
            for task in task_ids(folded.group(2)):
                yield f"{folded.group(1)}_{task}", state, reason.strip()
