"""Small fakes passed in where the real thing would talk to Slurm (no patching)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.backends.slurm_text import ATTEMPT_FIELDS
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import TransportError
from hpclaunch.planning.render import RenderedJob
from hpclaunch.slurm.jobs import JobInfo, JobState
from hpclaunch.transport.base import Command, CommandResult, Runner

Answer = Callable[[tuple[str, ...]], CommandResult]


def result(argv: Sequence[str], rc: int = 0, out: str = "", err: str = "") -> CommandResult:
    """A CommandResult for ``argv``."""
    return CommandResult(argv=tuple(argv), returncode=rc, stdout=out, stderr=err)


class FakeRunner(Runner):
    """A Runner that answers every command from a function and keeps files in memory."""

    where = "the fake"

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, ...]] = []
        self.files: dict[str, tuple[str, int]] = {}

    def _execute(self, command: Command) -> CommandResult:
        self.calls.append(command.argv)
        return self.answer(command.argv)

    def first_foreign_or_open(self, paths: Sequence[str]) -> str | None:
        return None  # its files are in memory, the user's own

    def put_file(self, path: str, content: str, mode: int) -> None:
        self.files[path] = (content, mode)

    def read_file(self, path: str) -> str:
        try:
            return self.files[path][0]
        except KeyError:
            raise TransportError(f"cannot read {path}: no such file") from None

    def put_bytes(self, path: str, data: bytes, mode: int) -> None:
        self.files[path] = (data.decode("utf-8", "replace"), mode)

    def read_bytes(self, path: str, offset: int = 0) -> bytes:
        return self.read_file(path).encode()[offset:]

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)}
        if not names:
            raise FileNotFoundError(path)
        return sorted(names)

    def calls_to(self, program: str) -> list[tuple[str, ...]]:
        """The calls whose argv[0] is ``program``."""
        return [c for c in self.calls if c[0] == program]


@dataclass
class FakeJob:
    """A job in :class:`FakeSlurm`."""

    name: str
    states: list[str]  # squeue states, one per squeue call; the last one sticks
    exit_code: str = "0:0"
    in_squeue: bool = True  # False: forgotten after MinJobAge, sacct only
    in_sacct: bool = True
    reason: str = "None"
    nodes: str = "n1"
    qos: str = "normal"
    tres: str = "cpu=1,mem=100M,node=1,billing=1"
    restarts: int = 0
    comment: str = ""
    submit_line: str = ""
    attempts: list[str] = field(default_factory=list)  # earlier attempts' sacct states
    elapsed: str = "00:00:05"  # as sacct prints it; squeue drops the leading zeros
    start: str = "N/A"  # squeue's StartTime (a pending job's: when Slurm expects it)

    @property
    def state(self) -> str:
        return self.states[0]

    def advance(self) -> None:
        if len(self.states) > 1:
            self.states.pop(0)


# What Slurm's commands printed with slurmctld killed (25.11.7 test cluster, exit 1).
_CONTROLLER_DOWN = {
    "sbatch": "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)\n",
    "squeue": "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
}


@dataclass
class FakeSlurm:
    """Answers sbatch, squeue, sacct and scancel roughly as Slurm 22.05 does."""

    jobs: dict[str, FakeJob] = field(default_factory=dict)
    next_id: int = 1000
    submitted: list[tuple[str, ...]] = field(default_factory=list)
    #: ``sbatch --test-only`` calls (nothing queued).
    tested: list[tuple[str, ...]] = field(default_factory=list)
    new_job_states: list[str] = field(default_factory=lambda: ["PENDING", "RUNNING", "COMPLETED"])
    new_job_exit: str = "0:0"
    #: Files written through the runner (path → (text, mode)), to read batch scripts from.
    scripts: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: slurmctld is down: its commands answer as they did on the 25.11 test cluster.
    controller_down: bool = False
    #: ``sacct --duplicates --format=ATTEMPT_FIELDS`` answers by job id, as recorded (a
    #: job here is answered from ``jobs`` instead, a line per attempt).
    attempt_lines: dict[str, str] = field(default_factory=dict)

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        if self.controller_down and argv[0] in _CONTROLLER_DOWN:
            return result(argv, 1, err=_CONTROLLER_DOWN[argv[0]])
        handler = getattr(self, "_" + argv[0], None)
        if handler is None:
            return result(argv, 127, err=f"{argv[0]}: not faked")
        answer: CommandResult = handler(argv)
        return answer

    def _sbatch(self, argv: tuple[str, ...]) -> CommandResult:
        if "--test-only" in argv:  # nothing queued; sbatch's will-run line (22.05's wording)
            self.tested.append(argv)
            return result(
                argv,
                err=f"sbatch: Job {self.next_id} to start at 2026-11-28T12:40:00 using 1 "
                "processors on nodes n1 in partition gpu\n",
            )
        self.submitted.append(argv)
        job_id = str(self.next_id)
        self.next_id += 1
        script = self.scripts.get(argv[-1], ("", 0))[0]
        lines = [*argv, *script.splitlines()]
        comment = next(
            (
                line.split("=", 1)[1]
                for line in lines
                if line.startswith(("--comment=", "#SBATCH --comment="))
            ),
            "",
        )
        name = next(  # as sbatch: the command line's, else the script's (sbatch(1))
            (
                line.split("=", 1)[1]
                for line in lines
                if line.startswith(("--job-name=", "#SBATCH --job-name="))
            ),
            "job",
        )
        self.jobs[job_id] = FakeJob(
            name=name,
            states=list(self.new_job_states),
            exit_code=self.new_job_exit,
            comment=comment,
            submit_line=" ".join(argv),
        )
        return result(argv, out=f"{job_id}\n")

    def _squeue(self, argv: tuple[str, ...]) -> CommandResult:
        if any(a.startswith("--account=") for a in argv):
            return result(argv, out="")  # a project's usage (its queue): these jobs have none
        if "--me" in argv:  # the user's jobs: %i|%k (comment) or %i|%T|%j
            fmt = _opt(argv, "--format")
            lines = []
            for i, job in self.jobs.items():
                if not job.in_squeue or ("--states=all" not in argv and _done(job.state)):
                    continue
                lines.append(
                    f"{i}|{job.comment}" if fmt == "%i|%k" else f"{i}|{job.state}|{job.name}"
                )
            return result(argv, out="".join(line + "\n" for line in lines))
        ids = _opt(argv, "--jobs").split(",")
        # One id strtol cannot read fails the whole call (src/squeue/opts.c, 25.11.7).
        unreadable = [i for i in ids if not i[:1].isdigit() or i.startswith("0")]
        if unreadable:
            return result(argv, 1, err=f"squeue: error: Invalid job id: {unreadable[0]}\n")
        known = [i for i in ids if i in self.jobs and self.jobs[i].in_squeue]
        if not known:
            return result(argv, 1, err="slurm_load_jobs error: Invalid job id specified\n")
        lines = []
        for i in known:
            job = self.jobs[i]
            nodes = job.nodes or "(null)"
            lines.append(
                f"{i}|{job.state}|{job.reason}|{nodes}|{_squeue_time(job.elapsed)}|{job.qos}|1|{job.tres}|"
                f"{job.restarts}|{_raw_status(job.exit_code)}|{job.start}|{job.name}"
            )
            job.advance()
        return result(argv, out="\n".join(lines) + "\n")

    def _sacct(self, argv: tuple[str, ...]) -> CommandResult:
        if "--starttime=now-7days" in argv:  # looking for a submission: JobID,Comment,SubmitLine
            lines = [f"{i}||{job.submit_line}" for i, job in self.jobs.items() if job.in_sacct]
            return result(argv, out="".join(line + "\n" for line in lines))
        ids = _opt(argv, "--jobs").split(",")
        lines = []
        if _opt(argv, "--format") == ",".join(ATTEMPT_FIELDS):  # one line per attempt
            if ids[0] in self.attempt_lines:
                return result(argv, out=self.attempt_lines[ids[0]])
            job = self.jobs.get(ids[0])
            for state in [*job.attempts, job.state] if job and job.in_sacct else []:
                lines.append(
                    f"{ids[0]}|{state}|{job.exit_code}|2026-01-01T00:00:00|2026-01-01T00:00:01|"
                    f"2026-01-01T00:00:06|{job.elapsed}|{job.nodes}|None|00:10:00|1|00:00:01|"
                    f"{job.tres}|"
                )
            return result(argv, out="".join(line + "\n" for line in lines))
        for i in ids:
            job = self.jobs.get(i)
            if job is None or not job.in_sacct:
                continue
            common = f"{job.nodes}|None|{job.qos}|1|{job.tres}|{job.tres}"
            for old in job.attempts:  # --duplicates: earlier attempts first
                lines.append(f"{i}|{old}|0:0|00:00:01|{common}|{job.name}")
            lines.append(f"{i}|{job.state}|{job.exit_code}|{job.elapsed}|{common}|{job.name}")
        return result(argv, out="".join(line + "\n" for line in lines))

    def _scancel(self, argv: tuple[str, ...]) -> CommandResult:
        job = self.jobs.get(argv[-1])
        if job is None:
            return result(argv, 1, err="scancel: error: Invalid job id specified\n")
        if job.state in {"COMPLETED", "FAILED", "CANCELLED"}:
            return result(
                argv,
                1,
                err=f"scancel: error: Kill job error on job id {argv[-1]}: "
                "Job/step already completing or completed\n",
            )
        job.states = ["CANCELLED"]
        return result(argv)


def _squeue_time(elapsed: str) -> str:
    """squeue's ``%M``: ``00:00:05`` → ``0:05``."""
    hours, minutes, seconds = elapsed.split(":")
    return f"{int(hours)}:{minutes}:{seconds}" if int(hours) else f"{int(minutes)}:{seconds}"


def _done(state: str) -> bool:
    return state.split()[0] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}


def _opt(argv: Sequence[str], flag: str) -> str:
    for arg in argv:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} not in {argv}")


class ScriptedBackend(Backend):
    """A Backend whose status answers come from a list of {job_id: state} rounds."""

    name = "scripted"

    def __init__(self, runner: Runner, site: SiteConfig, rounds: list[dict[str, str]]) -> None:
        super().__init__(runner, site)
        self.rounds = rounds
        self.status_calls: list[list[JobRef]] = []

    def submit(self, job: RenderedJob, *, script_written: bool = False) -> JobRef:
        raise NotImplementedError

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        self.status_calls.append(list(refs))
        states = self.rounds[min(len(self.status_calls), len(self.rounds)) - 1]
        infos = {}
        for r in refs:  # "FAILED:3": the state and its exit code
            state, _, code = states.get(r.job_id, "UNKNOWN").partition(":")
            infos[r] = JobInfo(r, JobState(state), exit_code=int(code) if code else None)
        return infos

    def cancel(self, ref: JobRef) -> None:
        raise NotImplementedError

    def submit_script(
        self, script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
    ) -> JobRef:
        raise NotImplementedError

    def find_submission(self, submission_id: str) -> JobRef | None:
        raise NotImplementedError

    def find_jobs(self, name: str) -> list[JobInfo]:
        raise NotImplementedError

    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        raise NotImplementedError


def _raw_status(exit_code: str) -> int:
    """sacct's "code:signal" as the raw wait status squeue prints (code << 8 | signal)."""
    code, _, signal = exit_code.partition(":")
    return (int(code) << 8) | int(signal or 0)


def install_fake_slurm(monkeypatch: Any, fake: FakeSlurm | None = None) -> FakeSlurm:
    """Register the backend ``fakeslurm`` for this test: the real CliBackend talking to
    ``fake`` (a new FakeSlurm by default) through a FakeRunner. The backend class is made
    here, for this test: no class is patched, so no state leaks between tests."""
    from hpclaunch import backends
    from hpclaunch.backends.cli import CliBackend

    slurm = fake if fake is not None else FakeSlurm()

    def init(self: CliBackend, runner: Runner, site: SiteConfig) -> None:
        fake_runner = FakeRunner(slurm)
        slurm.scripts = fake_runner.files  # sbatch reads the script's #SBATCH lines
        CliBackend.__init__(self, fake_runner, site)

    backend = type("FakeSlurmBackend", (CliBackend,), {"name": "fakeslurm", "__init__": init})
    monkeypatch.setitem(backends._REGISTRY, "fakeslurm", backends._Entry(backend, None))
    return slurm


#: Real Slurm 22.05.8 output of the local cluster (tests/unit/data/cluster-22.05/).
RECORDED_22_05 = Path(__file__).parent / "data" / "cluster-22.05"
RECORDED = {
    ("scontrol", "show", "config"): "scontrol_show_config.txt",
    ("scontrol", "show", "partition", "--oneliner"): "scontrol_show_partition.txt",
    ("sinfo", "-h", "-N", "-o", "%N|%R|%G|%c|%T"): "sinfo_nodes.txt",
    ("sacctmgr", "-n", "-P", "show", "qos"): "sacctmgr_qos.txt",
    ("sacctmgr", "-n", "-P", "show", "user"): "sacctmgr_user.txt",
}


def recorded(edit: Callable[[str, str], str] = lambda name, text: text) -> FakeRunner:
    """A runner answering with the recorded outputs, each passed through ``edit``."""

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv == ("id", "-un"):
            return result(argv, out="root\n")
        for prefix, name in RECORDED.items():
            if argv[: len(prefix)] == prefix:
                return result(argv, out=edit(name, (RECORDED_22_05 / name).read_text()))
        return result(argv, 1, err=f"unexpected {argv}")

    return FakeRunner(answer)
