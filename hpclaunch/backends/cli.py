"""The command-line backend: sbatch, squeue, sacct and scancel through a Runner.

Parsing is written against Slurm 22.05 (Debian 12) and kept defensive: unknown lines are
skipped, and the job name, the one free-text field, is always the last column so that it may
contain the delimiter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.errors import (
    BackendError,
    BackendUnavailable,
    CommandTimeout,
    SubmissionError,
    TransportError,
    describe_result,
)
from hpclaunch.observe import JobInfo, JobState, parse_state
from hpclaunch.transport.base import CommandResult

if TYPE_CHECKING:
    from hpclaunch.render import RenderedJob

__all__ = ["SACCT_FIELDS", "SQUEUE_FORMAT", "CliBackend", "parse_sbatch_parsable"]

#: Seconds to wait for one Slurm command.
COMMAND_TIMEOUT = 60.0
#: squeue columns: id, long state, reason, nodes, elapsed, name (last: free text).
SQUEUE_FORMAT = "%i|%T|%r|%N|%M|%j"
#: sacct fields valid in 22.05 (``sacct --helpformat``); there is no "Restarts" field.
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "NodeList", "Reason", "JobName")

# squeue exits 1 with this when none of the --jobs ids is known (any left MinJobAge ago).
_SQUEUE_UNKNOWN_IDS = "Invalid job id specified"
# scancel on a job that already ended or is forgotten: not an error for an idempotent cancel.
# 22.05 exits 0 silently in both cases (checked on the test cluster); other versions print
# these errors and exit 1.
_SCANCEL_GONE = ("already completing or completed", "Invalid job id specified")
_PARSABLE = re.compile(r"^(\d+(?:_\d+)?)(?:;(\S+))?$")
_EMPTY = frozenset({"", "(null)", "None", "Unknown"})

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


class CliBackend(Backend):
    """Slurm through its command-line tools (sbatch, squeue, sacct, scancel)."""

    name = "cli"

    def submit(self, job: RenderedJob) -> JobRef:
        """Write the script into the private job directory, then ``sbatch --parsable`` it."""
        self.runner.put_file(job.script_path, job.script, 0o700)
        try:
            result = self.runner.run(job.sbatch_argv, timeout=COMMAND_TIMEOUT)
        except CommandTimeout as exc:
            raise SubmissionError(
                f"sbatch did not answer within {COMMAND_TIMEOUT:g} s: the job may or may not "
                "have been submitted",
                hint="do not resubmit blindly; look for it with "
                f"squeue --me --format='%i %k' | grep hpclaunch:{job.plan.submission_id}",
            ) from exc
        if not result.ok:
            raise SubmissionError(
                f"sbatch refused job {job.plan.job_name!r}",
                result=result,
                hint=_sbatch_hint(result.stderr),
            )
        try:
            return parse_sbatch_parsable(result.stdout)
        except ValueError as exc:
            raise SubmissionError(
                f"cannot read a job id in sbatch's answer: {exc}", result=result
            ) from exc

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """One squeue call for all jobs; one sacct call for those squeue did not know or
        saw finished (for their exit codes). Unknown to both: ``JobState.UNKNOWN``.

        Cluster names in refs are not used: hpclaunch submits without ``--clusters``.
        """
        refs = list(dict.fromkeys(refs))
        if not refs:
            return {}
        by_id = {ref.job_id: ref for ref in refs}
        infos = self._squeue(by_id)
        ask_sacct = [ref for ref in refs if ref not in infos or infos[ref].state.is_finished]
        if ask_sacct:
            accounted, problem = self._sacct({r.job_id: r for r in ask_sacct})
            for ref in ask_sacct:
                known, found = infos.get(ref), accounted.get(ref)
                if known and found:  # squeue's view, with sacct's exit code
                    infos[ref] = _with_exit(known, found)
                elif found:
                    infos[ref] = found
                elif not known:
                    reason = problem or "unknown to squeue and sacct"
                    infos[ref] = JobInfo(ref, JobState.UNKNOWN, reason=reason)
        return {ref: infos[ref] for ref in refs}

    def cancel(self, ref: JobRef) -> None:
        """``scancel ID``; a job that already ended (or is forgotten) is not an error."""
        result = self.runner.run(["scancel", ref.job_id], timeout=COMMAND_TIMEOUT)
        if result.ok or any(text in result.stderr for text in _SCANCEL_GONE):
            return
        raise BackendError(f"scancel failed for job {ref.job_id}\n{describe_result(result)}")

    # -- squeue / sacct ---------------------------------------------------------------

    def _squeue(self, by_id: Mapping[str, JobRef]) -> dict[JobRef, JobInfo]:
        argv = [
            "squeue",
            "--noheader",
            f"--jobs={','.join(by_id)}",
            "--states=all",
            f"--format={SQUEUE_FORMAT}",
        ]
        result = self.runner.run(argv, timeout=COMMAND_TIMEOUT)
        if not result.ok:
            if _SQUEUE_UNKNOWN_IDS in result.stderr:
                return {}
            raise BackendUnavailable(
                f"squeue failed\n{describe_result(result)}",
                hint="is slurmctld running and reachable? (scontrol ping)",
            )
        infos: dict[JobRef, JobInfo] = {}
        for line in result.stdout.splitlines():
            cols = line.split("|", 5)
            if len(cols) != 6 or cols[0].strip() not in by_id:
                continue
            job_id, state, reason, nodes, elapsed, name = (c.strip() for c in cols)
            ref = by_id[job_id]
            infos[ref] = JobInfo(
                ref=ref,
                state=parse_state(state),
                name=name or None,
                reason=_field(reason),
                nodes=_field(nodes),
                elapsed=_field(elapsed),
                source="squeue",
            )
        return infos

    def _sacct(self, by_id: Mapping[str, JobRef]) -> tuple[dict[JobRef, JobInfo], str | None]:
        """Ask sacct; returns (infos, problem). Sites without accounting are not an error:
        the jobs then stay UNKNOWN with ``problem`` as the reason."""
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            f"--jobs={','.join(by_id)}",
            f"--format={','.join(SACCT_FIELDS)}",
        ]
        try:
            result = self.runner.run(argv, timeout=COMMAND_TIMEOUT)
        except TransportError as exc:
            return {}, f"sacct unavailable: {exc.message.splitlines()[0]}"
        if not result.ok:
            return {}, f"sacct failed: {_first_line(result)}"
        infos: dict[JobRef, JobInfo] = {}
        for line in result.stdout.splitlines():
            cols = line.split("|", len(SACCT_FIELDS) - 1)
            # Keep the job's own line: "123.batch", "123.extern", "123.0" are its steps.
            if len(cols) != len(SACCT_FIELDS) or cols[0] not in by_id:
                continue
            job_id, state, exit_code, elapsed, nodes, reason, name = cols
            ref = by_id[job_id]
            parsed = parse_state(state)
            code, signal = _exit_code(exit_code) if parsed.is_finished else (None, None)
            infos[ref] = JobInfo(
                ref=ref,
                state=parsed,
                name=name or None,
                reason=_field(reason),
                nodes=_field(nodes),
                exit_code=code,
                exit_signal=signal,
                elapsed=_field(elapsed),
                source="sacct",
            )
        return infos, None


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


def _sbatch_hint(stderr: str) -> str:
    for needle, hint in _SBATCH_HINTS:
        if needle.lower() in stderr.lower():
            return hint
    return "read Slurm's message above; 'hpclaunch render SPEC' shows the script it refused"


def _field(text: str) -> str | None:
    text = text.strip()
    return None if text in _EMPTY else text


def _exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct ``ExitCode`` is ``code:signal``."""
    code, _, signal = text.partition(":")
    try:
        return int(code), (int(signal) or None) if signal else None
    except ValueError:
        return None, None


def _with_exit(known: JobInfo, accounted: JobInfo) -> JobInfo:
    return replace(known, exit_code=accounted.exit_code, exit_signal=accounted.exit_signal)


def _first_line(result: CommandResult) -> str:
    text = (result.stderr or result.stdout).strip()
    return text.splitlines()[0] if text else f"exit code {result.returncode}"
