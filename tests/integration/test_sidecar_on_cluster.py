"""The sidecar on the real cluster: preemption → checkpoint → requeue → exact resume.

All jobs are submitted at once (module fixture) and checked by separate tests, so the
module takes about as long as its slowest job (the time-limit one, ~3 min):

* torchrun, 2 nodes, tier low, holding a GPU per node: preempted by a critical job that
  takes every GPU of its nodes. Slurm sends B:USR1 at once (preempt_send_user_signal), the
  sidecar requests a checkpoint, the trainer (examples/ddp_train.py) commits, the sidecar
  requeues, attempt 1 resumes from the committed step; final weights equal an uninterrupted
  twin's bit for bit.
* srun launcher, 2 nodes: the same flow with the warning delivered by
  ``scancel --batch --signal=USR1`` (what ``--signal=B:USR1`` does).
* a command that raises: not requeued, ``user_error`` with the traceback's last line.
* srun launcher whose venv is slow to activate, warned (USR1) meanwhile: the batch
  script's trap keeps the warning for the sidecar, which requeues; attempt 1 completes.
* a medium-tier job with a 20 s signal lead and max_requeues 1: checkpoints and requeues
  once at the time limit, then the cap stops it. Its limit is cut once its trainer reports
  a step (:func:`_cut_time_limit`), so the warning never comes before the trainer started.
* a low-tier command on one of torchrun's nodes, preempted by torchrun's preemptor while
  its venv activates (until Slurm ends the attempt), so that its batch script still runs
  when the grace ends: Slurm 24.11+ then runs it once more after attempt 1 completes, and
  the sidecar refuses that run (``restart_refused``, requeue.py's docstring); the command
  ran once.
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpclaunch.slurm.cluster import expand_hosts
from hpclaunch.slurm.times import parse_time
from hpclaunch.supervise.control import read_step
from hpclaunch.supervise.ledger import read_ledger
from tests.webhook import Webhook, webhook_server

from .browser import CHROMIUM, browser, console_errors
from .cluster import SlurmCluster
from .conftest import TORCHRUN_MEM, Cli, squeue, wait_progress

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
# The cli backend only: what a backend decides for these jobs is the job it submits
# (test_backends_submit_alike_on_cluster) and its reads and acts on the queue
# (test_backends_agree_on_cluster); the rest happens in the job, backend or not.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.exclusive]

STEPS = 150
TRAIN = ["python", "examples/ddp_train.py", "--steps", str(STEPS), "--every", "1000"]
VENV = str(Path(__file__).resolve().parents[2] / ".venv")
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@dataclass
class Jobs:
    cli: Cli
    shared: Path  # a directory every node sees (not /tmp)
    ids: dict[str, str]
    preemptor: str = ""
    release: tuple[int, int] = (0, 0)  # the cluster's Slurm release
    # Webhook servers on loopback: "lab" takes every notice; "flaky" refuses the nodes'.
    hooks: dict[str, Webhook] = field(default_factory=dict)
    # What went wrong in a helper thread (_cut_time_limit), for the test that needs it.
    thread_errors: dict[str, str] = field(default_factory=dict)

    def job_dir(self, name: str) -> Path:
        return Path(self.cli.submitted()[self.ids[name]]["job_dir"])

    def events(self, name: str) -> dict[str, Any]:
        out = self.cli("events", self.ids[name], "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert isinstance(data, dict)
        return data

    def state(self, name: str) -> str:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", self.ids[name], "-o", "State"],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = out.stdout.split()
        return lines[0] if lines else "UNKNOWN"

    def wait_final(self, name: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(name)
            # squeue is the truth while the job lives: a requeued job is PENDING again
            queued = subprocess.run(
                ["squeue", "-h", "-j", self.ids[name], "-o", "%T"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            if not queued and state.split()[0] in FINAL:
                return state
            assert time.monotonic() < deadline, f"{name} ({self.ids[name]}) still {state}"
            time.sleep(0.5)

    def wait_setting_up(self, name: str, timeout: float = 60) -> None:
        """Until attempt 0's batch script has started (its first log line)."""
        log = self.job_dir(name) / "attempt-0.log"
        deadline = time.monotonic() + timeout
        while not (log.exists() and "hpclaunch: job" in log.read_text()):
            assert time.monotonic() < deadline, f"{name} never started"
            time.sleep(0.1)

    def wait_progress(self, name: str, step: int, timeout: float = 60) -> None:
        wait_progress(self.job_dir(name), step, timeout)


def _submit(cli: Cli, spec_dir: Path, key: str, **fields: Any) -> str:
    spec = {"name": f"it-sc-{key}-{uuid.uuid4().hex[:6]}", "project": "research", **fields}
    path = spec_dir / f"{key}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = cli("submit", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def jobs(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory, backend: str
) -> Iterator[Jobs]:
    tmp = tmp_path_factory.mktemp("sidecar")
    cli = Cli(tmp / "state")
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)
    # Notifications (issue 32): the webhooks' URLs saved as a user saves them.
    stack = contextlib.ExitStack()
    hooks = {name: stack.enter_context(webhook_server()) for name in ("lab", "flaky")}
    hooks["flaky"].refuse_from = ("n1", "n2", "n3", "n4")  # as if the nodes had no route
    cli.env["XDG_CONFIG_HOME"] = str(tmp / "config")
    for name, hook in hooks.items():
        added = cli("notify", "add", name, input_text=hook.url + "\n")
        assert added.returncode == 0, added.stderr

    def train(key: str) -> list[str]:
        out = shared / key
        return [*TRAIN, "--log-dir", str(out), "--hash-out", str(out / "final.sha256")]

    # GPUs so that the critical job must preempt it; tier low: preemptible, grace 10 s.
    torchrun = _submit(
        cli,
        tmp,
        "torchrun",
        command=train("torchrun"),
        launcher="torchrun",
        tier="low",
        venv=VENV,
        # 10 minutes: warned 120 s before the limit (tier low), it must reach step 30 first
        resources={"nodes": 2, "gpus_per_node": 1, "time": "00:10:00", "mem": TORCHRUN_MEM},
        notify={"webhook": "lab"},
    )
    # The other low-tier jobs keep off torchrun's nodes: to place the critical job, Slurm
    # (cons_tres _run_now) removes preemptable jobs one by one until it fits and then
    # preempts every removed one on its nodes, needed or not (job_test.c, 25.11): the
    # likely cause of a CI run where the time-limit job got a preemption's warning.
    away = {"--exclude": _nodes_of(torchrun)}
    common = {"venv": VENV, "resources": {"nodes": 2, "time": "00:10:00", "mem": TORCHRUN_MEM}}
    ids = {
        "torchrun": torchrun,
        "twin": _submit(cli, tmp, "twin", command=train("twin"), launcher="torchrun", **common),
        "srun": _submit(
            cli,
            tmp,
            "srun",
            command=train("srun"),
            launcher="srun",
            tier="low",
            sbatch_extra=away,
            **common,
        ),
        "raises": _submit(
            cli,
            tmp,
            "raises",
            command=["python", "-c", "import sys; print('x'); raise ValueError('it-boom')"],
            launcher="srun",
            tier="low",
            venv=VENV,
            sbatch_extra=away,
            resources={"time": "00:02:00", "mem": "100M"},
            notify={"webhook": "flaky", "events": ["failed", "completed"]},
        ),
        # Its venv's activate lasts until the warning came: it lands while the script sets up.
        "setup": _submit(
            cli,
            tmp,
            "setup",
            command=train("setup"),
            launcher="srun",
            tier="low",
            venv=str(_slow_venv(shared)),
            sbatch_extra=away,
            resources={"time": "00:05:00", "mem": TORCHRUN_MEM},
        ),
        "timelimit": _submit(
            cli,
            tmp,
            "timelimit",
            command=[*train("timelimit")[:3], "100000", *train("timelimit")[4:]],
            launcher="torchrun",
            # The default tier: issue 27 found only the low tier warned before the limit.
            tier="medium",
            venv=VENV,
            sbatch_extra=away,
            # Slurm warns once the time left is at most lead + 30 s, at a check every 30 s
            # (job_mgr.c, send_job_warn_signal). The limit is cut to that once the trainer
            # runs (_cut_time_limit): with 1 minute from the start, the warning came (22 s
            # before the end, the check late under load) before torchrun's trainer had
            # printed a line, and a medium-tier job with no progress is not requeued (CI
            # of stop 38).
            checkpoint={"signal_lead_time": 20, "max_requeues": 1},
            resources={"time": "10", "mem": TORCHRUN_MEM},
        ),
    }
    # Placed beside torchrun, so that torchrun's preemptor (every GPU of its nodes) preempts
    # it as well (it holds a GPU so that it must), while its venv's activate lasts until
    # Slurm ends the attempt: its batch script is still running when the grace is over
    # (Slurm acts on that at its next scheduling pass, seen 15 s after the warning). A
    # sidecar stopping in time cannot be made to miss the grace: it exits before its end.
    ids["grace"] = _submit(
        cli,
        tmp,
        "grace",
        command=["python", "-c", _RUNS, str(shared / "grace-runs")],
        launcher="srun",
        tier="low",
        venv=str(_slow_venv(shared, "grace-venv", linger=300)),
        sbatch_extra={"--nodelist": expand_hosts(_nodes_of(torchrun))[0]},
        resources={"gpus_per_node": 1, "time": "00:05:00", "mem": "100M"},
    )
    jobs = Jobs(cli, shared, ids, release=slurm_cluster.release, hooks=hooks)
    cutter = threading.Thread(target=_cut_time_limit, args=(jobs, "timelimit"), daemon=True)
    cutter.start()
    try:  # a set-up that fails still cancels its jobs (see test_containers_on_cluster)
        # The set-up job first: its venv's activate waits for this warning.
        jobs.wait_setting_up("setup")
        subprocess.run(["scancel", "--batch", "--signal=USR1", ids["setup"]], check=True)
        # Interrupt both resumable jobs mid-run, each as soon as it reached step 30, before any
        # test waits. (One after the other, the srun job had once trained all its steps by the
        # time the torchrun job's wait was over: 22.05 beside the exclusive pass, run 21.)

        def preempt_torchrun() -> None:
            jobs.preemptor = _preempt(ids["torchrun"])

        def warn_srun() -> None:
            # What --signal=B:USR1 delivers at preemption (preempt_send_user_signal) or time limit.
            subprocess.run(["scancel", "--batch", "--signal=USR1", ids["srun"]], check=True)

        jobs.wait_setting_up("grace")  # started when torchrun's preemptor comes
        _at_step(jobs, 30, {"torchrun": preempt_torchrun, "srun": warn_srun})
        yield jobs
    finally:
        subprocess.run(["scancel", jobs.preemptor], check=False, capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)
        subprocess.run(["scancel", *ids.values()], check=False, capture_output=True)
        stack.close()


#: Appends its attempt to ``argv[1]``; attempt 0 then sleeps (until Slurm ends it),
#: attempt 1 exits 0 at once.
_RUNS = (
    "import os, sys, time; attempt = os.environ['HPCLAUNCH_ATTEMPT']; "
    "open(sys.argv[1], 'a').write(attempt + ' '); attempt == '0' and time.sleep(600)"
)


def _at_step(jobs: Jobs, step: int, actions: dict[str, Callable[[], None]]) -> None:
    """Run each job's action as soon as its trainer reported ``step``."""
    left = dict(actions)
    progress = {name: jobs.job_dir(name) / "control" / "progress.json" for name in actions}
    deadline = time.monotonic() + 300  # 120 s fell short under load (run 24)
    while left:
        for name in list(left):
            if (read_step(progress[name]) or 0) >= step:
                left.pop(name)()
        assert time.monotonic() < deadline, f"{sorted(left)} never reached step {step}"
        time.sleep(0.1)


def _cut_time_limit(jobs: Jobs, name: str) -> None:
    """Bring ``name``'s time limit near, as ``scontrol update TimeLimit`` does, once each
    attempt runs: the first once its trainer reported a step (so the attempt has progress
    to keep, however long torchrun took to start), to 70 to 130 s from then; the second,
    while Slurm holds it after the requeue, to 1 minute. Slurm warns at most lead + 30 s
    before the new end (squeue's ``%L`` and the sidecar follow the update). Errors go to
    ``jobs.thread_errors[name]``."""
    job_id, job_dir = jobs.ids[name], jobs.job_dir(name)

    def limit(minutes: int) -> None:
        argv = ["scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"]
        subprocess.run(argv, capture_output=True, text=True, check=True)

    try:
        deadline = time.monotonic() + 600
        while (read_step(job_dir / "control" / "progress.json") or 0) < 1:
            assert time.monotonic() < deadline, "attempt 0 reported no step in 600 s"
            time.sleep(0.2)
        elapsed = parse_time(squeue(job_id, "%M"))
        limit(math.ceil((elapsed + 70) / 60))
        while not _ended(job_dir, 0):
            assert time.monotonic() < deadline, "attempt 0 did not end in 600 s"
            time.sleep(0.2)
        limit(1)
    except Exception as exc:  # the test reads it; a thread's exception would be lost
        jobs.thread_errors[name] = f"{type(exc).__name__}: {exc}"


def _ended(job_dir: Path, attempt: int) -> bool:
    """Whether the job's ledger has ``attempt``'s end."""
    ledger = read_ledger(job_dir)
    return any(e["event"] == "attempt_end" and e["attempt"] == attempt for e in ledger)


def _slow_venv(shared: Path, name: str = "slow-venv", linger: float = 0) -> Path:
    """A venv whose activate takes long (like modules or conda on a busy cluster), then
    activates the real one. On attempt 0 it lasts until the batch script's trap has caught
    the test's warning (it sets ``hpclaunch_early``; 120 s at most), and ``linger`` seconds
    more: a fixed 5 s was once over before a loaded cluster delivered it (run 27), and the
    test saw no early signal."""
    venv = shared / name
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then\n'
        '  for _ in $(seq 600); do [ -n "${hpclaunch_early:-}" ] && break; sleep 0.2; done\n'
        f"  sleep {linger}\n"
        "fi\n"
        f". {shlex.quote(VENV)}/bin/activate\n"
    )
    return venv


def _steps(shared: Path, key: str, attempt: int) -> list[int]:
    path = shared / key / f"steps-attempt-{attempt}.log"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _by(events: list[dict[str, Any]], attempt: int) -> dict[str, dict[str, Any]]:
    return {e["event"]: e for e in events if e["attempt"] == attempt}


def _assert_exact_resume(jobs: Jobs, key: str, *, by_slurm: bool = False) -> None:
    data = jobs.events(key)
    ledger = data["ledger"]
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert first["signal_received"]["signal"] == "USR1"
    assert first["checkpoint_requested"]["reason"] == "preemption"
    committed = first["checkpoint_committed"]["step"]
    # A job Slurm preempts is requeued by Slurm from 24.11 on (a scontrol requeue as well
    # made 25.11 run it a third time); the sidecar requeues it on 22.05 (requeue.py).
    requeued = "requeue_by_slurm" if by_slurm else "requeue_issued"
    assert first[requeued]["target"] == jobs.ids[key], first
    assert first["attempt_end"]["reason"] == "preempted"
    assert first["attempt_end"]["steps_lost"] == 0
    assert second["attempt_start"]["progress_step"] == committed
    assert second["attempt_end"]["reason"] == "success"
    # rank 0's step logs: attempt 0 trained 1..committed, attempt 1 committed+1..STEPS
    before, after = _steps(jobs.shared, key, 0), _steps(jobs.shared, key, 1)
    assert before == list(range(1, committed + 1))
    assert after == list(range(committed + 1, STEPS + 1))
    assert 0 < committed < STEPS
    # Slurm saw two attempts (sacct -D), or three where it ran the job once more after it
    # completed (attempt 0 outlived its grace: requeue.py) and the sidecar refused that run
    states = [a["state"] for a in data["attempts"]]
    refused = [e["attempt"] for e in ledger if e["event"] == "restart_refused"]
    assert refused in ([], [2]), refused
    assert len(states) == 2 + len(refused), (states, refused)
    assert states[-1] == "COMPLETED"


def _nodes_of(job_id: str, timeout: float = 60) -> str:
    """The nodes ``job_id`` runs on (a hostlist), once it runs."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = subprocess.run(
            ["squeue", "-h", "-t", "R", "-j", job_id, "-o", "%N"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if nodes:
            return nodes
        assert time.monotonic() < deadline, f"{job_id} never started"
        time.sleep(0.2)


def _preempt(job_id: str, nodes: int = 2) -> str:
    """Submit a critical job that needs every GPU of ``job_id``'s ``nodes`` nodes; its id."""
    hosts = _nodes_of(job_id)
    argv = ["sbatch", "--parsable", "--qos=critical", "--account=research", f"-N{nodes}"]
    argv += [f"--nodelist={hosts}", "--gres=gpu:4", "--time=1", "--mem=50M"]
    argv += ["--output=/dev/null", "--job-name=it-sc-preemptor", "--wrap=sleep 3"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_torchrun_preempted_by_a_critical_job_resumes_exactly(jobs: Jobs) -> None:
    assert jobs.wait_final("torchrun", 300) == "COMPLETED"  # 120 s fell short under load
    _assert_exact_resume(jobs, "torchrun", by_slurm=jobs.release >= (24, 11))
    assert jobs.wait_final("twin", 60) == "COMPLETED"
    twin = (jobs.shared / "twin" / "final.sha256").read_text()
    assert (jobs.shared / "torchrun" / "final.sha256").read_text() == twin
    _assert_report_of_a_preempted_job(jobs)
    _assert_notices_of_a_preempted_job(jobs)


def _assert_notices_of_a_preempted_job(jobs: Jobs) -> None:
    """Issue 32: each event told once, from the node, to the webhook server on loopback:
    started, preempted (requeued), resumed from its checkpoint, completed with its GPU-hours
    (a run Slurm starts again after the end, the grace quirk, tells nothing)."""
    job = jobs.ids["torchrun"]
    told = [b["hpclaunch"] for b in jobs.hooks["lab"].of_job(job)]
    assert [t["event"] for t in told] == ["started", "preempted", "resumed", "completed"], told
    assert [t["key"] for t in told] == ["start-0", "preempted-0", "start-1", "end"]
    assert told[-1]["gpu_hours"] > 0
    assert all(t["sent_from"].startswith("n") for t in told)
    texts = [b["text"] for b in jobs.hooks["lab"].of_job(job)]
    assert "resuming from step " in texts[2]


def _assert_report_of_a_preempted_job(jobs: Jobs) -> None:
    """The report of the job Slurm preempted for a critical job (its GPUs are not sampled:
    no NVML here; test_report_on_cluster.py has the GPU charts): both attempts, the first
    ended by the preemption, in the text and in the page as headless Chromium loads it."""
    out = jobs.cli("report", jobs.ids["torchrun"], "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    ended = [a["ended"] for a in data["attempts"] if a["ended"] != "restart_refused"]
    assert ended == ["preempted", "success"], data["attempts"]
    assert data["state"] == "COMPLETED"
    assert data["usage"]["gpu_hours"] > 0
    page = jobs.shared / "preempted.html"
    assert jobs.cli("report", jobs.ids["torchrun"], "--html", str(page)).returncode == 0
    if CHROMIUM is None:
        pytest.skip("no chromium here to render the page (apt-get install chromium)")
    dom = browser(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<tr class="attempt">') == len(data["attempts"])
    assert ">preempted<" in dom.stdout
    assert console_errors(dom) == []


def test_srun_launcher_warned_checkpoints_requeues_and_resumes(jobs: Jobs) -> None:
    assert jobs.wait_final("srun", 120) == "COMPLETED"
    _assert_exact_resume(jobs, "srun")
    assert jobs.wait_final("twin", 60) == "COMPLETED"
    twin = (jobs.shared / "twin" / "final.sha256").read_text()
    assert (jobs.shared / "srun" / "final.sha256").read_text() == twin


def test_a_run_slurm_starts_after_the_job_completed_is_refused(jobs: Jobs) -> None:
    """Preempted, and still running when its grace ended, a job is requeued by Slurm
    24.11+ once more after its next run completes (Slurm leaves the preemption's grace flag
    set: requeue.py's docstring). That run launches nothing: the command ran once (attempt
    0 never got past its venv) and the job ends COMPLETED. (22.05 has no such run.)"""
    assert jobs.wait_final("grace", 240) == "COMPLETED"
    assert (jobs.shared / "grace-runs").read_text().split() == ["1"]
    data = jobs.events("grace")
    assert not _by(data["ledger"], 0)  # Slurm ended it in the batch script's set-up
    assert _by(data["ledger"], 1)["attempt_end"]["reason"] == "success"
    states = [a["state"] for a in data["attempts"]]
    if jobs.release < (24, 11):
        assert len(states) == 2, states
        assert "restart_refused" not in {e["event"] for e in data["ledger"]}
        return
    third = _by(data["ledger"], 2)
    assert set(third) == {"restart_refused"}, third
    refused = third["restart_refused"]
    assert (refused["after_attempt"], refused["reason"]) == (1, "success")
    # Slurm accounts the completed run as PREEMPTED (job_complete with GRACE_PREEMPT set).
    assert states == ["PREEMPTED", "PREEMPTED", "COMPLETED"], states
    log = (jobs.job_dir("grace") / "attempt-2.log").read_text()
    assert "already ran the job to its end" in log
    assert "restart_refused" in jobs.cli("events", jobs.ids["grace"]).stdout


def test_user_error_is_not_requeued(jobs: Jobs) -> None:
    assert jobs.wait_final("raises", 60) == "FAILED"
    data = jobs.events("raises")
    end = _by(data["ledger"], 0)["attempt_end"]
    assert end["reason"] == "user_error"
    assert end["requeued"] is False
    assert end["error_line"] == "ValueError: it-boom"
    assert [e for e in data["ledger"] if e["attempt"] != 0] == []
    assert len(data["attempts"]) == 1
    text = jobs.cli("events", jobs.ids["raises"])
    assert "attempt_end reason=user_error" in text.stdout
    assert "ValueError: it-boom" in text.stdout
    # Issue 32: the node could not reach its webhook ("flaky" refuses the nodes): the next
    # command on the login node that looks at the job sends the failure, once.
    flaky = jobs.hooks["flaky"]
    assert [b["hpclaunch"]["event"] for b in flaky.refused] == ["failed"]
    for _ in range(2):
        assert jobs.cli("status", jobs.ids["raises"]).returncode == 0
    (failed,) = flaky.of_job(jobs.ids["raises"])
    assert failed["hpclaunch"]["sent_from"].endswith("(hpclaunch)")
    assert "ValueError: it-boom" in failed["text"]  # the node's notice, with its log tail


def test_a_warning_while_the_script_sets_up_is_handled_by_the_sidecar(jobs: Jobs) -> None:
    """USR1 during the batch script's set-up (its venv's activate is slow): bash used to
    die of it (the job ended FAILED). Its trap keeps it for the sidecar, which records
    ``early_signal``, requeues, and attempt 1 runs to the end."""
    assert jobs.wait_final("setup", 150) == "COMPLETED"
    ledger = jobs.events("setup")["ledger"]
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert first["early_signal"]["signal"] == "USR1"
    assert first["signal_received"]["signal"] == "USR1"
    assert first["attempt_end"]["requeued"] is True
    assert second["attempt_end"]["reason"] == "success"
    assert _steps(jobs.shared, "setup", 1)[-1] == STEPS


def test_time_limit_checkpoints_requeues_once_then_the_cap_holds(jobs: Jobs) -> None:
    """A medium-tier (never preempted) job is warned before its time limit, commits,
    is requeued with no step lost, and resumes; the second time the cap holds."""
    jobs.wait_final("timelimit", 900)
    assert not jobs.thread_errors, jobs.thread_errors
    ledger = jobs.events("timelimit")["ledger"]
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert first["signal_received"]["signal"] == "USR1"
    assert first["checkpoint_requested"]["reason"] == "time_limit", first
    assert first["attempt_end"]["reason"] == "time_limit"
    assert first["attempt_end"]["requeued"] is True, first
    assert first["attempt_end"]["steps_lost"] == 0
    log = (jobs.job_dir("timelimit") / "attempt-0.log").read_text()
    assert "stopped for requeue at step" in log
    assert "(the time limit)" in log
    committed = first["checkpoint_committed"]["step"]
    assert second["attempt_start"]["progress_step"] == committed
    assert "max_requeues (1)" in second["requeue_skipped"]["why"]
    assert second["attempt_end"]["requeued"] is False
    assert not [e for e in ledger if e["attempt"] > 1]
