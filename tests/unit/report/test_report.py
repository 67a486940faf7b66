"""A job's report: GPU figures from its samples, its attempts from Slurm's accounting and
the ledger, advice, and ``hpclaunch report`` / ``Job.report()`` over the fake Slurm (the
attempts of each release's real sacct output: tests/unit/slurm/test_slurm_recorded.py)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

import hpclaunch
from hpclaunch import jobdir
from hpclaunch.ops.sweep_status import SweepStatus, TaskStatus
from hpclaunch.report.attempts import AttemptSummary
from hpclaunch.report.gpus import gpu_stats, percentile
from hpclaunch.report.job import advise
from hpclaunch.report.sweep import SweepReport
from hpclaunch.store.sweeps import SweepArray, SweepRecord, find_sweep, sweeps_dir
from hpclaunch.supervise.ledger import Ledger
from tests.unit.conftest import Env, assert_clean_error, remember, run
from tests.unit.fakes import FakeSlurm


def sample(ts: float, gpu: str = "GPU-a", **values: object) -> dict[str, object]:
    """One line of metrics.jsonl as the sampler writes it (hpclaunch.supervise.gpumon)."""
    line: dict[str, object] = {"ts": ts, "node": "n1", "attempt": 0, "gpu": gpu, "pci": "0:3B"}
    line.update({"util": 50, "mem_used": 1024, "mem_total": 40960, "temp_c": 60, "power_w": 300.0})
    line.update(values)
    return line


def test_percentiles_interpolate_between_ranks_as_numpy_does() -> None:
    values = [float(v) for v in range(0, 101, 10)]  # 0, 10, ..., 100
    assert (percentile(values, 0.1), percentile(values, 0.5), percentile(values, 0.9)) == (
        10.0,
        50.0,
        90.0,
    )
    assert percentile([1.0, 2.0], 0.5) == 1.5
    assert percentile([7.0], 0.9) == 7.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_energy_counts_each_sample_until_the_next_but_not_a_requeues_gap() -> None:
    # Every 30 s; then 600 s without samples (the job was requeued), then two more.
    times = [0, 30, 60, 90, 690, 720]
    [gpu] = gpu_stats(
        sample(t, util=u) for t, u in zip(times, [0, 20, 40, 60, 80, 100], strict=True)
    )
    # 30 + 30 + 30 + 60 (at most two usual intervals) + 30 + 30 (the last: one interval).
    assert gpu.seconds == 210
    assert gpu.energy_kwh == pytest.approx(300.0 * 210 / 3.6e6)
    assert (gpu.util_mean, gpu.util_p10, gpu.util_p90) == (50.0, 10.0, 90.0)
    assert (gpu.samples, gpu.mem_max_mib, gpu.mem_total_mib, gpu.pci) == (6, 1024, 40960, "0:3B")


def test_a_gpu_that_reports_no_power_has_no_energy_and_torn_fields_are_skipped() -> None:
    found = gpu_stats(
        [sample(0, power_w=None), sample(30, power_w=None, util=None), {"gpu": "GPU-a"}]
    )
    [gpu] = found
    assert (gpu.energy_kwh, gpu.power_mean_w, gpu.samples, gpu.util_mean) == (None, None, 2, 50.0)


def test_gpus_are_listed_by_node_then_bus_id() -> None:
    found = gpu_stats(
        [
            sample(0, gpu="GPU-z", pci="0:1A", node="n2"),
            sample(0, gpu="GPU-y", pci="0:3B"),
            sample(0, gpu="GPU-x", pci="0:1A"),
        ]
    )
    assert [(g.node, g.gpu) for g in found] == [("n1", "GPU-x"), ("n1", "GPU-y"), ("n2", "GPU-z")]


def test_advice_names_idle_gpus_small_memory_and_steps_redone() -> None:
    busy = gpu_stats(sample(t, gpu="GPU-b", util=90) for t in (0, 30, 60))
    idle = gpu_stats(sample(t, gpu="GPU-i", util=2, pci="0:5E") for t in (0, 30, 60))
    lost = AttemptSummary(0, "PREEMPTED", "preempted", None, None, 0, 60, "n1", steps_lost=17)
    said = advise([lost], [*busy, *idle])
    assert said[0].startswith("1 of 2 GPU(s) averaged under 10 % busy (n1/0:5E)")
    assert "under a quarter of its memory" in said[1]  # 1 GiB of 40 on both
    assert said[2].startswith("17 step(s) were trained again after requeues")
    # One sample says too little: that GPU is neither idle nor "small", so nothing is said.
    assert advise([], [*busy, *gpu_stats([sample(0, gpu="GPU-c", util=0)])]) == []


#: sacct -D of job 9: preempted after 2 minutes, then run to the end on another node.
TWO_ATTEMPTS = (
    "9|PREEMPTED|0:0|2026-11-28T10:00:00|2026-11-28T10:00:05|2026-11-28T10:02:05"
    "|00:02:00|n1|None|01:00:00|2|00:00:30|cpu=2,mem=8G,node=1,gres/gpu=4|\n"
    "9.batch|CANCELLED|0:15|x|x|x|x|n1||||00:00:30||cpu=00:00:30,mem=1G\n"
    "9|COMPLETED|0:0|2026-11-28T10:02:05|2026-11-28T10:03:05|2026-11-28T10:08:05"
    "|00:05:00|n2|None|01:00:00|2|00:01:30|cpu=2,mem=8G,node=1,gres/gpu=4|\n"
    "9.batch|COMPLETED|0:0|x|x|x|x|n2||||00:01:30||cpu=00:01:30,mem=1.5G\n"
)


def test_report_of_a_preempted_and_resumed_job(
    env: Env, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remember(env, "9", tmp_path / "logs", name="trainer")  # job dir: tmp_path

    slurm.attempt_lines["9"] = TWO_ATTEMPTS
    Ledger(tmp_path, 0).append(
        "checkpoint_committed", step=40, seconds=0.4, path="x", reason="periodic"
    )
    Ledger(tmp_path, 0).append(
        "attempt_end", reason="preempted", exit_code=143, requeued=True, last_step=52,
        committed_step=40, steps_lost=12,
    )  # fmt: skip
    Ledger(tmp_path, 1).append(
        "attempt_end", reason="success", exit_code=0, requeued=False, last_step=100,
        committed_step=None, steps_lost=None,
    )  # fmt: skip
    lines = [sample(t, util=95) for t in range(0, 120, 30)] + [
        sample(t, util=1, gpu="GPU-b") for t in range(0, 120, 30)
    ]
    (tmp_path / jobdir.GPU_METRICS).write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + "{torn"
    )

    out = run(env, "report", "9")
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert text.startswith("job 9 'trainer' (tier low): COMPLETED after 2 attempts\n")
    rows = [line.split() for line in text.splitlines() if line.startswith(("  0 ", "  1 "))]
    # attempt, state, ended, waited, ran, nodes, nodes x GPUs each, steps
    # (last/committed/lost), checkpoints
    assert rows[0] == ["0", "PREEMPTED", "preempted", "0:05", "2:00", "n1", "1x4", "52/40/12", "1"]
    assert rows[1][:7] == ["1", "COMPLETED", "success", "1:00", "5:00", "n2", rows[1][6]]
    assert rows[1][7:] == ["100/-/-", "0"]
    assert "n1 GPU-a (0:3B): util 95 % [95-95]" in text
    assert "energy: 0.020 kWh on 2 GPU(s), as sampled" in text  # 2 GPUs x 300 W x 120 s
    assert "1 of 2 GPU(s) averaged under 10 % busy" in text
    assert "12 step(s) were trained again after requeues" in text
    # From sacct: 4 GPUs x 7 minutes; 120 CPU-s of 2 CPUs x 420 s; the biggest step's memory
    assert "GPU-hours: 0.47 (7:00 run)" in text
    assert "CPU efficiency: 14% of the time of 2 CPUs" in text
    assert "memory: peak 1.5 GiB of 8.0 GiB asked (19%)" in text
    assert "time limit: the longest attempt ran 5:00 of 1:00:00 (8%)" in text
    assert "ask for about 10:00 (resources.time)" in text
    assert "ask for about 3.0 GiB (resources.mem)" in text
    assert "CPUs:" not in text  # 2 CPUs idle are not worth a line
    data = json.loads(run(env, "report", "9", "--json").stdout)
    assert [a["queued_s"] for a in data["attempts"]] == [5, 60]
    use = data["usage"]
    assert (use["ran_s"], use["cpus"], use["mem_peak"], use["mem_asked"]) == (
        420,
        2,
        round(1.5 * (1 << 30)),
        8 << 30,
    )
    assert round(use["gpu_hours"], 4) == round(4 * 420 / 3600, 4)
    assert round(use["cpu_efficiency"], 4) == round(120 / 840, 4)
    assert data["steps_lost"] == 12
    assert data["gpu_note"] is None
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert hpclaunch.Session().job("9").report().to_dict() == data


def test_report_without_samples_says_why_and_an_unknown_job_is_an_error(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    remember(env, "9", tmp_path / "logs", name="trainer")
    Ledger(tmp_path, 0).append("gpu_monitor_off", node="n1", reason="nvmlInit failed")
    out = run(env, "report", "9")
    assert out.exit_code == 0, out.output
    assert "GPUs: no samples (nvmlInit failed)" not in out.stdout  # the node is named
    assert "GPUs: no samples (n1: nvmlInit failed)" in out.stdout
    assert_clean_error(run(env, "report", "404"), 1, "neither in the hpclaunch history")


def test_the_html_page_draws_every_attempt_and_gpu_and_escapes_what_it_shows(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    from html.parser import HTMLParser

    remember(env, "9", tmp_path / "logs", name="<script>alert(1)</script>")

    slurm.attempt_lines["9"] = TWO_ATTEMPTS
    start = datetime.fromisoformat("2026-11-28T10:00:05").timestamp()
    Ledger(tmp_path, 0).append(
        "checkpoint_committed", step=40, seconds=0.4, path="x", reason="", time=start + 60
    )
    gpus = (("GPU-a", "0:3B"), ("GPU-b", "0:5E"))
    lines = [sample(start + t, gpu=g, pci=p) for g, p in gpus for t in range(0, 600, 30)]
    (tmp_path / jobdir.GPU_METRICS).write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    page.write_text("an older page, readable by all")
    page.chmod(0o644)
    out = run(env, "report", "9", "--html", str(page))
    assert out.exit_code == 0, out.output
    assert page.stat().st_mode & 0o777 == 0o600

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[tuple[str, dict[str, str | None]]] = []
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.found.append((tag, dict(attrs)))

        def handle_data(self, data: str) -> None:
            self.text.append(data)

    tags = Tags()
    html = page.read_text()
    tags.feed(html)
    names = [tag for tag, _ in tags.found]
    assert "script" not in names  # the hostile name is text, not a tag
    assert "<script>alert(1)</script>" in "".join(tags.text)
    assert not any(a.get("src") or a.get("href") for _, a in tags.found)  # nothing fetched
    spans = [(a["class"], a["data-attempt"]) for t, a in tags.found if t == "rect"]
    assert spans == [("pending", "0"), ("running", "0"), ("pending", "1"), ("running", "1")]
    ticks = [a["class"] for t, a in tags.found if t == "line"]
    assert sorted(ticks) == ["checkpoint", "end", "end"]
    lines_drawn = [a for t, a in tags.found if t == "polyline"]
    assert len(lines_drawn) == 6  # utilisation, memory and power of 2 GPUs
    assert all(len((a["points"] or "").split()) == 20 for a in lines_drawn)
    # attempts, use and GPUs, each table with a header
    assert names.count("tr") == 1 + 2 + 1 + 1 + 1 + 2
    assert [a for t, a in tags.found if t == "tr" and a.get("class") == "usage"]
    assert "1.5 GiB / 8.0 GiB (19%)" in html
    assert "14% of 2 CPUs" in html


def _sweep_status(tasks: list[TaskStatus]) -> SweepStatus:
    record = SweepRecord(
        sweep_id="5e1f" * 8,
        name="lr-<sweep>",
        site="local",
        job_dir="/jobs/s",
        log_dir="/jobs/s",
        params_file="/jobs/s/sweep-params.jsonl",
        points=len(tasks),
        submitted_at="2026-11-28T10:00:00+00:00",
        tier="low",
        qos="low",
        arrays=(SweepArray("10", 0, len(tasks)),),
    )
    return SweepStatus(record, tuple(tasks))


def test_a_sweeps_report_draws_the_metric_against_each_parameter() -> None:
    from html.parser import HTMLParser

    lrs, opts = [1e-5, 1e-4, 1e-3, 1e-2], ["adam", "sgd"]
    tasks = [
        TaskStatus(
            i, f"10_{i}", "COMPLETED", {"lr": lr, "opt": opts[i % 2]}, {"loss": 1.0 - i / 10}
        )
        for i, lr in enumerate(lrs)
    ]
    tasks.append(TaskStatus(4, "10_4", "FAILED", {"lr": 0.1, "opt": "adam"}, None))
    report = SweepReport(_sweep_status(tasks))
    assert (report.parameters, report.metrics, report.chosen_metric) == (
        ["lr", "opt"],
        ["loss"],
        "loss",
    )
    lr, opt = report.scatters()
    assert lr.log_x  # 1e-5 to 1e-2: a log axis
    assert [d.x for d in lr.dots] == [20.0, 246.7, 473.3, 700.0]  # evenly apart on it
    assert [d.y for d in lr.dots] == sorted(d.y for d in lr.dots)  # loss falls: y grows down
    assert [t for _, t in opt.ticks] == ["adam", "sgd"]
    assert not opt.log_x
    text = report.lines()
    assert text[0] == f"sweep {'5e1f' * 8} 'lr-<sweep>': 5 points; COMPLETED 4, FAILED 1"
    assert text[1].split() == ["POINT", "JOB", "STATE", "lr", "opt", "loss"]
    assert text[-1].split() == ["4", "10_4", "FAILED", "0.1", "adam", "-"]

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.text = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)

        def handle_data(self, data: str) -> None:
            self.text += data

    page = Tags()
    page.feed(report.html(now=0))
    assert page.tags.count("circle") == 8  # 4 tasks with a loss, on 2 scatters
    assert page.tags.count("tr") == 1 + 5
    assert page.tags.count("script") == 1  # the table's sorting, inline
    assert "lr-<sweep>" in page.text  # escaped, shown as text
    # Issue 45: each point says its values, and the axes say what they are.
    assert "lr=1e-05, loss=" in page.text
    assert page.text.count("loss ") >= 4  # the y axis's top and bottom on both scatters
    assert SweepReport(_sweep_status(tasks), metric="nope").scatters() == []


def test_report_takes_a_sweep_id_and_a_bad_one_is_a_clean_error(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2]}}\n"
    )
    swept = run(env, "sweep", "--no-check", str(spec))
    assert swept.exit_code == 0, swept.output
    sweep_id = swept.stdout.strip()
    out = run(env, "report", sweep_id[:8])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"sweep {sweep_id} 'sw': 2 points;")
    data = json.loads(run(env, "report", sweep_id, "--json").stdout)
    assert (data["sweep_id"], len(data["tasks"])) == (sweep_id, 2)
    # Issue 45: the array's job id is the sweep (it said "has not started").
    record = find_sweep(sweep_id, sweeps_dir(env))
    out = run(env, "report", record.arrays[0].job_id)
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"sweep {sweep_id} 'sw': 2 points;")
    assert_clean_error(run(env, "report", "nosuchsweep"), 1, "nosuchsweep")
    assert run(env, "report", "9", "--metric", "loss").exit_code == 2  # --metric: sweeps only


def test_a_sweep_id_whose_prefix_is_all_digits_is_a_sweep_not_a_job(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    """An 8-character prefix of a sweep id is all decimal digits one time in 40: it read as
    a job id and the report failed (seen once in the unit suite)."""
    from dataclasses import replace

    from hpclaunch.store.sweeps import save_sweep

    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\n"
        "sweep: {method: grid, parameters: {x: [1, 2]}}\n"
    )
    swept = run(env, "sweep", "--no-check", str(spec))
    assert swept.exit_code == 0, swept.output
    record = find_sweep(swept.stdout.strip(), sweeps_dir(env))
    digits = "12345678" + record.sweep_id[8:]
    (sweeps_dir(env) / f"{record.sweep_id}.json").unlink()
    save_sweep(replace(record, sweep_id=digits), sweeps_dir(env))
    out = run(env, "report", "12345678")
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"sweep {digits} 'sw': 2 points;")


def test_a_gpus_line_breaks_where_a_requeue_left_no_sample() -> None:
    from hpclaunch.report.charts import metric_chart

    times = [0, 30, 60, 700, 730]  # a requeue's wait between 60 and 700
    chart = metric_chart([sample(t) for t in times], "util", "Utilisation", "%", 0, 730, 100)
    assert chart is not None
    [line] = chart.series
    assert [len(part.split()) for part in line.segments] == [3, 2]


def test_every_committed_checkpoint_counts_the_trainers_own_schedule_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: periodic commits (step-340..360 on disk) showed as 0 and drew no tick."""
    from hpclaunch import runtime
    from hpclaunch.ops.report import _commits
    from hpclaunch.report.attempts import summarise_attempts
    from hpclaunch.slurm.jobs import Attempt, JobState
    from hpclaunch.supervise.ledger import Ledger, read_ledger

    monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_ATTEMPT", "0")
    for step in (340, 350, 360):
        runtime.commit_checkpoint(step, lambda d: (d / "w.bin").write_bytes(b"w"))
    # The sidecar logs the last one again when it ends the launch (it was asked for then).
    Ledger(tmp_path, 0).append("checkpoint_committed", step=360, seconds=0.1, path="x")
    ledger = read_ledger(tmp_path)
    assert [e["event"] for e in ledger].count("checkpoint_periodic") == 3
    attempt = Attempt(0, JobState.COMPLETED, elapsed="00:09:59", nodes="n1")
    [summary] = summarise_attempts([attempt], ledger)
    assert summary.checkpoints == 3
    assert [step for _, step in _commits(ledger)] == [340, 350, 360]


def test_an_elastic_jobs_report_shows_each_attempts_size_steps_and_throughput() -> None:
    """Issue 45: the report of an elastic job did not show what changed."""
    from hpclaunch.ops.report import _progress
    from hpclaunch.report.attempts import summarise_attempts
    from hpclaunch.report.job import JobReport
    from hpclaunch.slurm.jobs import Attempt, JobState

    def attempt(index: int, start: str, end: str, tres: str) -> Attempt:
        return Attempt(index, JobState.COMPLETED, start=start, end=end, nodes="n1",
                       elapsed="00:01:00", tres=tres)  # fmt: skip

    attempts = [
        attempt(0, "2026-01-01T00:00:00", "2026-01-01T00:01:00", "cpu=2,node=1,gres/gpu=2"),
        attempt(1, "2026-01-01T00:01:10", "2026-01-01T00:02:10", "cpu=4,node=2,gres/gpu=4"),
    ]
    t0 = datetime.fromisoformat("2026-01-01T00:00:00").timestamp()
    ledger = [
        {"event": "attempt_start", "attempt": 0, "time": t0, "progress_step": None},
        {"event": "attempt_end", "attempt": 0, "time": t0 + 60, "last_step": 30,
         "world_size": 2, "samples_per_s": 120.0, "reason": "resized"},
        {"event": "attempt_start", "attempt": 1, "time": t0 + 70, "progress_step": 30},
        {"event": "attempt_end", "attempt": 1, "time": t0 + 130, "last_step": 90,
         "world_size": 4, "samples_per_s": 230.5, "reason": "success",
         "global_batch": 70, "lr_factor": 3.87234},  # batch: adaptive
    ]  # fmt: skip
    summaries = summarise_attempts(attempts, ledger)
    assert [a.size for a in summaries] == ["1 node x 2 GPUs", "2 nodes x 2 GPUs"]
    report = JobReport("7", "elastic", None, None, "COMPLETED", None, tuple(summaries), (),
                       None, None, (), progress=_progress(ledger))  # fmt: skip
    text = "\n".join(report.lines())
    assert (
        "throughput: attempt 0: 2 ranks, 120 samples/s; "
        "attempt 1: 4 ranks, 230.5 samples/s, batch 70, lr x3.87" in text
    )
    page = report.html(now=t0 + 200)
    assert "on 1 node x 2 GPUs" in page
    assert "on 2 nodes x 2 GPUs" in page
    assert "Training step" in page
    assert "attempt 1: 4 ranks" in page  # the step line of the second size


def test_the_report_names_what_the_retry_policy_did() -> None:
    """Issue 45: the report never named the retry policy (the attempts showed a user_error
    and a requeue)."""
    from hpclaunch.ops.report import _retries
    from hpclaunch.report.job import JobReport

    first = "user_error (exit code 3): retry 1 of 2 in 20 s"
    ledger = [
        {"event": "retry_scheduled", "attempt": 0, "why": first},
        {"event": "retry_skipped", "attempt": 1, "why": "exit code 4 is not in retry.when"},
    ]
    report = JobReport("7", "r", None, None, "FAILED", None, (), (), None, None, (),
                       retries=_retries(ledger))  # fmt: skip
    text = "\n".join(report.lines())
    assert "retry: policy:\n  - attempt 0: user_error (exit code 3): retry 1 of 2 in 20 s\n" in text
    assert "  - attempt 1: not retried: exit code 4 is not in retry.when" in text
    assert report.to_dict()["retries"] == list(report.retries)


def test_the_trainers_own_commits_are_an_attempts_committed_step() -> None:
    """Issue 45 (a fresh walk): 3 periodic commits, and STEPS read "10/-/-"."""
    from hpclaunch.report.attempts import summarise_attempts
    from hpclaunch.slurm.jobs import Attempt, JobState

    attempt = Attempt(index=0, state=JobState.COMPLETED, exit_code=0, elapsed="00:00:04")
    ledger = [
        {"event": "checkpoint_periodic", "attempt": 0, "step": 3},
        {"event": "checkpoint_periodic", "attempt": 0, "step": 9},
        {"event": "checkpoint_periodic", "attempt": 0, "step": 6},
        {"event": "attempt_end", "attempt": 0, "reason": "success", "last_step": 10},
    ]
    [summary] = summarise_attempts([attempt], ledger)
    assert (summary.last_step, summary.committed_step, summary.checkpoints) == (10, 9, 3)
    said = {**ledger[-1], "committed_step": 6}  # the sidecar's word, where it gave one
    [summary] = summarise_attempts([attempt], [*ledger[:3], said])
    assert summary.committed_step == 6
