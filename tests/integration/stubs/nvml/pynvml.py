"""A stand-in for NVIDIA's ``pynvml`` on the test cluster, whose GPUs are fake devices (no
driver): put this directory on a job's ``PYTHONPATH`` and the sidecar's sampler
(hpclaunch.supervise.gpumon) reads four GPUs per node through the same calls it makes on
real ones. Each GPU's values follow the clock, so a report has a series to draw: utilisation
cycles between 20 and 100 % over two minutes (0 % with ``HPCLAUNCH_TEST_NVML=idle``), memory
20-40 GiB of 80, power 100-400 W.
Nothing else is imitated (real NVML: the GPU test on a device machine, tests/unit).
"""

from __future__ import annotations

import math
import os
import time
from types import SimpleNamespace

GPUS = 4
_MIB = 2**20


class NVMLError(Exception):
    """As pynvml's."""


def nvmlInit() -> None:
    if os.environ.get("HPCLAUNCH_TEST_NVML") == "fail":
        raise NVMLError("NVML Shared Library Not Found")


def nvmlShutdown() -> None:
    return None


def nvmlDeviceGetCount() -> int:
    return GPUS


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < GPUS:
        raise NVMLError(f"Invalid Argument: index {index}")
    return index


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> int:
    text = uuid.decode() if isinstance(uuid, bytes) else uuid
    for index in range(GPUS):
        if nvmlDeviceGetUUID(index) == text:
            return index
    raise NVMLError(f"Not Found: {text}")


def _node() -> int:
    """A number per node (n1 → 1), so that the nodes' GPUs have different UUIDs."""
    name = os.environ.get("SLURMD_NODENAME", "n0")
    digits = "".join(c for c in name if c.isdigit())
    return int(digits or 0)


def nvmlDeviceGetUUID(handle: int) -> str:
    return f"GPU-{_node():08x}-0000-4000-8000-{handle:012x}"


def nvmlDeviceGetPciInfo(handle: int) -> SimpleNamespace:
    return SimpleNamespace(busId=f"00000000:{0x18 + 0x20 * handle:02X}:00.0")


def _phase(handle: int) -> float:
    """0 to 1 and back over two minutes, shifted per GPU."""
    return (1 + math.sin(time.time() / 120 * 2 * math.pi + handle)) / 2


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:
    if os.environ.get("HPCLAUNCH_TEST_NVML") == "idle":  # a job that holds its GPUs and sleeps
        return SimpleNamespace(gpu=0, memory=0)
    return SimpleNamespace(gpu=round(20 + 80 * _phase(handle)), memory=0)


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    used = round((20 + 20 * _phase(handle)) * 1024) * _MIB
    return SimpleNamespace(total=80 * 1024 * _MIB, used=used, free=80 * 1024 * _MIB - used)


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return round(40 + 30 * _phase(handle))


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    """Milliwatts."""
    return round((100 + 300 * _phase(handle)) * 1000)
