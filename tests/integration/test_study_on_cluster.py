"""Adaptive sweeps (Optuna studies) on the real cluster, with both backends:

* a TPE + ASHA sweep of 8 trials, 2 at a time: the trials far from the optimum are pruned
  at an early step (their tasks end COMPLETED, early: the array's next task takes the
  GPU), the others complete; the study holds exactly 8 trials, each told its end;
* a trial whose task is requeued mid-run (``scontrol requeue``, as a preemption does)
  resumes as the same trial with the same parameters, from its checkpoint: its steps after
  the checkpoint only, each step's value reported once, no second trial asked;
* a trial whose task dies without a word (its trainer SIGKILLs its sidecar and itself, as
  when a node crashes or the kernel kills the task; ``scancel`` would let the sidecar tell
  the trial failed) is failed by the next task, which runs its parameters once more; the
  task after that draws a new trial;
* a study in an RDB (the cluster's MariaDB, ``storage: mysql+pymysql://...``) whose
  password stays out of the spec, the script and study.json (a ``read_default_file``
  that pymysql reads on each node): its three tasks, running at once, are three workers of
  the one study.

The four sweeps are submitted at once (about 1.5 min a backend).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.study import engine
from hpclaunch.study.config import read_study

from .browser import CHROMIUM, browser, console_errors
from .cluster import SlurmCluster
from .conftest import Cli, SubmittedSweeps

pytestmark = [pytest.mark.slurm, pytest.mark.backends]

TRAINER = str(Path(__file__).with_name("study_trainer.py"))
#: The study database and user docker/slurm-cluster/lib/daemons.sh makes in the cluster's
#: MariaDB (port 3307), for this test only.
RDB_URL = "mysql+pymysql://optuna@127.0.0.1:3307/optuna_studies"
RDB_PASSWORD = "hpclaunch-test-only"
STEPS = 6


class Studies(SubmittedSweeps):
    def trials(self, name: str) -> list[Any]:
        job_dir = Path(self.status(name)["job_dir"])
        config = read_study(job_dir / "study.json")
        engine._OPEN.clear()  # read the journal afresh
        return list(engine.load_study(config).trials)


@pytest.fixture(scope="module")
def studies(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory, backend: str
) -> Iterator[Studies]:
    cli = Cli(tmp_path_factory.mktemp("state"))
    spec_dir = tmp_path_factory.mktemp("specs")
    shared = Path.home() / ".hpclaunch" / "it" / f"rdb-{uuid.uuid4().hex[:8]}"
    shared.mkdir(parents=True)
    secret = shared / "my.cnf"  # the nodes share the home directory
    secret.write_text(f"[client]\npassword={RDB_PASSWORD}\n")
    secret.chmod(0o600)
    python = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python")
    base = {
        "project": "research",
        "launcher": "srun",
        "resources": {"time": "00:05:00", "mem": "200M"},
    }
    specs = {
        "asha": {
            "command": [python, TRAINER, "--x", "{x}", "--steps", str(STEPS)],
            "sweep": {
                "method": "tpe",
                "metric": {"name": "val_loss"},
                "parameters": {"x": {"min": 0.0, "max": 5.0}},
                "trials": 8,
                "seed": 7,
                "max_concurrent": 2,
                "early_terminate": {"type": "asha", "min_steps": 1, "reduction_factor": 3},
            },
        },
        "requeue": {
            "command": [python, TRAINER, "--x", "{x}", "--steps", str(STEPS), "--hold", "3"],
            "sweep": {
                "method": "random",
                "metric": {"name": "val_loss"},
                "parameters": {"x": {"min": 0.0, "max": 1.0}},
                "trials": 1,
                "seed": 1,
            },
        },
        "rdb": {
            "command": [python, TRAINER, "--x", "{x}", "--steps", "3"],
            "sweep": {
                "method": "random",
                "metric": {"name": "val_loss"},
                "parameters": {"x": {"min": 0.0, "max": 1.0}},
                "trials": 3,
                "max_concurrent": 3,
                "storage": f"{RDB_URL}?read_default_file={secret}",
            },
        },
        "killed": {
            "command": [python, TRAINER, "--x", "{x}", "--steps", str(STEPS), "--die", "2"],
            "sweep": {
                "method": "random",
                "metric": {"name": "val_loss"},
                "parameters": {"x": {"min": 0.0, "max": 1.0}},
                "trials": 3,
                "max_concurrent": 1,
            },
        },
    }
    ids = {}
    for name, fields in specs.items():
        spec = {"name": f"it-study-{name}-{uuid.uuid4().hex[:4]}", **base, **fields}
        path = spec_dir / f"{name}.yaml"
        path.write_text(json.dumps(spec))
        out = cli("sweep", str(path))
        assert out.returncode == 0, out.stderr
        ids[name] = out.stdout.strip()
    yield Studies(cli, ids)
    arrays = [r["job_id"] for r in cli.submitted().values()]
    if arrays:
        subprocess.run(["scancel", *arrays], check=False, capture_output=True)
    for sweep_id in ids.values():
        shutil.rmtree(Path.home() / ".hpclaunch" / "jobs" / sweep_id, ignore_errors=True)
    shutil.rmtree(shared, ignore_errors=True)


def test_asha_prunes_the_trials_that_fall_behind(studies: Studies) -> None:
    data = studies.wait_done("asha", timeout=300)
    assert data["counts"] == {"COMPLETED": 8}  # pruned trials end cleanly too
    trials = studies.trials("asha")
    assert len(trials) == 8  # one trial a task: none asked twice, none lost
    states = [t.state.name for t in trials]
    assert set(states) <= {"COMPLETE", "PRUNED"}, states
    pruned = [t for t in trials if t.state.name == "PRUNED"]
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert pruned, [(t.params, t.intermediate_values) for t in trials]
    assert complete
    for trial in pruned:  # stopped early: the GPU went to the next task
        assert trial.last_step is not None
        assert trial.last_step < STEPS
    for trial in complete:
        assert sorted(trial.intermediate_values) == list(range(1, STEPS + 1))
        assert trial.value == pytest.approx((trial.params["x"] - 0.3) ** 2 + 1 / STEPS)
    best = min(trials, key=lambda t: t.value if t.value is not None else 1e9)
    assert best.state.name == "COMPLETE"
    by_task = {t["point"]: t for t in data["tasks"]}
    numbers = sorted(t["params"]["trial"] for t in by_task.values())
    assert numbers == sorted(t.number for t in trials)  # status shows each task's trial
    assert sum(data["study"]["trials"].values()) == 8
    assert data["study"]["best"]["trial"] == best.number
    table = studies.cli("sweep", "status", studies.ids["asha"])
    assert table.returncode == 0, table.stderr
    line = next(x for x in table.stdout.splitlines() if x.startswith("study: 8 trials ("))
    assert f"{len(complete)} complete" in line
    assert f"{len(pruned)} pruned" in line
    assert f"best val_loss {best.value:g} (trial {best.number}: x=" in table.stdout
    _assert_the_study_page(studies, len(trials), len(complete))


def _assert_the_study_page(studies: Studies, count: int, complete: int) -> None:
    """``report SWEEP --html`` in headless Chromium: the study's line, a dot per trial in
    the optimisation history, the importance bar of x once two trials completed (fANOVA
    needs two; ASHA may prune all but one), no console error."""
    page = Path(studies.status("asha")["job_dir"]) / "report.html"
    out = studies.cli("report", studies.ids["asha"], "--html", str(page))
    assert out.returncode == 0, out.stderr
    if CHROMIUM is None:
        pytest.skip("no chromium here to render the page (apt-get install chromium)")
    dom = browser(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    study = dom.stdout.split('<section id="study">')[1].split("</section>")[0]
    assert f"study: {count} trials (" in study
    assert study.count("<circle ") == count  # every trial complete or pruned
    if complete >= 2:
        assert "<title>x: 1.000</title>" in study  # one parameter: all the variance is its
    else:
        assert 'id="importances"' not in study
    assert console_errors(dom) == []


def test_a_requeued_trial_resumes_as_the_same_trial(studies: Studies) -> None:
    job_dir = Path(studies.status("requeue")["job_dir"])
    task_dir = job_dir / "tasks" / "0"
    deadline = time.monotonic() + 180
    while not (task_dir / "holding").exists():
        assert time.monotonic() < deadline, "the trial never reached step 3"
        time.sleep(0.5)
    first = json.loads((task_dir / "trial.json").read_text())
    array = studies.status("requeue")["arrays"][0]["job_id"]
    subprocess.run(["scontrol", "requeue", f"{array}_0"], check=True, capture_output=True)
    data = studies.wait_done("requeue", timeout=240)
    assert data["counts"] == {"COMPLETED": 1}
    trials = studies.trials("requeue")
    assert len(trials) == 1  # the requeued task asked for no second trial
    (trial,) = trials
    assert trial.number == first["number"]
    assert trial.params == first["params"]
    assert trial.state.name == "COMPLETE"
    assert sorted(trial.intermediate_values) == list(range(1, STEPS + 1))
    x = first["params"]["x"]
    for step, value in trial.intermediate_values.items():
        assert value == pytest.approx((x - 0.3) ** 2 + 1 / step)
    assert (task_dir / "steps-attempt-0.log").read_text().split() == ["1", "2", "3"]
    assert (task_dir / "steps-attempt-1.log").read_text().split() == ["4", "5", "6"]
    logs = "".join(
        p.read_text() for p in sorted(Path(data["log_dir"]).glob("tasks/0/attempt-*.log"))
    )
    assert f"trial {trial.number} (resumed after a requeue)" in logs


def test_a_trial_whose_task_was_killed_is_run_once_more(studies: Studies) -> None:
    data = studies.wait_done("killed", timeout=300)
    states = {t["point"]: t["state"] for t in data["tasks"]}
    assert states[1] == states[2] == "COMPLETED"
    assert states[0] != "COMPLETED"
    trials = sorted(studies.trials("killed"), key=lambda t: t.number)
    assert len(trials) == 3  # one trial a task: the retry took task 1's place
    dead, retry, fresh = trials
    assert dead.state.name == "FAIL"
    assert retry.state.name == "COMPLETE"
    assert retry.params == dead.params
    assert retry.user_attrs["retry_of"] == dead.number
    assert retry.user_attrs["task"] == "1"
    assert fresh.state.name == "COMPLETE"
    assert "retry_of" not in fresh.user_attrs


def test_a_study_in_the_clusters_mariadb_has_every_task_as_a_worker(studies: Studies) -> None:
    data = studies.wait_done("rdb", timeout=240)
    assert data["counts"] == {"COMPLETED": 3}
    trials = studies.trials("rdb")
    assert sorted(t.state.name for t in trials) == ["COMPLETE"] * 3
    assert sorted(t.user_attrs["task"] for t in trials) == ["0", "1", "2"]
    job_dir = Path(data["job_dir"])
    config = read_study(job_dir / "study.json")
    assert config.journal is None
    assert config.storage.startswith(RDB_URL)
    for path in (job_dir / "study.json", job_dir / "job.sbatch"):
        assert RDB_PASSWORD not in path.read_text()
    import pymysql

    with (
        pymysql.connect(
            host="127.0.0.1",
            port=3307,
            user="optuna",
            password=RDB_PASSWORD,
            database="optuna_studies",
        ) as db,
        db.cursor() as cursor,
    ):
        cursor.execute(
            "select count(*) from trials join studies using (study_id) where study_name = %s",
            (config.name,),
        )
        assert cursor.fetchone() == (3,)
