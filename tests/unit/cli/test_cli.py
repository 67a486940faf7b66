"""The CLI through click's CliRunner, against a fake Slurm behind the real CliBackend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpclaunch.store.history import history_path, recent_submissions
from tests.unit.conftest import HELLO, assert_clean_error, run
from tests.unit.fakes import FakeJob, FakeSlurm


def test_help(env: dict[str, str]) -> None:
    result = run(env, "--help")
    assert result.exit_code == 0
    for command in ("render", "status", "submit"):
        assert command in result.stdout


def test_render(env: dict[str, str], slurm: FakeSlurm) -> None:
    result = run(env, "render", HELLO)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --job-name=hello\n" in result.stdout
    assert slurm.submitted == []


def test_render_argv_and_explain(env: dict[str, str], slurm: FakeSlurm) -> None:
    result = run(env, "render", "--argv", "--explain", HELLO)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("sbatch --parsable ")
    assert first.endswith("/job.sbatch")
    assert "- partition gpu: the default partition" in result.stderr


def test_bad_spec_exits_2_with_error_and_hint(env: dict[str, str], tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\ncommand: [a]\nresource: {}\n")
    result = run(env, "render", str(spec))
    assert_clean_error(result, 2, "unknown key 'resource'")
    assert "\nHint: " in result.stderr


def test_missing_spec_exits_2(env: dict[str, str]) -> None:
    assert_clean_error(run(env, "render", "nope.yaml"), 2, "does not exist")


def test_spec_the_site_cannot_run_exits_2(env: dict[str, str], tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text("name: x\ncommand: [a]\nresources: {gpus_per_node: 8}\n")
    assert_clean_error(run(env, "render", str(spec)), 2, "the most a node has is 4")


def test_dry_run_submits_nothing(env: dict[str, str], slurm: FakeSlurm) -> None:
    result = run(env, "submit", "--dry-run", HELLO)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# sbatch argv: sbatch --parsable ")
    assert "#SBATCH --qos=normal\n" in result.stdout
    assert slurm.submitted == []
    assert not history_path(env).exists()


def test_submit_prints_the_id_and_remembers_it(env: dict[str, str], slurm: FakeSlurm) -> None:
    result = run(env, "submit", HELLO)
    assert result.exit_code == 0, result.output
    assert result.stdout == "1000\n"
    assert "logs: " in result.stderr
    assert len(slurm.submitted) == 1
    [record] = recent_submissions(path=history_path(env))
    assert (record.job_id, record.name, record.site) == ("1000", "hello", "hpclaunch")
    assert record.job_dir.startswith(env["HOME"] + "/.hpclaunch/jobs/")


def test_submit_wait_follows_to_completed(env: dict[str, str], slurm: FakeSlurm) -> None:
    result = run(env, "submit", "--wait", HELLO)
    assert result.exit_code == 0, result.output
    assert "1000: PENDING\n1000: RUNNING\n1000: COMPLETED\n" in result.stderr


def test_submit_wait_exits_1_when_the_job_fails(env: dict[str, str], slurm: FakeSlurm) -> None:
    slurm.new_job_states = ["RUNNING", "FAILED"]
    slurm.new_job_exit = "2:0"
    result = run(env, "submit", "--wait", HELLO)
    assert result.exit_code == 1
    assert "job 1000 ended FAILED, exit code 2" in result.stderr


def test_submit_wait_timeout_exits_1(env: dict[str, str], slurm: FakeSlurm) -> None:
    slurm.new_job_states = ["PENDING"]
    assert_clean_error(run(env, "submit", "--wait", "--timeout", "0.05", HELLO), 1, "gave up")


def test_sbatch_refusal_exits_1(
    env: dict[str, str], slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.fakes import result as make_result

    monkeypatch.setattr(
        slurm,
        "_sbatch",
        lambda argv: make_result(argv, 1, err="sbatch: error: Invalid qos specification\n"),
    )
    result = run(env, "submit", HELLO)
    assert_clean_error(result, 1, "sbatch refused job 'hello'")
    assert "Hint: the tier's QOS" in result.stderr


def test_status_of_ids(env: dict[str, str], slurm: FakeSlurm) -> None:
    slurm.jobs["5"] = FakeJob("five", ["RUNNING"])
    slurm.jobs["6"] = FakeJob("six", ["FAILED"], exit_code="1:0", in_squeue=False)
    result = run(env, "status", "5", "6", "7")
    # 7 is unknown: the table still shows every job, and the exit code is 1 like cancel's.
    assert result.exit_code == 1, result.output
    assert result.stderr == "Error: job 7: unknown to Slurm's queue and accounting\n"
    assert run(env, "status", "5", "6").exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "TIER",
        "QUOTA",
        "QOS",
        "STATE",
        "REASON",
        "NODES",
        "GPUS",
        "ELAPSED",
        "RESTARTS",
        "EXIT",
    ]
    # QOS normal is tier medium in local.yaml, which has quotas: a non-preemptible tier's QOS
    # runs only in-quota; "five" runs on 1 node with 0 GPUs.
    assert lines[1].split() == [
        "5", "five", "medium", "in-quota", "normal", "RUNNING", "n1", "0", "0:05", "0"
    ]  # fmt: skip
    assert lines[2].split()[:6] == ["6", "six", "medium", "in-quota", "normal", "FAILED"]
    assert lines[3].split()[:2] == ["7", "UNKNOWN"]


def test_status_json(env: dict[str, str], slurm: FakeSlurm) -> None:
    slurm.jobs["5"] = FakeJob("five", ["RUNNING"])
    result = run(env, "status", "--json", "5")
    assert result.exit_code == 0, result.output
    [job] = json.loads(result.stdout)
    assert (job["job_id"], job["state"], job["finished"], job["source"]) == (
        "5",
        "RUNNING",
        False,
        "squeue",
    )


def test_status_says_when_slurm_expects_a_pending_job_to_start(
    env: dict[str, str], slurm: FakeSlurm
) -> None:
    # A day that is never today (the CLI reads the wall clock; :func:`clock_text`'s own test
    # covers "today" with a clock it sets).
    slurm.jobs["8"] = FakeJob("eight", ["PENDING"], start="2020-01-01T15:00:00")
    slurm.jobs["9"] = FakeJob("nine", ["PENDING"])  # no plan from backfill yet: N/A
    result = run(env, "status", "8", "9")
    assert result.exit_code == 0, result.output
    assert "job 8: Slurm expects it to start at ~01-01 15:00" in result.stdout
    assert "job 9:" not in result.stdout
    rows = json.loads(run(env, "status", "--json", "8", "9").stdout)
    assert [r["expected_start"] for r in rows] == ["2020-01-01T15:00:00", None]


def test_status_says_when_a_running_job_should_end(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    """From its trainer's report_progress(step, total=N): one file read, no Slurm call."""
    import time

    from tests.unit.conftest import remember

    slurm.jobs["5"] = FakeJob("five", ["RUNNING"])
    remember(env, "5", tmp_path / "logs", name="five")  # job dir: tmp_path
    (tmp_path / "control").mkdir()
    now = time.time()
    (tmp_path / "control" / "progress.json").write_text(
        json.dumps(
            {"step": 100, "total": 300, "steps_per_s": 1.0, "updated_at": now,
             "job_end": now + 60}
        )
    )  # fmt: skip
    result = run(env, "status", "5")
    assert result.exit_code == 0, result.output
    assert "job 5: step 100/300 at 1 steps/s: it reaches its time limit" in result.stdout
    assert "at about step 160" in result.stdout
    [row] = json.loads(run(env, "status", "--json", "5").stdout)
    assert (row["eta"]["step_at_limit"], row["eta"]["before_limit"]) == (160, False)


def test_status_without_ids_shows_recent_jobs(env: dict[str, str], slurm: FakeSlurm) -> None:
    assert "No hpclaunch jobs recorded yet" in run(env, "status").stdout
    run(env, "submit", HELLO)
    result = run(env, "status", "--json")
    [job] = json.loads(result.stdout)
    assert (job["job_id"], job["name"]) == ("1000", "hello")  # its --job-name


def test_status_rejects_bad_ids(env: dict[str, str]) -> None:
    for bad in ("12;rm", "local-", "local-3;rm"):
        result = run(env, "status", bad)
        assert result.exit_code == 2
        assert "not a job id (123, 123_4 or local-3)" in result.stderr


def test_a_malformed_remote_is_a_config_error(env: dict[str, str], slurm: FakeSlurm) -> None:
    env["HPCLAUNCH_REMOTE"] = "me@"
    assert_clean_error(run(env, "status", "1"), 2, "is not [user@]host[:port]")


def test_unknown_backend_flag(env: dict[str, str]) -> None:
    assert_clean_error(run(env, "--backend", "nope", "status", "1"), 2, "unknown backend 'nope'")


def test_unknown_site_from_env(env: dict[str, str]) -> None:
    env["HPCLAUNCH_SITE"] = "atlantis"
    assert_clean_error(run(env, "render", HELLO), 2, "unknown site 'atlantis'")


def test_a_bug_is_not_dressed_up_as_an_error(
    env: dict[str, str], slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(argv: tuple[str, ...]) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(slurm, "_squeue", broken)
    result = run(env, "status", "1")
    assert isinstance(result.exception, RuntimeError)
    assert "Error:" not in result.stderr


def test_over_ssh_a_sidecar_job_needs_the_sites_python(env: dict[str, str], tmp_path: Path) -> None:
    # Nothing is reached: the plan is refused before any connection.
    env["HPCLAUNCH_REMOTE"] = "alice@127.0.0.9"
    spec = tmp_path / "ddp.yaml"
    spec.write_text(
        yaml.safe_dump({"name": "ddp", "command": ["train.py"], "launcher": "torchrun"})
    )
    assert_clean_error(run(env, "submit", "--dry-run", str(spec)), 2, "python: in the site config")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "sw",
                "command": ["echo", "{a}"],
                "sweep": {"method": "list", "points": [{"a": 1}]},
            }
        )
    )
    assert_clean_error(run(env, "sweep", str(sweep)), 2, "sweep: the job runs hpclaunch")


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_submit_of_a_sweep_spec_is_refused_with_the_sweep_command(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path, dry_run: list[str]
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: s\ncommand: [python, train.py, --lr, '{lr}']\n"
        "sweep: {method: grid, parameters: {lr: [0.1, 0.01, 0.001]}}\n"
    )
    result = run(env, "submit", *dry_run, str(spec))
    assert_clean_error(result, 2, f"{spec}: sweep: this spec is a sweep (3 points over lr)")
    assert f"Hint: submit it with 'hpclaunch sweep {spec}'" in result.stderr
    assert slurm.submitted == []
    assert "{lr}" not in result.stdout  # no script with the placeholder printed either


def test_submit_refuses_a_missing_script_before_sbatch(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: [python, trian.py]\nresources: {time: 5}\n")
    for dry in ([], ["--dry-run"]):
        result = run(env, "submit", *dry, str(spec))
        assert_clean_error(result, 2, f"{spec}: path does not exist:")
        assert "command[1]: 'trian.py'" in result.stderr
        assert "Hint: fix the path; relative paths start from the workdir" in result.stderr
    assert slurm.submitted == []
    result = run(env, "submit", "--no-check", str(spec))  # it may exist on the nodes only
    assert result.exit_code == 0, result.output
    assert len(slurm.submitted) == 1


def _job(tmp_path: Path, extra: str = "") -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: j\ncommand: ['true']\nresources: {{time: '30:00'}}\n{extra}")
    return spec


def test_partition_is_chosen_checked_and_explained(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = _job(tmp_path)
    result = run(env, "submit", "--dry-run", "--partition", "debug", str(spec))
    # debug's MaxTime is 10 minutes: the plan error names the file, the field and the fix.
    assert_clean_error(result, 2, f"{spec}: resources.time: time 00:30:00 is over the limit")
    assert "(partition debug, asked for by resources.partition)" in result.stderr
    result = run(env, "submit", "--dry-run", "--partition", "nope", str(spec))
    assert_clean_error(result, 2, f"{spec}: resources.partition: 'nope' is not a partition of site")
    assert "(partitions: gpu, debug)" in result.stderr
    short = tmp_path / "short.yaml"
    short.write_text("name: j\ncommand: ['true']\nresources: {time: 5, partition: debug}\n")
    result = run(env, "submit", "--dry-run", str(short))
    assert result.exit_code == 0, result.output
    assert "#SBATCH --partition=debug\n" in result.stdout
    assert "partition debug: asked for (resources.partition); its limits fit" in result.stdout


def test_set_changes_fields_validated_as_the_file_and_shown(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = _job(tmp_path)
    result = run(
        env, "submit", "--dry-run", str(spec), "--set", "resources.nodes=2", "--set", "tier=high"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"# spec {spec}, changed by: --set=resources.nodes=2 --set=tier=high\n"
    )
    assert "#SBATCH --nodes=2\n" in result.stdout
    assert "#SBATCH --qos=high\n" in result.stdout
    result = run(env, "submit", "--dry-run", str(spec), "--set", "resources.nodes=zero")
    assert_clean_error(result, 2, f"{spec} (with --set resources.nodes=zero): 1 invalid field")
    assert "resources.nodes:" in result.stderr
    result = run(env, "submit", "--dry-run", str(spec), "--set", "resources.gpu=1")
    assert_clean_error(result, 2, "unknown key 'gpu'")
    result = run(env, "submit", "--dry-run", str(spec), "--set", "tier")
    assert_clean_error(result, 2, "--set 'tier': expected KEY=VALUE")
    result = run(env, "submit", "--dry-run", str(spec), "--set", "name.x=1")
    assert_clean_error(result, 2, "--set 'name.x=1': name is not a mapping in the spec")
    assert slurm.submitted == []


def test_a_resources_field_at_the_top_level_says_where_it_belongs(
    env: dict[str, str], tmp_path: Path
) -> None:
    spec = _job(tmp_path, "gpus_per_node: 2\n")
    result = run(env, "render", str(spec))
    assert_clean_error(result, 2, "'gpus_per_node' belongs under resources:, not at the top level")
    assert "Hint: move it: resources: {gpus_per_node: ...}" in result.stderr


def test_an_unknown_key_that_starts_a_valid_one_is_guessed(
    env: dict[str, str], tmp_path: Path
) -> None:
    spec = tmp_path / "g.yaml"
    spec.write_text("name: g\ncommand: ['true']\nresources: {gpus: 2}\n")
    result = run(env, "render", str(spec))
    assert_clean_error(result, 2, "unknown key 'gpus' (did you mean 'gpus_per_node'?)")


def test_a_controller_that_does_not_answer_is_exit_3_and_nothing_is_recorded(
    env: dict[str, str], slurm: FakeSlurm
) -> None:
    slurm.controller_down = True
    out = run(env, "submit", HELLO)
    assert out.exit_code == 3, out.output
    assert "Error: slurmctld did not answer sbatch: nothing was done" in out.stderr
    assert "Unable to contact slurm controller (connect failure)" in out.stderr
    assert "--submission-id never makes a second job" in out.stderr
    assert "Traceback" not in out.stderr
    assert run(env, "history", "--json").stdout.strip() == "[]"
    slurm.controller_down = False
    job = run(env, "submit", HELLO).stdout.strip().splitlines()[-1]
    slurm.controller_down = True
    status = run(env, "status", job)
    assert status.exit_code == 3, status.output
    assert "slurmctld did not answer squeue" in status.stderr


def test_sweep_takes_set_partition_and_wait(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 27: ``hpclaunch sweep`` lacked ``--set``, ``--partition`` and ``--wait``."""
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: s\ncommand: [echo, '{lr}']\nresources: {time: 5}\n"
        "sweep: {method: grid, parameters: {lr: [0.1, 0.01]}}\n"
    )
    result = run(
        env,
        "sweep",
        "--no-check",
        "--set",
        "resources.time=7",
        "--partition",
        "debug",
        "--wait",
        str(spec),
    )
    ((script, _),) = slurm.scripts.values()
    assert "#SBATCH --time=00:07:00\n" in script
    assert "#SBATCH --partition=debug\n" in script
    # --wait waited for the array to end (the fake knows no tasks: the cluster test shows
    # the counts and the exit code, tests/integration/test_sweep_on_cluster.py).
    assert slurm.jobs["1000"].state == "COMPLETED"
    sweep_id = result.stdout.strip()
    assert f"\nsweep {sweep_id}: 2 " in result.stderr, result.stderr


def test_a_reused_job_id_never_tells_another_jobs_story(
    env: dict[str, str], slurm: FakeSlurm
) -> None:
    """Issue 45: after a cluster reset the history's job 1000 was reported as the new
    cluster's unrelated job 1000 (CANCELLED after 3 s)."""
    assert run(env, "submit", HELLO).stdout == "1000\n"
    slurm.jobs["1000"] = FakeJob("hello", ["COMPLETED"])
    assert run(env, "status", "1000").exit_code == 0  # recorded: COMPLETED
    slurm.jobs["1000"] = FakeJob("wrap", ["CANCELLED"])  # the id given again
    result = run(env, "status", "--json", "1000")
    [row] = json.loads(result.stdout)
    assert row["name"] == "hello"
    assert row["state"] != "CANCELLED"
    assert "now names another job ('wrap', CANCELLED)" in row["reason"]
    [record] = recent_submissions(path=history_path(env))
    assert record.state != "CANCELLED"
    # The report and the events tell the recorded job's story, not the new job's.
    report = run(env, "report", "1000")
    assert report.exit_code == 0, report.output
    head = report.stdout.splitlines()[0]
    assert "'hello'" in head, head
    assert "CANCELLED" not in head, head
    assert "now names another job ('wrap', CANCELLED)" in report.stdout
    assert "attempts (waited" not in report.stdout  # no attempt of the other job shown
    events = run(env, "events", "1000")
    assert "now names another job ('wrap', CANCELLED)" in events.stdout
    assert "not available" not in events.stdout


def test_lesser_refusals_of_issue_45(env: dict[str, str], slurm: FakeSlurm, tmp_path: Path) -> None:
    """Each said nothing, or the wrong thing: status --limit -1 ("no jobs recorded"),
    history --limit -5 (everything), report --html into a missing directory (made),
    Session(site="nosuch") (accepted until the first submit)."""
    import hpclaunch
    from hpclaunch.errors import ConfigError

    assert_clean_error(
        run(env, "submit", "--dry-run", "--submission-id", "../../etc", HELLO),
        2,
        "invalid submission id '../../etc'",
    )
    assert run(env, "status", "--limit", "-1").exit_code == 2
    assert run(env, "history", "--limit", "-5").exit_code == 2
    with pytest.raises(ConfigError, match="unknown site 'nosuch'"):
        hpclaunch.Session(site="nosuch")
    with pytest.raises(ConfigError, match="does not exist"):
        hpclaunch.Session(site=str(tmp_path / "nope.yaml"))
    from hpclaunch.report.page import write_page

    with pytest.raises(ConfigError, match="does not exist: the page is not written"):
        write_page(tmp_path / "missing" / "x.html", "<html></html>")
    assert not (tmp_path / "missing").exists()


def test_a_sweep_beyond_max_job_count_is_refused_and_its_plan_stays_readable(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 45: 60,000 points were planned against MaxJobCount 10,000 without a word (each
    array task is a job to slurmctld), and the plan printed one 20 KB line."""
    from types import SimpleNamespace

    from hpclaunch.errors import PlanError
    from hpclaunch.ops.sweep import check_job_count
    from hpclaunch.slurm.capabilities import discover
    from tests.unit.fakes import recorded

    caps = discover(recorded(), now=lambda: 1000.0)  # Slurm 22.05's: MaxJobCount 10000
    warned: list[str] = []
    context = SimpleNamespace(
        backend=SimpleNamespace(has_cluster=True), capabilities=lambda: caps, warn=warned.append
    )
    with pytest.raises(PlanError, match="MaxJobCount of 10000") as caught:
        check_job_count(context, 60_000, enabled=True)  # type: ignore[arg-type]
    assert "at most 5000 points" in (caught.value.hint or "")
    check_job_count(context, 6_000, enabled=True)  # type: ignore[arg-type]
    assert warned == [
        "6000 points are 6000 jobs to Slurm (each array task counts) against the cluster's "
        "MaxJobCount of 10000, all users' jobs together: its last arrays may be refused when "
        "the queue is full"
    ]
    check_job_count(context, 5_000, enabled=True)  # type: ignore[arg-type]
    assert len(warned) == 1

    spec = tmp_path / "big.yaml"
    data = {"name": "big", "command": ["echo", "{x}"], "project": "research"}
    sweep = {"method": "grid", "parameters": {"x": list(range(60_000))}}
    spec.write_text(yaml.safe_dump({**data, "sweep": sweep}))
    result = run(env, "sweep", "--dry-run", "--no-check", str(spec))
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) < 400
    assert "more sbatch calls like these" in result.stdout


def test_an_idle_guard_the_job_cannot_keep_is_said_at_submit(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: without pynvml in the job's Python the guard silently did nothing."""
    import importlib.util

    spec = tmp_path / "idle.yaml"
    spec.write_text(
        "name: idle\ncommand: [python, train.py]\nlauncher: srun\nproject: research\n"
        "resources: {gpus_per_node: 1}\nidle: {notify_after: 10, stop_after: 30}\n"
    )
    with_nvml = run(env, "submit", "--dry-run", "--no-check", str(spec))
    assert with_nvml.exit_code == 0, with_nvml.output
    assert "idle guard" not in with_nvml.stderr  # this venv has the [gpu] extra
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pynvml" else real(name, *a)
    )
    without = run(env, "submit", "--dry-run", "--no-check", str(spec))
    assert without.exit_code == 0, without.output
    assert without.stderr.count("Warning: idle guard: the job's Python") == 1
    assert "pip install 'hpclaunch[gpu]'" in without.stderr


def test_every_spec_error_has_a_hint(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 45: a negative node count or an unknown tier came without a Hint: line."""
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\ncommand: [a]\ntier: urgent\nresources: {nodes: -1}\n")
    result = run(env, "render", str(spec))
    assert_clean_error(result, 2, "2 invalid fields")
    assert "resources.nodes: Input should be greater than or equal to 1 (got -1)" in result.stderr
    assert "\nHint: fix the values above; 'hpclaunch schema' lists every field" in result.stderr
