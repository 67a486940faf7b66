"""GPU monitoring (hpclaunch.supervise.gpumon) against a fake NVML module, and ``hpclaunch top``.

The fake has the functions pynvml has, with three GPUs whose NVML index order (0, 1, 2) is
not their PCI bus order (2, 0, 1): CUDA's indices under CUDA_DEVICE_ORDER=PCI_BUS_ID.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpclaunch import jobdir
from hpclaunch.supervise.gpumon import (
    GpuSampler,
    latest_samples,
    read_metrics,
    select_gpus,
    start_detached,
)
from hpclaunch.supervise.ledger import read_ledger
from tests.unit.conftest import Env, remember, run


class NVMLError(Exception):
    pass


@dataclass
class Gpu:
    uuid: str
    bus: str
    util: int = 50


@dataclass
class Rates:
    gpu: int
    memory: int = 0


@dataclass
class Mem:
    used: int
    total: int


@dataclass
class Pci:
    busId: bytes


class FakeNVML:
    """The parts of pynvml the sampler uses."""

    NVMLError = NVMLError

    def __init__(self, gpus: list[Gpu], init_error: str | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.inits = 0

    def nvmlInit(self) -> None:
        self.inits += 1
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Gpu:
        return self.gpus[i]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Gpu:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise NVMLError("Not Found")

    def nvmlDeviceGetHandleByPciBusId(self, bus: str) -> Gpu:
        return next(g for g in self.gpus if g.bus == bus)

    def nvmlDeviceGetUUID(self, h: Gpu) -> str:
        return h.uuid

    def nvmlDeviceGetPciInfo(self, h: Gpu) -> Pci:
        return Pci(h.bus.encode())

    def nvmlDeviceGetUtilizationRates(self, h: Gpu) -> Rates:
        return Rates(h.util)

    def nvmlDeviceGetMemoryInfo(self, h: Gpu) -> Mem:
        return Mem(used=3 * 2**20, total=16 * 2**20)

    def nvmlDeviceGetTemperature(self, h: Gpu, sensor: int) -> int:
        return 60

    def nvmlDeviceGetPowerUsage(self, h: Gpu) -> int:
        raise NVMLError("Not Supported")  # e.g. a GPU without power readings


def three_gpus() -> FakeNVML:
    # NVML index 0, 1, 2; PCI order: C (0x1A), A (0x3B), B (0x5E).
    return FakeNVML(
        [
            Gpu("GPU-aaaa", "00000000:3B:00.0"),
            Gpu("GPU-bbbb", "00000000:5E:00.0"),
            Gpu("GPU-cccc", "00000000:1A:00.0"),
        ]
    )


def sampler(tmp_path: Path, nvml: Any, visible: str | None = "1", **kw: Any) -> GpuSampler:
    ticks = iter(range(1000, 100000, 30))
    return GpuSampler(
        nvml=nvml,
        job_dir=tmp_path,
        attempt=2,
        node="n3",
        visible=visible,
        interval=30,
        clock=lambda: float(next(ticks)),
        **kw,
    )


class Rounds:
    """``keep_going`` for :meth:`GpuSampler.run`: true ``n`` times."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked <= self.n


def test_indices_follow_pci_bus_order_not_nvml_order() -> None:
    nvml = three_gpus()
    picked = select_gpus(nvml, "0,2")
    # CUDA 0 = lowest bus id (GPU-cccc, NVML index 2); CUDA 2 = GPU-bbbb.
    assert [uuid for uuid, _, _ in picked] == ["GPU-cccc", "GPU-bbbb"]
    assert [bus for _, bus, _ in picked] == ["00000000:1A:00.0", "00000000:5E:00.0"]


def test_uuids_are_looked_up_by_uuid_and_unset_means_every_gpu() -> None:
    nvml = three_gpus()
    assert [u for u, _, _ in select_gpus(nvml, "GPU-bbbb,GPU-aaaa")] == ["GPU-bbbb", "GPU-aaaa"]
    assert [u for u, _, _ in select_gpus(nvml, None)] == ["GPU-cccc", "GPU-aaaa", "GPU-bbbb"]
    assert select_gpus(nvml, "") == []
    with pytest.raises(NVMLError):
        select_gpus(nvml, "GPU-zzzz")
    with pytest.raises(ValueError, match="index 7"):
        select_gpus(nvml, "7")


def test_samples_are_json_lines_for_the_jobs_own_gpus(tmp_path: Path) -> None:
    s = sampler(tmp_path, three_gpus(), visible="1")  # CUDA 1 = GPU-aaaa
    assert s.start()
    s.sample()
    s.sample()
    lines = (tmp_path / jobdir.GPU_METRICS).read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first == {
        "ts": 1000.0,
        "node": "n3",
        "attempt": 2,
        "gpu": "GPU-aaaa",
        "pci": "00000000:3B:00.0",
        "util": 50,
        "mem_used": 3,
        "mem_total": 16,
        "temp_c": 60,
        "power_w": None,  # NVMLError for that value only: null, the sample goes on
    }
    assert [r["ts"] for r in latest_samples(read_metrics("\n".join(lines)))] == [1030.0]
    assert read_ledger(tmp_path) == []


def test_idle_warning_after_n_all_idle_samples_once_per_stretch(tmp_path: Path) -> None:
    nvml = three_gpus()
    s = sampler(tmp_path, nvml, visible="0,1", idle_samples=3)
    assert s.start()
    for gpu in nvml.gpus:
        gpu.util = 2
    nvml.gpus[0].util = 40  # one busy GPU: the job is not idle
    s.sample()
    s.sample()
    s.sample()
    assert read_ledger(tmp_path) == []
    nvml.gpus[0].util = 4
    for _ in range(5):
        s.sample()
    idle = [e for e in read_ledger(tmp_path) if e["event"] == "gpu_idle"]
    assert len(idle) == 1
    assert idle[0]["samples"] == 3
    assert idle[0]["seconds"] == 90
    assert idle[0]["max_util"] == 4
    assert idle[0]["node"] == "n3"
    assert idle[0]["attempt"] == 2
    assert sorted(idle[0]["gpus"]) == ["GPU-aaaa", "GPU-cccc"]


def test_each_sample_leaves_the_nodes_idle_state_for_the_idle_guard(tmp_path: Path) -> None:
    """control/idle/<node>.json: since when every GPU of the node is below the threshold
    (the spec's idle.threshold: 10 % here), as of the last sample."""
    import json

    from hpclaunch.supervise.idle import idle_for

    nvml = three_gpus()
    s = sampler(tmp_path, nvml, visible="0,1", idle_util=10)
    assert s.start()
    for gpu in nvml.gpus:
        gpu.util = 8  # idle under 10 %, not under the default 5 %
    s.sample()  # t=1000
    s.sample()  # t=1030
    state = json.loads((tmp_path / "control" / "idle" / "n3.json").read_text())
    assert (state["since"], state["at"]) == (1000.0, 1030.0)
    assert idle_for(tmp_path / "control", ["n3"], now=1031.0, since=0) == 31.0
    assert idle_for(tmp_path / "control", ["n3", "n4"], now=1031.0, since=0) is None  # n4 unknown
    assert idle_for(tmp_path / "control", ["n3"], now=1031.0, since=1020.0) == 11.0
    assert idle_for(tmp_path / "control", ["n3"], now=2000.0, since=0) is None  # stale
    for gpu in nvml.gpus:
        gpu.util = 50
    s.sample()
    assert json.loads((tmp_path / "control" / "idle" / "n3.json").read_text())["since"] is None
    assert idle_for(tmp_path / "control", ["n3"], now=1061.0, since=0) is None


def test_the_idle_thresholds_come_from_the_environment() -> None:
    s = GpuSampler.from_env(
        {
            "HPCLAUNCH_GPU_INTERVAL": "10",
            "HPCLAUNCH_GPU_IDLE_SECONDS": "60",
            "HPCLAUNCH_GPU_IDLE_UTIL": "12.5",
        }
    )
    assert (s.idle_samples, s.idle_util) == (6, 12.5)


def test_nvml_init_error_is_recorded_once_and_the_sampler_stops(tmp_path: Path) -> None:
    nvml = FakeNVML([], init_error="Driver Not Loaded")
    s = sampler(tmp_path, nvml)
    rounds = Rounds(5)
    s.run(rounds, sleep=lambda _: None)
    assert rounds.asked == 0  # never got to the loop
    events = read_ledger(tmp_path)
    assert [e["event"] for e in events] == ["gpu_monitor_off"]
    assert "Driver Not Loaded" in events[0]["reason"]
    assert events[0]["node"] == "n3"
    assert not (tmp_path / jobdir.GPU_METRICS).exists()


def test_missing_pynvml_is_recorded_once(tmp_path: Path) -> None:
    s = GpuSampler.from_env(
        {"HPCLAUNCH_JOB_DIR": str(tmp_path), "SLURMD_NODENAME": "n1", "HPCLAUNCH_ATTEMPT": "1"},
        None,
        "pynvml is not installed",
    )
    s.run(lambda: True)
    (event,) = read_ledger(tmp_path)
    assert event["event"] == "gpu_monitor_off"
    assert event["attempt"] == 1
    assert event["reason"] == "pynvml is not installed"
    assert event["node"] == "n1"
    assert not (
        tmp_path / jobdir.in_control(jobdir.GUARD_OFF)
    ).exists()  # no idle guard: nothing it cannot do


def test_a_node_without_sampling_says_so_where_status_looks_when_the_idle_guard_is_on(
    tmp_path: Path,
) -> None:
    """Issue 45: the guard silently did nothing on nodes without NVML."""
    for node in ("n1", "n2"):
        env = {"HPCLAUNCH_JOB_DIR": str(tmp_path), "SLURMD_NODENAME": node}
        GpuSampler.from_env(
            {**env, "HPCLAUNCH_GPU_IDLE_SECONDS": "600"}, None, "pynvml is not installed"
        ).run(lambda: True)
    assert (tmp_path / jobdir.in_control(jobdir.GUARD_OFF)).read_text() == (
        "n1: pynvml is not installed\nn2: pynvml is not installed\n"
    )


def test_interval_and_idle_default_from_the_environment(tmp_path: Path) -> None:
    s = GpuSampler.from_env({"HPCLAUNCH_GPU_INTERVAL": "15", "CUDA_VISIBLE_DEVICES": "0"})
    assert s.interval == 15
    assert s.idle_samples == 40
    assert s.visible == "0"
    assert GpuSampler.from_env({}).idle_samples == 20  # 10 min at 30 s


def test_run_samples_until_told_to_stop(tmp_path: Path) -> None:
    s = sampler(tmp_path, three_gpus(), visible="GPU-bbbb")
    s.run(Rounds(3), sleep=lambda _: None)
    assert len((tmp_path / jobdir.GPU_METRICS).read_text().splitlines()) == 3


# -- hpclaunch top --------------------------------------------------------------------------


def test_top_shows_the_latest_sample_per_gpu(env: Env, tmp_path: Path) -> None:
    remember(env, "9", tmp_path / "logs")  # job dir: tmp_path
    s = sampler(tmp_path, three_gpus(), visible="0,1")
    assert s.start()
    s.sample()
    s.nvml.gpus[0].util = 99
    s.sample()
    out = run(env, "top", "9")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["NODE", "ATT", "GPU", "UTIL%"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["n3", "2", "GPU-cccc", "50"],
        ["n3", "2", "GPU-aaaa", "99"],
    ]
    data = json.loads(run(env, "top", "9", "--json").stdout)
    assert [x["util"] for x in data["samples"]] == [50, 99]


def test_top_without_samples_says_why(env: Env, tmp_path: Path) -> None:
    remember(env, "9", tmp_path / "logs")
    assert "no GPU samples: the job has not started" in run(env, "top", "9").stdout
    sampler(tmp_path, FakeNVML([], init_error="Driver Not Loaded")).run(lambda: False)
    out = run(env, "top", "9")
    assert out.exit_code == 0
    assert (
        "no GPU samples: n3: nvmlInit failed (no NVIDIA driver?): Driver Not Loaded" in out.stdout
    )
    assert run(env, "top", "404").exit_code == 1


# -- W&B: one run across attempts -------------------------------------------------------------


def test_wandb_run_id_is_the_submission_id_unless_the_user_set_one() -> None:
    from hpclaunch.supervise.tracker_env import wandb_env

    sid = "0f3c9a2b7d4e4f1a9b8c7d6e5f4a3b2c"
    assert wandb_env({"HPCLAUNCH_SUBMISSION_ID": sid}) == {
        "WANDB_RUN_ID": sid,
        "WANDB_RESUME": "allow",
    }
    # Custom submission ids may hold '-', '_' or capitals: W&B ids are [a-z0-9] only.
    assert wandb_env({"HPCLAUNCH_SUBMISSION_ID": "My-Run_7"})["WANDB_RUN_ID"] == "myrun7"
    user = {"HPCLAUNCH_SUBMISSION_ID": sid, "WANDB_RUN_ID": "mine", "WANDB_RESUME": "must"}
    assert wandb_env(user) == {}
    assert wandb_env({"HPCLAUNCH_SUBMISSION_ID": sid, "WANDB_RUN_ID": "mine"}) == {
        "WANDB_RESUME": "allow"
    }
    assert wandb_env({}) == {}


# -- the real NVML --------------------------------------------------------------------------


@pytest.mark.gpu
def test_real_nvml_samples_this_machines_gpus(tmp_path: Path) -> None:
    from hpclaunch.supervise.gpumon import load_nvml

    nvml, why = load_nvml()
    if nvml is None:
        pytest.skip(f"needs an NVIDIA GPU: {why}")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        pytest.skip(f"needs an NVIDIA GPU: nvmlInit failed: {exc}")
    s = GpuSampler(nvml=nvml, job_dir=tmp_path, attempt=0, node="here", visible="0")
    assert s.start(), read_ledger(tmp_path)
    (record,) = s.sample()
    assert record["gpu"].startswith(("GPU-", "MIG-"))
    assert 0 <= record["util"] <= 100
    assert record["mem_total"] > 0


def test_turned_off_is_recorded_without_a_sampler_on_any_machine(tmp_path: Path) -> None:
    # HPCLAUNCH_GPU_INTERVAL=0 wins over a working NVML: no fork, one event saying so.
    env = {
        "HPCLAUNCH_JOB_DIR": str(tmp_path),
        "HPCLAUNCH_GPU_INTERVAL": "0",
        "SLURMD_NODENAME": "n2",
    }
    assert start_detached(env) is None
    (event,) = read_ledger(tmp_path)
    assert event["event"] == "gpu_monitor_off"
    assert event["reason"] == "disabled (HPCLAUNCH_GPU_INTERVAL=0)"
    assert event["node"] == "n2"
