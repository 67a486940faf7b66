"""hpclaunch.runtime in one process, without torch: requests, commit, verify, resume, prune."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpclaunch import runtime
from hpclaunch.runtime import control, elastic
from hpclaunch.runtime.adapters.hf import SaveOnRequest, resume_checkpoint
from hpclaunch.runtime.adapters.lightning import CheckpointOnRequest, resume_ckpt_path


@pytest.fixture(autouse=True)
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh job dir in the environment, one process, progress throttle reset."""
    for name in ("HPCLAUNCH_CONTROL_DIR", "HPCLAUNCH_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_ATTEMPT", "2")
    monkeypatch.setattr(control, "_PROGRESS", control._Progress())
    monkeypatch.setattr(control, "_WATCHER", control._RequestWatcher())
    monkeypatch.setattr(elastic, "_CURRENT", None)
    return tmp_path


def request(job: Path, **fields: object) -> None:
    data = {"reason": "preemption", "requested_at": time.time(), "deadline": time.time() + 60}
    data.update(fields)
    (job / "control").mkdir(exist_ok=True)
    (job / "control" / "checkpoint-request.json").write_text(json.dumps(data))


def write_files(**files: bytes) -> object:
    def save(tmp: Path) -> None:
        for name, content in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(content)

    return save


def commit(step: int, **kwargs: object) -> Path:
    save = write_files(**{"a.bin": b"A" * step, "sub/b.bin": b"B"})
    return runtime.commit_checkpoint(step, save, **kwargs)  # type: ignore[arg-type]


def test_paths_default_under_the_job_dir(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert runtime.control_dir() == job / "control"
    assert runtime.checkpoint_dir() == job / "checkpoints"
    assert runtime.attempt() == 2
    monkeypatch.setenv("HPCLAUNCH_CHECKPOINT_DIR", str(job / "elsewhere"))
    monkeypatch.setenv("HPCLAUNCH_CONTROL_DIR", str(job / "ctl"))
    assert runtime.checkpoint_dir() == job / "elsewhere"
    assert runtime.control_dir() == job / "ctl"


def test_outside_hpclaunch_each_run_has_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HPCLAUNCH_JOB_DIR")
    monkeypatch.delenv("HPCLAUNCH_ATTEMPT")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.chdir(tmp_path)
    here = runtime.checkpoint_dir()
    assert here.parent.parent == tmp_path / "hpclaunch-local"
    assert here.name == "checkpoints"
    assert f"this run's checkpoints, control files and metrics go to {here.parent}" in (
        capsys.readouterr().err
    )
    assert runtime.control_dir() == here.parent / "control"  # the same run: said once
    assert capsys.readouterr().err == ""
    assert runtime.attempt() == 0
    assert (runtime.rank(), runtime.world_size()) == (0, 1)
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert (runtime.rank(), runtime.world_size()) == (3, 4)


_LOCAL_RUN = """
from hpclaunch import runtime
ckpt = runtime.resume_point()
start = ckpt.step if ckpt else 0
print("start", start)
for step in range(start + 1, start + 151):
    runtime.report_progress(step)
runtime.commit_checkpoint(start + 150, lambda d: (d / "w").write_text("w"))
runtime.report_metrics({"loss": 0.5})
"""


def test_a_second_local_run_starts_over_unless_told_where_to_resume(tmp_path: Path) -> None:
    """Issue 27: run locally twice, the second run said "RESUMED from step 150" from the
    first run's ./checkpoints (and wrote control/ and final-metrics.json into the start
    directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCLAUNCH_", "SLURM_"))}
    env.pop("LOCAL_RANK", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _LOCAL_RUN],
            cwd=tmp_path,
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        )

    first, second = run(), run()
    assert "start 0" in first.stdout
    assert "start 0" in second.stdout  # not the first run's step 150
    runs = sorted((tmp_path / "hpclaunch-local").iterdir())
    assert len(runs) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hpclaunch-local"]  # nothing else
    assert f"go to {runs[0]}" in first.stderr or f"go to {runs[1]}" in first.stderr
    for run_dir in runs:
        assert (run_dir / "checkpoints" / "step-000000150").is_dir()
        assert (run_dir / "final-metrics.json").is_file()
    asked = run(HPCLAUNCH_JOB_DIR=str(runs[0]))  # resuming is asked for by naming the run
    assert "start 150" in asked.stdout
    assert asked.stderr == ""


def test_request_is_seen_then_sticky(job: Path) -> None:
    assert not runtime.checkpoint_requested(min_interval=0)
    request(job, reason="time_limit")
    assert runtime.checkpoint_requested(min_interval=0)
    got = runtime.current_request()
    assert got is not None
    assert got.reason == "time_limit"
    assert got.seconds_left is not None
    assert 50 < got.seconds_left <= 60
    (job / "control" / "checkpoint-request.json").unlink()
    assert runtime.checkpoint_requested(min_interval=0)  # stays True


def test_request_file_is_stat_at_most_every_min_interval(job: Path) -> None:
    assert not runtime.checkpoint_requested(min_interval=3600)
    request(job)
    assert not runtime.checkpoint_requested(min_interval=3600)  # cached "no"
    assert runtime.checkpoint_requested(min_interval=0)


def test_unreadable_request_still_counts(job: Path) -> None:
    (job / "control").mkdir()
    (job / "control" / "checkpoint-request.json").write_text("{not json")
    got = runtime.current_request(min_interval=0)
    assert got is not None
    assert got.reason == "unknown"


def test_should_checkpoint_periodic_and_on_request(job: Path) -> None:
    assert [s for s in range(1, 11) if runtime.should_checkpoint(s, every=4)] == [4, 8]
    assert not any(runtime.should_checkpoint(s) for s in range(1, 5))
    request(job)
    assert runtime.should_checkpoint(5, every=4, min_interval=0)


def test_sync_every_looks_at_requests_only_on_sync_steps(job: Path) -> None:
    request(job)
    got = [s for s in range(1, 13) if runtime.should_checkpoint(s, every=6, sync_every=4)]
    assert got == [4, 6, 8, 12]  # requests on multiples of 4, the schedule on 6 and 12


def test_commit_writes_manifest_and_done_file(job: Path) -> None:
    path = commit(7)
    assert path == job / "checkpoints" / "step-000000007"
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["step"] == 7
    assert manifest["attempt"] == 2
    assert manifest["files"]["a.bin"]["size"] == 7
    assert manifest["files"]["sub/b.bin"]["sha256"] == (
        "df7e70e5021544f4834bbee64a9e3789febc4be81470df629cad6ddb03320a5c"
    )
    assert manifest["hpclaunch_version"] == "0.1.0"
    done = json.loads((job / "control" / "checkpoint-done.json").read_text())
    assert done["step"] == 7
    assert done["path"] == str(path)
    assert done["reason"] == "periodic"
    assert done["committed_at"] >= manifest["created_at"]
    assert done["seconds"] >= 0
    progress = json.loads((job / "control" / "progress.json").read_text())
    assert progress["step"] == 7
    assert not [p for p in (job / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def test_done_file_names_the_request_reason(job: Path) -> None:
    request(job, reason="manual")
    assert runtime.should_checkpoint(3, min_interval=0)
    commit(3)
    done = json.loads((job / "control" / "checkpoint-done.json").read_text())
    assert done["reason"] == "manual"


def test_context_manager_form(job: Path) -> None:
    with runtime.checkpoint(5) as tmp:
        assert tmp is not None
        assert tmp.name.startswith(".tmp-step-000000005-")
        (tmp / "x").write_text("x")
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert ckpt.step == 5
    assert list(ckpt.manifest["files"]) == ["x"]


def test_failed_save_commits_nothing(job: Path) -> None:
    commit(1)

    def save(tmp: Path) -> None:
        (tmp / "half").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        runtime.commit_checkpoint(2, save)
    names = sorted(p.name for p in (job / "checkpoints").iterdir())
    assert names == ["step-000000001"]
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert ckpt.step == 1


def test_resume_point_none_when_empty(job: Path) -> None:
    assert runtime.resume_point() is None
    (job / "checkpoints").mkdir()
    assert runtime.resume_point() is None


def test_incomplete_checkpoints_are_never_taken(job: Path) -> None:
    commit(1)
    root = job / "checkpoints"
    # a kill before the rename: a .tmp- dir with files and even a manifest
    tmp = root / ".tmp-step-000000009-abc"
    tmp.mkdir()
    (tmp / "a.bin").write_text("x")
    # a step dir without manifest
    (root / "step-000000008").mkdir()
    (root / "step-000000008" / "a.bin").write_text("x")
    # a truncated file
    commit(7)
    with (root / "step-000000007" / "a.bin").open("r+b") as fh:
        fh.truncate(3)
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert ckpt.step == 1


def test_hash_mismatch_is_caught_unless_size_only(job: Path) -> None:
    commit(1)
    commit(2)
    (job / "checkpoints" / "step-000000002" / "a.bin").write_bytes(b"XX")  # same size
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert ckpt.step == 1
    ckpt = runtime.resume_point(verify="size")
    assert ckpt is not None
    assert ckpt.step == 2


def test_manifest_step_must_match_the_directory(job: Path) -> None:
    commit(1)
    commit(2)
    os.rename(job / "checkpoints" / "step-000000002", job / "checkpoints" / "step-000000003")
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert ckpt.step == 1


def test_stale_tmp_dirs_are_cleaned(job: Path) -> None:
    root = job / "checkpoints"
    root.mkdir()
    stale = root / ".tmp-step-000000004-dead"
    stale.mkdir()
    old = time.time() - 100
    os.utime(stale, (old, old))
    commit(5)
    assert not stale.exists()
    stale.mkdir()
    os.utime(stale, (old, old))
    runtime.resume_point()
    assert not stale.exists()


def test_prune_keeps_last_k_complete(job: Path) -> None:
    for step in (1, 2, 3, 4, 5):
        commit(step, keep=3)
    names = sorted(p.name for p in (job / "checkpoints").iterdir())
    assert names == ["step-000000003", "step-000000004", "step-000000005"]
    (job / "checkpoints" / "step-000000010").mkdir()  # incomplete: neither kept nor counted
    commit(6, keep=1)
    names = sorted(p.name for p in (job / "checkpoints").iterdir())
    assert names == ["step-000000006", "step-000000010"]
    commit(7, keep=0)  # 0 keeps everything
    assert len(list((job / "checkpoints").iterdir())) == 3


def test_same_step_committed_again_replaces(job: Path) -> None:
    commit(4)
    runtime.commit_checkpoint(4, write_files(**{"new.bin": b"n"}))  # type: ignore[arg-type]
    ckpt = runtime.resume_point()
    assert ckpt is not None
    assert list(ckpt.manifest["files"]) == ["new.bin"]
    assert sorted(p.name for p in (job / "checkpoints").iterdir()) == ["step-000000004"]


def test_progress_is_throttled(job: Path) -> None:
    path = job / "control" / "progress.json"
    runtime.report_progress(1)
    runtime.report_progress(2)
    assert json.loads(path.read_text())["step"] == 1
    runtime.report_progress(3, force=True)
    assert json.loads(path.read_text())["step"] == 3
    runtime.report_progress(4, min_interval=0)
    data = json.loads(path.read_text())
    assert data["step"] == 4
    assert data["attempt"] == 2
    assert data["pid"] == os.getpid()


def test_the_last_step_reported_reaches_the_file_when_the_process_ends(job: Path) -> None:
    """Issue 45: a 10-step run showed step 8 (the last reports fell within min_interval)."""
    code = (
        "from hpclaunch import runtime\n"
        "for step in range(1, 11):\n"
        "    runtime.report_progress(step, total=10)\n"
    )
    env = {**os.environ, "HPCLAUNCH_JOB_DIR": str(job)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    data = json.loads((job / "control" / "progress.json").read_text())
    assert (data["step"], data["total"]) == (10, 10)


def test_progress_with_a_total_says_the_rate_and_the_attempts_end(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``status`` and ``report`` tell the job's end from (hpclaunch/report/eta.py)."""
    monkeypatch.setenv("SLURM_JOB_END_TIME", "1795870000")
    now = [1000.0]
    fake = SimpleNamespace(time=lambda: now[0], monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(control, "time", fake)
    path = job / "control" / "progress.json"
    runtime.report_progress(100, total=1000, force=True)
    first = json.loads(path.read_text())
    assert (first["total"], first["job_end"]) == (1000, 1795870000)
    assert "steps_per_s" not in first  # one report: no rate yet
    now[0] = 1010.0
    runtime.report_progress(150, total=1000, force=True)
    assert json.loads(path.read_text())["steps_per_s"] == 5.0  # 50 steps in 10 s
    runtime.report_progress(160, force=True)  # as commit_checkpoint reports: the total stays
    assert json.loads(path.read_text())["total"] == 1000


def test_progress_with_samples_says_the_throughput_at_this_size(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = job / "control" / "progress.json"
    monkeypatch.setenv("WORLD_SIZE", "2")
    clock = iter([100.0, 110.0, 111.0])
    monkeypatch.setattr(control.time, "monotonic", lambda: next(clock))
    runtime.report_progress(10, samples=160)
    first = json.loads(path.read_text())
    assert (first["samples"], first["world_size"]) == (160, 2)
    assert "samples_per_s" not in first  # no time has passed yet
    runtime.report_progress(20, samples=320)
    assert json.loads(path.read_text())["samples_per_s"] == 16.0  # 160 samples in 10 s
    # A commit's report has no samples: the speed stays (the attempt's end keeps it; the
    # ends of resized attempts on the cluster had none).
    runtime.report_progress(20, force=True)
    kept = json.loads(path.read_text())
    assert (kept["samples_per_s"], kept["world_size"], kept["samples"]) == (16.0, 2, 320)


def test_only_rank_zero_writes(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    runtime.report_progress(1, force=True)
    with runtime.checkpoint(1) as tmp:
        assert tmp is None
    assert not (job / "control").exists()
    assert not any((job / "checkpoints").glob("step-*"))


def test_import_does_not_load_torch() -> None:
    code = (
        "import sys, hpclaunch.runtime, hpclaunch.runtime.adapters.hf, "
        "hpclaunch.runtime.adapters.lightning, hpclaunch.runtime.adapters.torch\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'lightning', 'pydantic', 'yaml')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_hf_logic_saves_and_stops_on_request(job: Path) -> None:
    out = job / "out"
    callback = SaveOnRequest()
    state = SimpleNamespace(global_step=10)
    args = SimpleNamespace(output_dir=str(out))
    control_ = SimpleNamespace(should_save=False, should_training_stop=False)
    callback.on_step_end(args, state, control_)
    assert not control_.should_save
    request(job)
    control._WATCHER._checked_at = float("-inf")
    state.global_step = 11
    callback.on_step_end(args, state, control_)
    assert control_.should_save
    assert not control_.should_training_stop
    (out / "checkpoint-11").mkdir(parents=True)  # what the Trainer's save writes
    (out / "checkpoint-11" / "model.safetensors").write_bytes(b"w" * 10)
    callback.on_save(args, state, control_)
    assert control_.should_training_stop
    done = json.loads((job / "control" / "checkpoint-done.json").read_text())
    assert done["step"] == 11
    assert done["path"] == str(out / "checkpoint-11")
    (out / "checkpoint-12").mkdir()  # a save cut short: no manifest
    assert resume_checkpoint(out) == str(out / "checkpoint-11")


def test_lightning_logic_commits_and_stops(job: Path) -> None:
    saved: list[str] = []

    class Trainer:
        global_step = 0
        should_stop = False

        def save_checkpoint(self, path: str) -> None:
            saved.append(path)
            Path(path).write_bytes(b"ckpt")

    trainer = Trainer()
    callback = CheckpointOnRequest(every=2)
    for step in (1, 1, 2, 2, 3):  # repeated steps: gradient accumulation
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, 0)
    assert len(saved) == 1
    assert not trainer.should_stop
    assert resume_ckpt_path() == str(job / "checkpoints" / "step-000000002" / "model.ckpt")
    request(job)
    control._WATCHER._checked_at = float("-inf")
    trainer.global_step = 4
    callback.on_train_batch_end(trainer, None, None, None, 0)
    trainer.global_step = 5
    callback.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.should_stop
    assert len(saved) == 3
    assert resume_ckpt_path() == str(job / "checkpoints" / "step-000000005" / "model.ckpt")


def test_a_full_disk_commits_nothing_and_says_where_to_resume(job: Path) -> None:
    """The save writes through a link to /dev/full: the kernel's ENOSPC, as on a full disk."""
    import errno

    commit(10)

    def save(tmp: Path) -> None:
        (tmp / "model.pt").symlink_to("/dev/full")
        with open(tmp / "model.pt", "wb") as f:
            f.write(b"x" * 8192)
            f.flush()

    with pytest.raises(runtime.CheckpointWriteError) as caught:
        runtime.commit_checkpoint(20, save)
    error = caught.value
    assert isinstance(error, OSError)
    assert error.errno == errno.ENOSPC
    ckpts = job / "checkpoints"
    assert str(error) == (
        f"[Errno 28] checkpoint of step 20 was not written to {ckpts}: No space left on "
        f"device; nothing was committed, the resume point stays step 10 ({ckpts}/step-000000010)"
    )
    assert isinstance(error.__cause__, OSError)
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-000000010"]
    found = runtime.resume_point()
    assert found is not None
    assert found.step == 10
    failed = json.loads((job / "control" / "checkpoint-failed.json").read_text())
    assert {k: failed[k] for k in ("step", "errno", "errno_name", "resume_step", "attempt")} == {
        "step": 20,
        "errno": errno.ENOSPC,
        "errno_name": "ENOSPC",
        "resume_step": 10,
        "attempt": 2,
    }
    assert failed["reason"] == "periodic"
    # A save that fails for another reason (a bug) is not a write failure: raised as it is.
    with pytest.raises(KeyError):
        runtime.commit_checkpoint(30, lambda tmp: {}["missing"])


def test_a_save_that_raises_something_else_on_a_full_disk_is_a_write_error(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.save reports a full disk as RuntimeError: the filesystem is asked (a probe
    write) before the partial files go; on the cluster's full tmpfs that is shown for real
    (tests/integration/test_faults_on_cluster.py). Here the probe's answer is given."""
    import errno
    import importlib

    ckpt_module = importlib.import_module("hpclaunch.runtime.checkpoint")

    def torch_like(tmp: Path) -> None:
        (tmp / "model.pt").write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1024")

    asked: list[Path] = []

    def refused(root: Path) -> OSError:
        asked.append(root)
        assert any(root.glob(".tmp-*/model.pt"))  # asked while the partial files are there
        return OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt_module, "_refused_write", refused)
    with pytest.raises(runtime.CheckpointWriteError) as caught:
        runtime.commit_checkpoint(5, torch_like)
    assert caught.value.errno == errno.ENOSPC
    assert "No space left on device (the save raised RuntimeError: [enforce fail" in str(
        caught.value
    )
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert asked == [job / "checkpoints"]
    assert not list((job / "checkpoints").iterdir())
