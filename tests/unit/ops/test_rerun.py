"""``hpclaunch rerun JOB`` / ``session.rerun`` / ``job.rerun``: the spec a job ran with,
kept by the history, submitted again with changes (fake Slurm of conftest.py behind the real
CliBackend; the cluster test is in tests/integration/test_rerun_retry_on_cluster.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import hpclaunch
from hpclaunch.errors import JobNotFound, SubmissionError
from hpclaunch.store.history import (
    SubmissionRecord,
    find_record,
    find_spec,
    history_path,
    record_submission,
)
from hpclaunch.store.sweeps import find_sweep
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeSlurm

Env = dict[str, str]


def _script(slurm: FakeSlurm, job_id: str) -> str:
    """The batch script sbatch got for ``job_id`` (the fake gives ids from 1000 on)."""
    return slurm.scripts[slurm.submitted[int(job_id) - 1000][-1]][0]


def _spec_file(directory: Path) -> Path:
    (directory / "train.py").write_text("print('hi')\n")
    spec = directory / "train.yaml"
    spec.write_text(
        "# a comment the history does not keep\n"
        "name: fit\nscript: train.py\nargs: [--lr, '0.1']\nproject: research\n"
        "resources: {nodes: 1, time: 10}\n"
    )
    return spec


def test_a_rerun_submits_the_kept_spec_changed_from_the_first_ones_directory(
    env: Env,
    slurm: FakeSlurm,
    session: hpclaunch.Session,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    first = session.submit(_spec_file(work), check=False)
    record = find_record(job_id=first.id, path=history_path(env))
    assert record is not None
    assert record.spec_hash
    assert record.submit_dir == str(work)
    kept = find_spec(record.spec_hash, path=history_path(env))
    assert kept is not None
    assert kept["args"] == ["--lr", "0.1"]
    # The spec file is edited, and the rerun is made from elsewhere: it still runs the
    # job's own spec, from the job's directory (the script's relative path resolves there).
    (work / "train.yaml").write_text("name: other\ncommand: ['false']\n")
    monkeypatch.chdir(tmp_path)
    again = session.rerun(first.id, ["args=[--lr, '0.2']"], tier="high")
    script = _script(slurm, again.id)
    assert f"{work}/train.py" in script
    assert "--lr 0.2" in script
    assert "#SBATCH --job-name=fit" in script
    assert "#SBATCH --qos=high" in script
    rerun = find_record(job_id=again.id, path=history_path(env))
    assert rerun is not None
    assert (rerun.rerun_of, rerun.tier, rerun.submit_dir) == (first.id, "high", str(work))
    assert rerun.spec_hash != record.spec_hash
    # Unchanged, a rerun has the job's own hash (estimate pools their run times).
    same = session.rerun(first.id)
    same_record = find_record(job_id=same.id, path=history_path(env))
    assert same_record is not None
    assert same_record.spec_hash == record.spec_hash
    # job.rerun(**fields): a mapping changes only the keys it names.
    nodes = first.rerun(resources={"time": 20})
    assert "#SBATCH --time=00:20:00" in _script(slurm, nodes.id)
    # The history shows where each rerun came from.
    listed = run(env, "history")
    assert "RERUN OF" in listed.stdout
    line = next(x for x in listed.stdout.splitlines() if x.startswith(again.id))
    assert line.rstrip().endswith(first.id)


def test_the_cli_reruns_and_its_dry_run_prints_the_spec(
    env: Env, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(env, "submit", "--no-check", str(_spec_file(tmp_path))).exit_code == 0
    shown = run(env, "rerun", "1000", "--dry-run", "--set", "resources.nodes=2")
    assert shown.exit_code == 0, shown.output
    assert "nodes: 2" in shown.stdout
    assert "script: train.py" in shown.stdout
    assert len(slurm.submitted) == 1
    done = run(env, "rerun", "1000", "--tier", "low")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "1001"
    assert "rerun of job 1000" in done.stderr
    # Mistakes: a bad --set, a job the history does not know, a tier the site lacks.
    assert_clean_error(run(env, "rerun", "1000", "--set", "resources.nodes"), 2, "KEY=VALUE")
    assert_clean_error(run(env, "rerun", "999"), 1, "not in this machine's hpclaunch history")
    bad = run(env, "rerun", "1000", "--tier", "nope")
    assert bad.exit_code != 0
    assert "Traceback" not in bad.output
    assert "tier" in bad.output


def test_jobs_without_a_kept_spec_and_function_jobs_are_refused_with_a_way_on(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, tmp_path: Path
) -> None:
    old = SubmissionRecord(
        job_id="77",
        cluster=None,
        name="old",
        submission_id="s77",
        job_dir=str(tmp_path),
        site="local",
        submitted_at="2026-11-01T00:00:00+00:00",
        spec_hash="0" * 64,
    )
    record_submission(old, path=history_path(env))
    with pytest.raises(JobNotFound, match="kept no spec") as caught:
        session.rerun("77")
    assert "hpclaunch submit SPEC" in (caught.value.hint or "")
    call = {"name": "f", "command": ["python", "-m", "hpclaunch.calls"], "launcher": "srun"}
    record_submission(
        SubmissionRecord(**{**old.__dict__, "job_id": "78", "spec_hash": "1" * 64}),
        path=history_path(env),
        spec=call,
    )
    with pytest.raises(SubmissionError, match="Python function"):
        session.rerun("78")


def test_a_sweep_task_is_rerun_alone_as_a_sweep_of_its_point(
    env: Env,
    slurm: FakeSlurm,
    session: hpclaunch.Session,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2, 3]}}\n"
    )
    swept = session.sweeps.submit(spec, check=False)
    params = Path(find_sweep(swept.sweep_id).params_file).read_text().splitlines()
    assert json.loads(params[1]) == {"index": 1, "params": {"x": 2}}
    with pytest.raises(SubmissionError, match="sweep's array"):
        session.rerun(swept.arrays[0].job_id)
    task = f"{swept.arrays[0].job_id}_1"
    shown = session.job(task).rerun_dryrun("resources.time=5")
    assert shown["sweep"] == {"method": "list", "points": [{"x": 2}]}
    job = session.rerun(task)
    assert job.id.endswith("_0")
    array = job.id.partition("_")[0]
    assert "--array=0" in slurm.jobs[array].submit_line
    rerun = find_record(job_id=array, path=history_path(env))
    assert rerun is not None
    assert rerun.rerun_of == task
    assert os.path.isabs(rerun.submit_dir or "")
