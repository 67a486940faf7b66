"""``hpclaunch.Session`` / ``hpclaunch.submit``: the same submission as ``hpclaunch submit``,
against the fake Slurm of conftest.py behind the real CliBackend (the cluster test is
tests/integration/test_session_on_cluster.py)."""

from __future__ import annotations

import builtins
import re
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

import hpclaunch
from hpclaunch.errors import SpecError, SubmissionError
from hpclaunch.ops import helpers
from hpclaunch.store.history import find_record, history_path, recent_submissions
from tests.unit.conftest import HELLO, run
from tests.unit.fakes import FakeRunner, FakeSlurm

Env = dict[str, str]
# Fields that differ between any two submissions of one spec.
PER_SUBMISSION = {"job_id", "submission_id", "job_dir", "log_dir", "submitted_at"}


@pytest.fixture
def session(env: Env, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> hpclaunch.Session:
    """A session of the test's settings; warnings kept in ``session.warned`` (the fake
    Slurm cannot be discovered: each submit warns that it was not checked)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    warned: list[str] = []
    made = hpclaunch.Session(warn=warned.append)
    made.warned = warned  # type: ignore[attr-defined]
    return made


def test_the_api_and_the_cli_make_the_same_job(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    assert run(env, "submit", HELLO).exit_code == 0
    (by_cli_script,) = (text for text, _ in slurm.scripts.values())
    job = session.submit(HELLO)
    assert job.id == "1001"
    rows = {r.job_id: r for r in recent_submissions(path=history_path(env))}
    by_cli, by_api = rows["1000"], rows["1001"]
    assert by_api.submission_id == job.submission_id
    assert by_api.log_dir == job.log_dir
    same = {k: v for k, v in asdict(by_cli).items() if k not in PER_SUBMISSION}
    assert same == {k: v for k, v in asdict(by_api).items() if k not in PER_SUBMISSION}
    assert same["project"] == "research"
    assert same["spec_hash"]
    # The scripts sbatch got are the same but for the submission's own id and directory.
    assert job.rendered is not None
    ids = re.compile(r"[0-9a-f]{32}")
    assert ids.sub("ID", by_cli_script) == ids.sub("ID", job.rendered.script)


def test_a_dict_spec_runs_in_the_callers_directory_and_is_known_to_status(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = {"name": "fit", "command": ["python", "fit.py"], "project": "research"}
    job = session.submit(spec, check=False)
    (script,) = (text for text, _ in slurm.scripts.values())
    assert f"#SBATCH --chdir={tmp_path}\n" in script
    result = run(env, "status", job.id, "--json")
    assert result.exit_code == 0, result.output
    assert '"tier": "medium"' in result.stdout  # from the history row the submit wrote
    record = find_record(job_id=job.id, path=history_path(env))
    assert record is not None
    assert (record.name, record.project) == ("fit", "research")
    assert session.job(job.id).log_dir == job.log_dir
    assert job.status().state.name == "RUNNING"  # the fake moves on at every look


def test_a_retry_with_the_same_submission_id_submits_nothing(
    slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    first = session.submit(HELLO, submission_id="run-7")
    again = session.submit(HELLO, submission_id="run-7")
    assert (again.id, again.existing) == (first.id, True)
    assert len(slurm.submitted) == 1


def test_a_submission_id_reused_for_another_spec_is_refused_unless_forced(
    slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    spec = {"name": "fit", "command": ["python", "fit.py"], "project": "research"}
    first = session.submit(spec, check=False, submission_id="run-8")
    changed = {**spec, "command": ["python", "fit.py", "--lr", "0.1"]}
    with pytest.raises(SubmissionError, match="submission id run-8 already names job"):
        session.submit(changed, check=False, submission_id="run-8")
    forced = session.submit(changed, check=False, submission_id="run-8", force=True)
    assert (forced.id, forced.existing) == (first.id, True)  # as submit --force
    assert len(slurm.submitted) == 1


def test_a_wrong_field_names_it_without_a_traceback(session: hpclaunch.Session) -> None:
    with pytest.raises(SpecError, match=r"(?s)<python>.*resources.gpus_per_node"):
        session.submit({"name": "x", "command": ["true"], "resources": {"gpus_per_node": -1}})


def test_over_quota_placement_is_a_python_warning(
    env: Env, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = {
        "name": "big",
        "command": ["true"],
        "project": "research",
        "tier": "critical",
        "resources": {"nodes": 3, "gpus_per_node": 4, "time": "00:05:00"},
    }
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        preview = hpclaunch.Session().dryrun(spec, check=False)
    assert preview.plan.quota == "over-quota"
    assert any("over-quota" in note for note in preview.plan.notes)
    assert any("over-quota" in str(w.message) for w in seen)


def test_a_python_traceback_shows_the_hint(session: hpclaunch.Session) -> None:
    with pytest.raises(SpecError) as caught:
        session.submit({"name": "x", "command": ["true"], "resources": {"gpus": 3}})
    assert caught.value.__cause__ is None  # no pydantic report under the field list
    if hasattr(caught.value, "add_note"):  # Python 3.11+
        assert caught.value.__notes__ == ["Hint: rename or remove 'gpus'; perhaps 'gpus_per_node'"]


def test_a_sweep_from_python_is_the_clis_sweep(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2, 3]}}\n"
    )
    run_ = session.sweeps.submit(spec, check=False)  # a pathlib.Path, as str works
    assert (run_.points, [r.job_id for r in run_.arrays]) == (3, ["1000"])
    listed = run(env, "sweep", "list")
    assert run_.sweep_id in listed.stdout
    [record] = recent_submissions(path=history_path(env))
    assert (record.job_id, record.project, record.tier) == ("1000", "research", "low")
    again = session.sweeps.find(run_.sweep_id[:8])  # found again by a prefix of its id
    assert (again.sweep_id, again.arrays, again.points) == (run_.sweep_id, run_.arrays, 3)
    again.cancel()
    assert slurm.jobs["1000"].states == ["CANCELLED"]
    said = run(env, "sweep", "cancel", run_.sweep_id)  # safe to repeat, through the CLI too
    assert said.exit_code == 0, said.output
    assert "cancelled arrays 1000" in said.stdout


def test_what_the_cli_prints_comes_from_session_methods(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path
) -> None:
    # render: offline, the same script `hpclaunch render` prints, and its explanation.
    rendered = session.render(HELLO)
    ids = re.compile(r"[0-9a-f]{32}")  # each plan is a new submission
    assert ids.sub("ID", run(env, "render", HELLO).stdout) == ids.sub("ID", rendered.script)
    assert rendered.plan.describe().startswith("- ")
    assert slurm.submitted == []
    # A sweep's arrays carry their --array; its status sorts by a known name only.
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [3, 1, 2]}, max_concurrent: 2}\n"
    )
    swept = session.sweeps.submit(spec, check=False)
    assert swept.array_specs == ("0-2%2",)
    with pytest.raises(KeyError):  # (the fake Slurm writes no params file: none known)
        swept.status(sort_by="nope")
    assert [r.sweep_id for r in session.sweeps.recorded()] == [swept.sweep_id]
    # A rerun with nothing to do says so, and adds no array.
    rerun = session.sweeps.find(swept.sweep_id).rerun()
    assert (rerun.points, rerun.arrays) == ((), ())
    # Jobs by name, and the history's unfinished ones, as `cancel --name`/`--all` see them.
    job = session.submit(HELLO)
    assert [ref.job_id for ref in helpers.jobs_named(session, "hello")] == [job.id]
    assert job.id in {info.ref.job_id for info in helpers.unfinished_jobs(session) or []}


def test_a_sweeps_dry_run_is_a_preview_not_a_run_without_arrays(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2, 3]}, max_concurrent: 2}\n"
    )
    preview = session.sweeps.dryrun(spec, check=False, overrides=["resources.time=7"])
    assert len(preview.sweep.points) == 3
    assert "#SBATCH --time=00:07:00\n" in preview.job.script
    assert preview.overquota is None
    assert slurm.submitted == []
    shown = run(env, "sweep", "--dry-run", "--no-check", "--set", "resources.time=7", str(spec))
    assert shown.exit_code == 0, shown.output
    assert "# sweep " in shown.stdout
    assert "--array=0-2%2" in shown.stdout
    assert "#SBATCH --time=00:07:00" in shown.stdout
    assert slurm.submitted == []


def test_a_pipeline_from_python_submits_in_dependency_order(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path
) -> None:
    path = tmp_path / "pipe.yaml"
    path.write_text(
        "defaults: {project: research}\n"
        "jobs:\n"
        "  - {name: prep, command: ['true']}\n"
        "  - {name: train, command: ['true'], after: [prep]}\n"
    )
    prep, train = session.pipelines.submit(str(path), check=False)
    assert (prep.id, train.id) == ("1000", "1001")
    record = find_record(job_id="1001")
    assert record is not None
    assert record.dependency == "afterok:1000"
    assert train.log_dir
    assert train.log_dir != prep.log_dir


def test_jobs_lists_the_history_with_its_filters(session: hpclaunch.Session) -> None:
    session.submit(HELLO)
    session.submit({"name": "v", "command": ["true"], "project": "vision"}, check=False)
    assert [j.id for j in session.jobs()] == ["1000", "1001"]
    assert [j.id for j in session.jobs(project="vision")] == ["1001"]
    assert session.jobs(project="vision")[0].log_dir


def test_logs_follow_yields_every_attempts_lines_until_the_job_ends(
    session: hpclaunch.Session, slurm: FakeSlurm
) -> None:
    job = session.submit(HELLO)
    assert job.log_dir is not None
    logs = Path(job.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "attempt-0.log").write_text("step 1\nstep 2\n")
    (logs / "attempt-1.log").write_text("resumed at 2\ndone")  # no newline yet
    assert job.logs() == "step 1\nstep 2\nresumed at 2\ndone\n"
    assert job.logs(attempt=1) == "resumed at 2\ndone\n"
    lines = list(job.logs(follow=True))
    assert lines == ["step 1", "step 2", "resumed at 2", "done"]
    assert slurm.jobs[job.id].states == ["COMPLETED"]  # followed until it ended
    assert list(job.logs(follow=True, attempt=0)) == ["step 1", "step 2"]


def test_status_and_cancel_from_python_are_the_clis(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    slurm.new_job_states = ["PENDING"]  # they stay pending until cancelled
    first = session.submit(HELLO)
    second = session.submit({"name": "v", "command": ["true"], "project": "vision"}, check=False)
    rows = session.status()
    assert [(r.ref.job_id, r.tier, r.state.name) for r in rows] == [
        ("1000", "medium", "PENDING"),
        ("1001", "medium", "PENDING"),
    ]
    done = session.cancel([first.id, "404"], name="v")  # by id, and the second by its name
    outcomes = {c.info.ref.job_id: c.outcome for c in done}
    assert outcomes == {"1000": "cancelled", "404": "unknown", "1001": "cancelled"}
    assert slurm.jobs[second.id].states == ["CANCELLED"]
    assert [c.info.ref.job_id for c in session.cancel([first.id])] == ["1000"]
    assert session.cancel([first.id])[0].outcome == "finished"  # safe to repeat


def test_job_events_from_python_are_the_clis(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    import json

    job = session.submit(HELLO)
    slurm.jobs[job.id].states = ["RUNNING"]  # the same answer to both
    events = job.events()
    assert events.submission is not None
    assert events.submission.submission_id == job.submission_id
    cli_data = json.loads(run(env, "events", job.id, "--json").stdout)
    assert cli_data == json.loads(json.dumps(events.to_dict()))


def test_sync_runs_the_job_in_a_snapshot_later_edits_do_not_reach(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = tmp_path / "code"
    (code / "sub").mkdir(parents=True)
    (code / "sub" / "fit.py").write_text("print('v1')\n")
    monkeypatch.chdir(code / "sub")
    spec = {"name": "fit", "command": ["python", "fit.py"], "project": "research"}
    session.submit(spec, sync=True, check=False)
    (script,) = (text for text, _ in slurm.scripts.values())
    chdir = next(line for line in script.splitlines() if line.startswith("#SBATCH --chdir="))
    snapshot_cwd = Path(chdir.split("=", 1)[1])
    assert snapshot_cwd != code / "sub"
    (code / "sub" / "fit.py").write_text("print('v2')\n")  # an edit after submitting
    assert (snapshot_cwd / "fit.py").read_text() == "print('v1')\n"


def test_a_pathlib_path_is_a_spec_file_as_its_text_is(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session
) -> None:
    """Issue 27: ``hpclaunch.submit(Path(...))`` raised ``TypeError: 'PosixPath' object is
    not iterable``; the README says it takes a path."""
    job = session.submit(Path(HELLO))
    by_text = session.submit(HELLO)
    rows = {r.job_id: r for r in recent_submissions(path=history_path(env))}
    assert rows[job.id].spec_hash == rows[by_text.id].spec_hash
    assert rows[job.id].spec_hash is not None


def test_wait_returns_the_end_as_status_has_it(
    slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path, monkeypatch
) -> None:
    """Issue 27: ``job.wait()`` returned tier and quota ``None`` where ``job.status()``
    had them."""
    monkeypatch.chdir(tmp_path)
    job = session.submit({"name": "w", "command": ["true"], "project": "research"}, check=False)
    end = job.wait(timeout=30)
    assert end.state.name == "COMPLETED"
    assert (end.tier, end.quota) == ("medium", "in-quota")


def test_a_session_is_given_its_runner_and_backend_no_class_patched(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What tests and programs with a Slurm of their own do: pass the parts."""
    from hpclaunch.backends.cli import CliBackend
    from hpclaunch.config.site import load_site

    for key in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(key, env[key])
    fake = FakeSlurm()
    runner = FakeRunner(fake)
    fake.scripts = runner.files
    site = load_site(env["HPCLAUNCH_SITE"])
    closed: list[bool] = []
    runner.close = lambda: closed.append(True)  # type: ignore[attr-defined]
    with hpclaunch.Session(
        site=env["HPCLAUNCH_SITE"], backend=CliBackend(runner, site), runner=runner
    ) as made:
        job = made.submit(
            {"name": "given", "command": ["true"], "project": "research"}, check=False
        )
        assert made.backend_reason == "given to the session"
        assert job.result(timeout=30).state.value == "COMPLETED"
    assert [argv[0] for argv in fake.submitted] == ["sbatch"]
    assert any(argv[0] == "squeue" for argv in runner.calls)
    assert closed == [True]


def test_the_module_level_submit_reads_the_settings_at_each_call(
    env: Env, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import yaml

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    other = yaml.safe_load(Path(env["HPCLAUNCH_SITE"]).read_text())
    other["name"] = "other"
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    spec = {"name": "x", "command": ["true"], "project": "research"}
    first = hpclaunch.submit(spec, check=False)
    monkeypatch.setenv("HPCLAUNCH_SITE", str(tmp_path / "other.yaml"))
    second = hpclaunch.submit(spec, check=False)
    assert (first.session.site_config.name, second.session.site_config.name) == (
        "hpclaunch",
        "other",
    )


def test_a_spec_file_is_read_once_a_submit_and_a_sweep(
    session: hpclaunch.Session,
    slurm: FakeSlurm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The history's copy, its hash and the plan are of one reading (the file read three
    # times before: a file changed meanwhile gave a plan of one text and a hash of another).
    job = tmp_path / "job.yaml"
    job.write_text("name: once\ncommand: [echo, hi]\nproject: research\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2]}}\n"
    )
    reads: list[str] = []
    read_text, builtin_open = Path.read_text, builtins.open

    def counted(self: Path, *args: Any, **kwargs: Any) -> str:
        if self.parent == tmp_path and self.name in ("job.yaml", "sweep.yaml"):
            reads.append(self.name)
        return read_text(self, *args, **kwargs)

    def counted_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        path = Path(str(file))
        if path.parent == tmp_path and path.name in ("job.yaml", "sweep.yaml"):
            reads.append(path.name)
        return builtin_open(file, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    monkeypatch.setattr(builtins, "open", counted_open)
    submitted = session.submit(job, check=False, overrides=["resources.time=3"])
    assert submitted.id
    session.sweeps.submit(sweep, check=False)
    assert reads == ["job.yaml", "sweep.yaml"]
    with pytest.raises(SpecError, match=r"job\.yaml \(with --set resources\.nodes=0\)"):
        session.submit(job, check=False, overrides=["resources.nodes=0"])
