"""Functions as jobs (``Session.submit(fn, ...)``, hpclaunch/calls/): the payload both ways,
the in-job runner as a real ``python -m hpclaunch.calls`` process, and the session against
the fake Slurm of conftest.py (the cluster test is tests/integration/test_calls_on_cluster.py)."""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import CancelledError, as_completed
from pathlib import Path
from typing import Any

import pytest

import hpclaunch
from hpclaunch import jobdir
from hpclaunch._private import make_private_dirs
from hpclaunch.calls import payload
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import CallError, EnvironmentMismatch, JobFailed, RemoteError, SubmissionError
from hpclaunch.ops.job import MapRun
from hpclaunch.ops.watch import watch_of
from hpclaunch.store.sweeps import find_sweep
from tests.unit.conftest import HELLO
from tests.unit.fakes import FakeSlurm

REPO = Path(__file__).resolve().parents[3]


class ShardError(Exception):
    """An exception of the user's own, importable here and in the job."""


class NeedsTwoArgs(Exception):
    """Pickles, but cannot be unpickled: its __init__ takes two arguments, args has one."""

    def __init__(self, shard: int, why: str) -> None:
        super().__init__(f"shard {shard}: {why}")


def scale(values: list[float], factor: float = 2.0) -> list[float]:
    return [v * factor for v in values]


def fails(shard: int) -> None:
    raise ShardError(f"shard {shard} is corrupt")


def run_job(job_dir: Path | str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hpclaunch.calls ARGS`` as the job runs it (cwd: the submit directory)."""
    return subprocess.run(
        [sys.executable, "-m", "hpclaunch.calls", *args],
        env={**os.environ, "HPCLAUNCH_JOB_DIR": str(job_dir), **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def prepared(tmp_path: Path, fn: Any, *args: Any, **kwargs: Any) -> Path:
    call = tmp_path / jobdir.CALL_DIR
    call.mkdir(parents=True)
    (call / jobdir.CALL).write_bytes(payload.dump_call(fn, args, kwargs))
    return tmp_path


def outcome(job_dir: Path) -> payload.Outcome:
    return payload.load_outcome((job_dir / jobdir.CALL_DIR / jobdir.RESULT).read_bytes())


def test_a_closure_and_an_importable_function_run_in_the_job_process(tmp_path: Path) -> None:
    offset = 10  # captured: the lambda travels by value
    job = prepared(tmp_path / "a", lambda xs: [x + offset for x in xs], [1, 2])
    assert run_job(job).returncode == 0
    assert outcome(job).get("1") == [11, 12]
    job = prepared(tmp_path / "b", scale, [1.5], factor=3)  # by reference: tests.unit...
    assert run_job(job).returncode == 0
    assert outcome(job).get("2") == [4.5]
    mode = (job / jobdir.CALL_DIR / jobdir.RESULT).stat().st_mode & 0o777
    assert mode == 0o600


def test_a_raised_exception_comes_back_as_itself_with_the_jobs_traceback(tmp_path: Path) -> None:
    job = prepared(tmp_path, fails, 7)
    ran = run_job(job)
    assert ran.returncode == 1  # the sidecar: user_error, not requeued
    assert "ShardError: shard 7 is corrupt" in ran.stderr  # in the attempt's log too
    with pytest.raises(ShardError, match="shard 7 is corrupt") as caught:
        outcome(job).get("42")
    if hasattr(caught.value, "__notes__"):  # Python 3.11+
        (note,) = caught.value.__notes__
        assert note.startswith("Traceback in job 42:\nTraceback (most recent call last):")
        assert "in fails" in note


def test_an_exception_whose_init_takes_other_arguments_comes_back_as_itself(
    tmp_path: Path,
) -> None:
    """Issue 45: ``__init__(self, shard, why)`` passing one message on came back as
    RemoteError; a ``raise ... from`` lost its cause."""

    def raises_two_args() -> None:
        try:
            raise KeyError("checksum")
        except KeyError as inner:
            error = NeedsTwoArgs(3, "checksum")
            error.shard = 3  # type: ignore[attr-defined]
            raise error from inner

    job = prepared(tmp_path, raises_two_args)
    assert run_job(job).returncode == 1
    with pytest.raises(NeedsTwoArgs, match="shard 3: checksum") as caught:
        outcome(job).get("5")
    error = caught.value
    assert error.args == ("shard 3: checksum",)
    assert error.shard == 3  # type: ignore[attr-defined]
    assert isinstance(error.__cause__, KeyError)
    assert error.__cause__.args == ("checksum",)
    if hasattr(error, "__notes__"):
        assert error.__notes__[-1].startswith("Traceback in job 5:")


def test_an_exception_that_cannot_travel_back_is_a_remote_error_with_the_same_note() -> None:
    gone = payload.Outcome(False, "lost.Module", "it broke", "Traceback ...\nlost.Module", b"")
    with pytest.raises(RemoteError) as caught:
        gone.get("5")
    error = caught.value
    assert (error.type_name, error.text) == ("lost.Module", "it broke")
    assert "lost.Module" in error.remote_traceback
    if hasattr(error, "__notes__"):
        assert error.__notes__[-1] == "Traceback in job 5:\nTraceback ...\nlost.Module"


def test_a_job_in_another_environment_names_the_packages_and_runs_nothing(tmp_path: Path) -> None:
    job = prepared(tmp_path, scale, [1.0])
    path = job / jobdir.CALL_DIR / jobdir.CALL
    envelope = pickle.loads(path.read_bytes())
    envelope["fingerprint"]["packages"]["pyyaml"] = "0.0.1"
    envelope["fingerprint"]["packages"]["left-on-my-laptop"] = "1.0"
    path.write_bytes(pickle.dumps(envelope))
    assert run_job(job).returncode == 1
    with pytest.raises(EnvironmentMismatch) as caught:
        outcome(job).get("9")
    assert caught.value.differences[0] == "left-on-my-laptop: 1.0 at submit, not installed here"
    assert caught.value.differences[1].startswith("pyyaml: 0.0.1 at submit, 6.")
    assert "venv:" in (caught.value.hint or "")


def test_the_fingerprint_holds_the_packages_the_call_imports_and_no_others() -> None:
    """A laptop's packages the function never imports (pytest here) are no reason to
    refuse the job; those it does are compared, by reference or by value."""
    import cloudpickle
    import yaml

    namespace: dict[str, object] = {"__name__": "__main__"}  # a script's function: by value
    exec("import json, yaml\ndef dump(x):\n    return yaml.safe_dump(json.loads(x))", namespace)
    by_value = cloudpickle.dumps(namespace["dump"])
    assert payload.imported_modules(by_value) == {"yaml", "cloudpickle"}
    assert payload.imported_modules(cloudpickle.dumps((yaml.safe_dump, [1]))) == {"yaml"}
    assert payload.needed_distributions(by_value) == ["cloudpickle", "hpclaunch", "pyyaml"]
    envelope = pickle.loads(payload.dump_call(scale, [1.0], {}))
    packages = envelope["fingerprint"]["packages"]
    assert "hpclaunch" in packages
    assert "cloudpickle" in packages
    assert "pytest" not in packages  # installed here, never imported by the call


def imports_in_its_body() -> str:
    import yaml  # at call time only: the pickle (by reference) does not show it

    def nested() -> str:
        import click.testing

        return str(click.testing)

    return str(yaml.__version__) + nested()


def test_what_a_functions_body_imports_is_fingerprinted_too() -> None:
    """Issue 45: ``def f(): import numpy`` ran with another numpy than at submit."""
    assert payload.body_imports(imports_in_its_body) == {"yaml", "click"}
    envelope = pickle.loads(payload.dump_call(imports_in_its_body, (), {}))
    packages = envelope["fingerprint"]["packages"]
    assert {"pyyaml", "click"} <= set(packages)
    assert "pytest" not in packages
    mapped = pickle.loads(
        payload.dump_map(functools.partial(payload.star_call, imports_in_its_body), [()])
    )
    assert "pyyaml" in mapped["fingerprint"]["packages"]


def test_differences_ignore_what_only_the_job_has() -> None:
    mine = {"python": "cpython 3.11", "packages": {"numpy": "2.1.0"}}
    theirs = {"python": "cpython 3.12", "packages": {"numpy": "2.1.0", "extra": "1"}}
    assert payload.differences(mine, theirs) == [
        "python: cpython 3.11 at submit, cpython 3.12 here"
    ]


def test_what_cannot_be_sent_is_refused_at_submit_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    with pytest.raises(CallError, match="cannot be pickled") as caught:
        payload.dump_call(scale, [threading.Lock()], {})
    assert "plain data or paths" in (caught.value.hint or "")
    monkeypatch.setattr(payload, "MAX_CALL_BYTES", 1000)
    with pytest.raises(CallError, match="more than 0 MiB") as caught:
        payload.dump_call(scale, [list(range(1000))], {})
    assert "pass its path instead" in (caught.value.hint or "")


# -- the session, against the fake Slurm ---------------------------------------------------


@pytest.fixture
def session(
    env: dict[str, str], slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> hpclaunch.Session:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO)
    return hpclaunch.Session(warn=lambda _message: None)


def test_a_function_is_submitted_and_its_result_read_back(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    job = session.submit(scale, [1.0, 2.0], factor=10, tier="low", resources={"mem": "1G"})
    assert job.id == "1000"
    assert job.rendered is not None
    script = job.rendered.script
    assert "#SBATCH --qos=low" in script
    assert "#SBATCH --mem=1G" in script
    assert "--launcher=srun --nproc-per-node=1 --" in script
    assert f"{sys.executable} -m hpclaunch.calls" in script
    assert "#SBATCH --job-name=scale" in script
    assert job.job_dir is not None
    # What the job does, then what the caller sees (the fake has it COMPLETED by then).
    assert run_job(Path(job.job_dir)).returncode == 0
    assert job.result(timeout=30) == [10.0, 20.0]
    assert session.job(job.id).result(timeout=30) == [10.0, 20.0]  # from the history
    assert job.exception(timeout=30) is None


def test_a_job_that_ended_without_a_result_is_job_failed_with_its_state(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    slurm.new_job_states = ["PENDING", "OUT_OF_MEMORY"]
    slurm.new_job_exit = "0:125"
    job = session.submit(scale, [1.0])
    error = job.exception(timeout=30)
    assert isinstance(error, JobFailed)
    assert (error.job_id, error.state) == (job.id, "OUT_OF_MEMORY")
    assert "resources.mem" in (error.hint or "")


def tag(x: int) -> dict[str, int]:
    return {"x": x}


def test_a_retry_with_the_same_submission_id_never_changes_what_the_job_runs(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    """Issue 45: the retry wrote its own call over the first one before it found the job."""
    first = session.submit(tag, 1, submission_id="retry-1")
    again = session.submit(tag, 1, submission_id="retry-1")  # the same call: the same job
    assert (again.id, again.existing) == (first.id, True)
    with pytest.raises(CallError, match="already names a job of another call") as caught:
        session.submit(tag, 2, submission_id="retry-1")
    assert "new submission id" in (caught.value.hint or "")
    assert len([a for a in slurm.submitted if a[0] == "sbatch"]) == 1
    assert first.job_dir is not None
    assert run_job(Path(first.job_dir)).returncode == 0
    assert first.result(timeout=30) == {"x": 1}
    # A map's items likewise.
    session.map(double_or_fail, [1, 2, 3], sweep_id="map-retry")
    with pytest.raises(CallError, match="another call"):
        session.map(double_or_fail, [100, 200, 300], sweep_id="map-retry")
    run = session.map(double_or_fail, [1, 2, 3], sweep_id="map-retry")
    for index in range(3):
        assert run_task(run.job_dir, index).returncode == 0
    assert run.results(timeout=30) == [2, 4, 6]


def test_a_job_directory_others_can_write_is_refused_and_nothing_planted_runs(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 45: with a submission id known in advance, another user's 0777 directory got
    the call and the result, and a planted ``result.pkl`` ran code as the submitter."""
    job_root = Path(session.site_config.job_root.replace("~", os.environ["HOME"], 1))
    planted = job_root / "known-ahead"
    planted.mkdir(parents=True)
    planted.chmod(0o777)
    with pytest.raises(SubmissionError, match="writable by others") as caught:
        session.submit(tag, 1, submission_id="known-ahead")
    assert "job_root" in (caught.value.hint or "")
    assert not [a for a in slurm.submitted if a[0] == "sbatch"]
    assert not (planted / "call").exists()

    job = session.submit(tag, 1)
    assert job.job_dir is not None
    call_dir = Path(job.job_dir) / "call"
    marker = tmp_path / "ran"
    evil = pickle.dumps(Evil(str(marker)))
    call_dir.chmod(0o777)  # someone opened it; a result was planted
    (call_dir / jobdir.RESULT).write_bytes(evil)
    with pytest.raises(CallError, match=r"writable by others.*does not load the result"):
        job.result(timeout=30)
    assert not marker.exists()
    # The job itself does not load a call from such a directory either.
    out = run_job(Path(job.job_dir))
    assert out.returncode == 1
    assert "the call is not loaded" in out.stdout + out.stderr
    assert not marker.exists()
    # Parents made private whatever the umask (under umask 000 they came out 0777).
    old = os.umask(0)
    try:
        deep = user_dir("state") / "a" / "b"
        make_private_dirs(deep)
    finally:
        os.umask(old)
    assert (deep.parent.stat().st_mode & 0o777, deep.stat().st_mode & 0o777) == (0o700, 0o700)


class Evil:
    """A pickle that leaves a mark when loaded."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def test_options_and_arguments_are_told_apart(session: hpclaunch.Session) -> None:
    with pytest.raises(CallError, match="launcher: a function's job runs") as caught:
        session.submit(scale, [1.0], launcher="torchrun")
    assert "functools.partial" in (caught.value.hint or "")
    with pytest.raises(CallError, match=r"resources\.nodes: 2"):
        session.submit(scale, [1.0], resources={"nodes": 2})
    with pytest.raises(TypeError, match="arguments are for a function"):
        session.submit(HELLO, 3)
    preview = session.dryrun(lambda: 1, check=False, name="probe")
    assert "#SBATCH --job-name=probe" in preview.script
    assert preview.sbatch_argv[0] == "sbatch"


# -- jobs are futures ----------------------------------------------------------------------


def test_jobs_are_futures_resolved_together_by_one_status_call_a_round(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpclaunch.backends.cli import CliBackend
    from hpclaunch.config.site import load_site
    from tests.unit.fakes import FakeRunner

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO)
    fake = FakeSlurm()
    runner = FakeRunner(fake)
    fake.scripts = runner.files
    backend = CliBackend(runner, load_site(env["HPCLAUNCH_SITE"]))
    session = hpclaunch.Session(backend=backend, warn=lambda _message: None)
    jobs = [session.submit(scale, [float(i)]) for i in range(3)]
    for job in jobs:
        assert job.job_dir is not None
        assert run_job(Path(job.job_dir)).returncode == 0
    submitting = len(runner.calls)  # each submit read the project's use (squeue) too
    # as_completed waits on the futures alone: the session's watcher resolves them.
    values = sorted(job.result()[0] for job in as_completed(jobs, timeout=30))
    assert values == [0.0, 2.0, 4.0]
    # One squeue a round for every job still pending, never one per job: the fake moves
    # each job it is asked about one state on (PENDING, RUNNING, COMPLETED), so 3 rounds
    # when the three are followed at once, up to 5 when the first round saw only the first.
    squeues = [argv for argv in runner.calls[submitting:] if argv[0] == "squeue"]
    assert len(squeues) == watch_of(session).rounds <= 5
    assert any(all(job.id in " ".join(argv) for job in jobs) for argv in squeues)


def test_a_callback_runs_at_the_end_and_cancel_cancels_the_slurm_job(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    slurm.new_job_states = ["PENDING"]  # it never starts by itself
    job = session.submit(scale, [1.0])
    seen: list[bool] = []
    job.add_done_callback(lambda future: seen.append(future.cancelled()))
    with pytest.raises(TimeoutError, match=f"job {job.id} had not ended after 0.2 s"):
        job.result(timeout=0.2)
    assert not job.done()
    assert job.cancel()
    assert seen == [True]
    assert slurm.jobs[job.id].state == "CANCELLED"
    with pytest.raises(CancelledError):
        job.result()


def test_a_spec_jobs_result_is_its_end_and_a_failure_raises(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    ok = session.submit(HELLO)
    assert ok.result(timeout=30).state.value == "COMPLETED"
    slurm.new_job_states = ["PENDING", "FAILED"]
    slurm.new_job_exit = "3:0"
    bad = session.submit(HELLO)
    with pytest.raises(JobFailed, match=f"job {bad.id} ended FAILED, exit code 3 without"):
        bad.result(timeout=30)


def test_a_spec_job_slurm_left_preempted_as_it_finished_is_its_end_by_its_ledger(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    # Slurm's preemption came as the command finished; the sidecar forbade the requeue and
    # its ledger says success; Slurm still records PREEMPTED (GRACE_PREEMPT, job_mgr.c).
    slurm.new_job_states = ["PENDING", "PREEMPTED"]
    slurm.new_job_exit = "0:15"
    finished, lost = session.submit(HELLO), session.submit(HELLO)
    assert finished.job_dir is not None
    end = {"event": "attempt_end", "attempt": 0, "time": 1.0, "reason": "success"}
    session.runner.put_file(f"{finished.job_dir}/events.jsonl", json.dumps(end) + "\n", 0o600)
    assert finished.result(timeout=30).state.value == "PREEMPTED"
    with pytest.raises(JobFailed, match=f"job {lost.id} ended PREEMPTED"):
        lost.result(timeout=30)


# -- map -------------------------------------------------------------------------------


def double_or_fail(x: int) -> int:
    if x < 0:
        raise ShardError(f"negative item {x}")
    return 2 * x


def run_task(job_dir: str, index: int) -> subprocess.CompletedProcess[str]:
    """A map's task as the sweep's task step starts it: its point's own directory."""
    task = os.path.join(job_dir, "tasks", str(index))
    return run_job(task, "--item", str(index), HPCLAUNCH_SWEEP_DIR=job_dir)


def test_map_runs_one_sweep_and_gives_the_values_in_the_items_order(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    run = session.map(double_or_fail, [5, 6, 7], max_concurrent=2, resources={"mem": "1G"})
    (sbatch,) = [argv for argv in slurm.submitted if argv[0] == "sbatch"]
    assert "--array=0-2%2" in sbatch
    (script,) = (text for text, _ in slurm.scripts.values() if "#SBATCH" in text)
    assert "-m hpclaunch.calls --item '{i}'" in script  # the sweep's point, per task
    assert "#SBATCH --qos=low" in script  # a sweep's tier unless given
    for index in range(3):
        assert run_task(run.job_dir, index).returncode == 0
    assert run.results(timeout=30) == [10, 12, 14]
    record = session.sweeps.find(run.sweep_id)
    assert record.points == 3


def test_a_failed_item_raises_its_own_exception_naming_the_item(
    session: hpclaunch.Session,
) -> None:
    run = session.map(double_or_fail, [1, 2, -3])
    assert [run_task(run.job_dir, i).returncode for i in range(3)] == [0, 0, 1]
    with pytest.raises(ShardError, match="negative item -3") as caught:
        run.results(timeout=30)
    if hasattr(caught.value, "__notes__"):
        assert caught.value.__notes__[-1] == f"map item 2 of 3 (sweep {run.sweep_id})"
    with pytest.raises(CallError, match="map over no items"):
        session.map(double_or_fail, [])
    with pytest.raises(TypeError, match="unknown options"):
        session.map(double_or_fail, [1], factor=2)


def test_which_distribution_owns_a_module_is_kept_until_site_packages_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import metadata

    from hpclaunch.store import module_owners as owners

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    calls: list[int] = []

    def counted() -> dict[str, list[str]]:
        calls.append(1)
        return {"yaml": ["PyYAML"]}

    monkeypatch.setattr(metadata, "packages_distributions", counted)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert owners.module_owners(env) == {"yaml": ["PyYAML"]}
    assert owners.module_owners(env) == {"yaml": ["PyYAML"]}
    assert len(calls) == 1  # the second from the cache
    (site / "numpy-2.1.0.dist-info").mkdir()  # an install changes the directory
    os.utime(site, ns=(0, 10**9))
    owners.module_owners(env)
    assert len(calls) == 2


def train(data: str, name: str = "default", lr: float = 0.1) -> str:
    return f"{data}:{name}:{lr}"


def test_keywords_are_bound_to_the_functions_signature_at_submit(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    """Issue 45: a clash (the function's own ``name``) or a typo (``resouces=``) queued and
    ran the function with its defaults, or failed on the node."""
    with pytest.raises(TypeError, match=r"name= is both a field of the job's spec") as caught:
        session.submit(train, "d", name="mine")
    assert "job={...}" in str(caught.value)
    with pytest.raises(TypeError, match=r"did you mean resources="):
        session.submit(train, "d", resouces={"mem": "1G"})
    with pytest.raises(TypeError, match="cannot be called so"):
        session.submit(train)  # data is missing

    def checks(check: bool = False) -> bool:
        return check

    with pytest.raises(TypeError, match="check= is both submit's own keyword"):
        session.submit(checks, check=False)
    assert not [a for a in slurm.submitted if a[0] == "sbatch"]
    job = session.submit(train, "d", name="mine", job={"name": "run-1", "tier": "low"})
    assert job.rendered is not None
    assert "#SBATCH --job-name=run-1" in job.rendered.script
    assert job.job_dir is not None
    assert run_job(Path(job.job_dir)).returncode == 0
    assert job.result(timeout=30) == "d:mine:0.1"


def add(a: int, b: int) -> int:
    return a + b


def test_a_maps_results_keep_every_value_and_read_from_a_new_session(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    """Issue 45: the first failure hid every other value, a map found again had no
    results, and map took one iterable only."""
    run = session.map(double_or_fail, [1, -2, 3, -4])
    for index in range(4):
        run_task(run.job_dir, index)
    values = run.results(timeout=30, return_exceptions=True)
    assert [v if isinstance(v, int) else type(v).__name__ for v in values] == [
        2, "ShardError", 6, "ShardError"
    ]  # fmt: skip
    with pytest.raises(ShardError, match="negative item -2") as caught:
        run.results(timeout=30)
    if hasattr(caught.value, "__notes__"):
        assert "1 more items failed: [3]" in caught.value.__notes__
    again = hpclaunch.Session(warn=lambda _message: None).sweeps.find(run.sweep_id)
    assert isinstance(again, MapRun)
    assert again.results(timeout=30, return_exceptions=True)[2] == 6
    pairs = session.map(add, [1, 2, 3], [10, 20, 30])
    for index in range(3):
        assert run_task(pairs.job_dir, index).returncode == 0
    assert pairs.results(timeout=30) == [11, 22, 33]
    assert find_sweep(pairs.sweep_id).name == "add"  # the function's name, not "partial"


def exits() -> None:
    sys.exit(0)


def test_exits_signals_damaged_results_and_non_specs_are_named(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 45's lesser ones: sys.exit(0) gave "COMPLETED without a result", deaths by
    signal read "exit code 245", a cut result.pkl raised a bare EOFError, submit(42)."""
    job = prepared(tmp_path, exits)
    assert run_job(job).returncode == 1
    with pytest.raises(CallError, match=r"called sys.exit\(0\) instead of returning"):
        outcome(job).get("7")
    assert "SIGSEGV" in str(JobFailed("7", "FAILED", 245, ""))
    assert "128+11: the process died of SIGSEGV" in str(JobFailed("7", "FAILED", 139, ""))
    assert str(JobFailed("7", "FAILED", 255, "")).startswith("job 7 ended FAILED, exit code 255 ")
    with pytest.raises(TypeError, match="not int 42"):
        session.submit(42)  # type: ignore[arg-type]
    cut = session.submit(scale, [1.0])
    assert cut.job_dir is not None
    result = Path(cut.job_dir) / "call" / jobdir.RESULT
    result.write_bytes(payload.dump_value([2.0])[:20])
    with pytest.raises(CallError, match=r"cut short or damaged") as caught:
        cut.result(timeout=30)
    assert str(result) in str(caught.value)


def test_a_result_is_streamed_and_the_earlier_format_is_still_read(tmp_path: Path) -> None:
    """Issue 45: a large result cost 2.1 x its size (its pickle held as bytes inside a
    second pickle); now the value is pickled straight into the file and read from it
    (bench/result_memory.py: 1.0 x, as pickle.load). A result written before still reads."""
    import cloudpickle

    from hpclaunch.store.files import write_private_with

    value = {"loss": [0.5, 0.25], "blob": b"x" * 1000}
    new = tmp_path / "new.pkl"
    write_private_with(new, lambda out: payload.write_value(out, value))
    assert payload.load_outcome(new.read_bytes()).get("1") == value
    earlier = pickle.dumps(
        {"ok": True, "type": "", "text": "", "traceback": "", "payload": cloudpickle.dumps(value)}
    )
    assert payload.load_outcome(earlier).get("2") == value
    # A value that cannot be pickled leaves no file, not half of one.
    lock = threading.Lock()
    with pytest.raises(CallError, match="cannot be pickled"):
        write_private_with(tmp_path / "bad.pkl", lambda out: payload.write_value(out, [1, lock]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.pkl"]
    # A value whose module is missing here is said at get(), not taken for a damaged file.
    missing = pickle.dumps({"format": 2, "ok": True, "type": "", "text": "", "traceback": ""})
    missing += b"cnosuchmodule\nf\n."  # protocol 0: GLOBAL nosuchmodule.f, STOP
    with pytest.raises(CallError, match="cannot be unpickled here: ModuleNotFoundError"):
        payload.load_outcome(missing).get("3")
    with pytest.raises((EOFError, pickle.UnpicklingError)):  # cut short: damage, at once
        payload.load_outcome(new.read_bytes()[:-30])
