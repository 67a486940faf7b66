"""GPU monitoring: samples the job's own GPUs through NVML into ``metrics.jsonl``.

One sampler per node. ``node-exec`` (:mod:`hpclaunch.supervise.node`) ``exec``\\ s the
launcher, so a thread would not survive: it forks the sampler first (:func:`start_detached`,
only in the node's first srun task, ``SLURM_LOCALID`` 0) and the sampler exits as soon as
its parent (the launcher, same pid after the exec) is gone, when the sidecar stops the
launch's process group (it is a member), or when Slurm ends the step.

Every ``HPCLAUNCH_GPU_INTERVAL`` seconds (default 30; 0 turns monitoring off) it appends one
JSON line per GPU to ``$HPCLAUNCH_JOB_DIR/metrics.jsonl``::

    {"ts": 1700000000.0, "node": "n1", "attempt": 0, "gpu": "GPU-…", "pci": "00000000:3B:00.0",
     "util": 97, "mem_used": 1234, "mem_total": 40960, "temp_c": 61, "power_w": 301.5}

(memory in MiB; a value the GPU does not report is ``null``). Each line is one ``write``
(< PIPE_BUF bytes) on an ``O_APPEND`` descriptor, so the nodes' lines never interleave on a
local filesystem. (NFS does not make O_APPEND atomic across clients; one short line per
write keeps the risk to a rare torn line, which readers skip.)

Which GPUs are the job's: ``CUDA_VISIBLE_DEVICES`` (set by Slurm's GRES plugin). UUIDs
(``GPU-…``/``MIG-…``) are looked up with ``nvmlDeviceGetHandleByUUID``. Indices are *CUDA*
indices, and NVML's index order is not CUDA's: they are read with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` semantics, i.e. all NVML devices sorted by PCI bus id, then
indexed (CUDA's default "FASTEST_FIRST" order may differ on mixed-GPU machines; set
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` in the job to make the two agree). Unset: every GPU of the
node. Empty or ``-1``/``NoDevFiles``: none.

Without the ``[gpu]`` extra (``nvidia-ml-py``) or an NVIDIA driver (``NVMLError`` at
``nvmlInit``), the sampler writes ``gpu_monitor_off`` with the reason to the ledger once and
stops; nothing it does can affect the job. When every GPU of the node stays below
:data:`IDLE_UTIL` % (``HPCLAUNCH_GPU_IDLE_UTIL``, the spec's ``idle.threshold``) for
``HPCLAUNCH_GPU_IDLE_SECONDS`` (``idle.notify_after``; default 10 minutes; or
``HPCLAUNCH_GPU_IDLE_SAMPLES`` samples in a row), it writes ``gpu_idle`` once for that stretch.
Each sample also leaves the node's state for the sidecar's idle guard: ``control/idle/<node>.json``
(``since``: when this idle stretch began, ``null`` while busy; ``at``: the sample's time).
With the idle guard on but no sampling, the node also appends ``node: reason`` to
``control/idle-guard-off`` (``jobdir.GUARD_OFF``), which ``hpclaunch status`` reads beside
the progress: a guard that can never stop the job is said where the job is looked at.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch._fs import write_atomic
from hpclaunch.supervise.ledger import Ledger, parse_ledger
from hpclaunch.supervise.notices import Notifier

__all__ = [
    "IDLE_UTIL",
    "GpuSampler",
    "latest_samples",
    "load_nvml",
    "read_metrics",
    "select_gpus",
    "start_detached",
]

#: Utilisation (%) under which a GPU counts as idle.
IDLE_UTIL = 5
DEFAULT_INTERVAL = 30.0
IDLE_SECONDS = 600.0
_PIPE_BUF = 4096


def load_nvml() -> tuple[Any, str | None]:
    """``(pynvml module, None)``, or ``(None, why)`` when the ``[gpu]`` extra is missing."""
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError as exc:
        return None, f"pynvml is not installed (pip install 'hpclaunch[gpu]'): {exc}"
    return pynvml, None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus_id(nvml: Any, handle: Any) -> str:
    info = nvml.nvmlDeviceGetPciInfo(handle)
    return _text(getattr(info, "busId", "")).upper()


def select_gpus(nvml: Any, visible: str | None) -> list[tuple[str, str, Any]]:
    """The job's GPUs as ``(uuid, pci bus id, handle)``, from ``CUDA_VISIBLE_DEVICES``.

    Args:
        nvml: An initialised pynvml (or a fake with the same functions).
        visible: The value of ``CUDA_VISIBLE_DEVICES`` (``None``: unset, every GPU).

    Raises:
        nvml.NVMLError: A UUID NVML does not know.
        ValueError: An index beyond the node's GPUs, or a token that is neither.
    """
    if visible is not None and visible.strip() in ("", "-1", "NoDevFiles"):
        return []
    count = nvml.nvmlDeviceGetCount()
    every = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    # CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA index i is the i-th device by PCI bus id.
    by_bus = sorted(every, key=lambda h: _bus_id(nvml, h))
    handles: list[Any] = []
    tokens = [t.strip() for t in (visible or "").split(",") if t.strip()]
    if visible is None:
        handles = by_bus
    for token in tokens:
        if token.upper().startswith(("GPU-", "MIG-")):
            handles.append(nvml.nvmlDeviceGetHandleByUUID(token))
        elif token.isdigit():
            index = int(token)
            if index >= len(by_bus):
                raise ValueError(f"CUDA_VISIBLE_DEVICES index {index}: the node has {count} GPUs")
            handles.append(by_bus[index])
        else:
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {token!r}: neither an index nor a UUID")
    return [(_text(nvml.nvmlDeviceGetUUID(h)), _bus_id(nvml, h), h) for h in handles]


@dataclass
class GpuSampler:
    """Samples one node's GPUs of the job; see the module docstring.

    Args:
        nvml: pynvml, a fake in tests, or ``None`` (then ``off_reason`` says why).
        job_dir: ``HPCLAUNCH_JOB_DIR`` (``metrics.jsonl`` and the ledger).
        attempt: The attempt number, on every line.
        node: This node's name.
        visible: ``CUDA_VISIBLE_DEVICES`` (``None``: unset).
        interval: Seconds between samples.
        idle_samples: Consecutive all-idle samples before ``gpu_idle``.
        off_reason: Why there is no NVML (``nvml`` is ``None``).
        clock: ``time.time`` (a fake in tests).
    """

    nvml: Any
    job_dir: Path
    attempt: int
    node: str
    visible: str | None
    interval: float = DEFAULT_INTERVAL
    idle_samples: int = 20
    off_reason: str | None = None
    clock: Callable[[], float] = time.time
    gpus: list[tuple[str, str, Any]] = field(default_factory=list)
    idle_run: int = 0
    stopped: bool = False
    notifier: Callable[[dict[str, Any]], None] | None = None
    idle_util: float = IDLE_UTIL
    idle_since: float | None = None
    guarded: bool = False  # the idle guard is on (HPCLAUNCH_GPU_IDLE_SECONDS set)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], nvml: Any = None, why: str | None = None
    ) -> GpuSampler:
        """From the job's environment (``HPCLAUNCH_GPU_INTERVAL``, ``..._IDLE_SAMPLES``)."""
        try:
            interval = float(env.get("HPCLAUNCH_GPU_INTERVAL") or DEFAULT_INTERVAL)
        except ValueError:
            interval = DEFAULT_INTERVAL
        seconds = _number(env.get("HPCLAUNCH_GPU_IDLE_SECONDS"), IDLE_SECONDS)
        default_idle = max(1, math.ceil(seconds / interval)) if interval > 0 else 1
        idle = env.get("HPCLAUNCH_GPU_IDLE_SAMPLES", "")
        return cls(
            nvml=nvml,
            job_dir=Path(env.get("HPCLAUNCH_JOB_DIR") or Path.cwd()),
            attempt=int(env.get("HPCLAUNCH_ATTEMPT") or env.get("SLURM_RESTART_COUNT") or 0),
            node=env.get("SLURMD_NODENAME") or socket.gethostname(),
            visible=env.get("CUDA_VISIBLE_DEVICES"),
            interval=interval,
            idle_samples=int(idle) if idle.isdigit() and int(idle) > 0 else default_idle,
            off_reason=why,
            notifier=Notifier.from_env(env),
            idle_util=_number(env.get("HPCLAUNCH_GPU_IDLE_UTIL"), IDLE_UTIL),
            guarded="HPCLAUNCH_GPU_IDLE_SECONDS" in env,
        )

    @property
    def ledger(self) -> Ledger:
        """This attempt's ledger (its ``gpu_idle`` told to whom the job's notify: names)."""
        return Ledger(self.job_dir, self.attempt, observer=self.notifier)

    def _off(self, reason: str) -> bool:
        self.stopped = True
        self.ledger.append("gpu_monitor_off", node=self.node, reason=reason)
        if self.guarded:
            path = self.job_dir / jobdir.in_control(jobdir.GUARD_OFF)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with path.open("a") as out:  # one short line per node: O_APPEND keeps them whole
                out.write(f"{self.node}: {reason}\n")
        return False

    def start(self) -> bool:
        """Initialise NVML and find the job's GPUs; ``False`` (and one ledger event) if not."""
        if self.interval <= 0:
            return self._off("disabled (HPCLAUNCH_GPU_INTERVAL=0)")
        if self.nvml is None:
            return self._off(self.off_reason or "no NVML")
        try:
            self.nvml.nvmlInit()
        except Exception as exc:  # NVMLError (no driver, no device), or anything else
            return self._off(f"nvmlInit failed (no NVIDIA driver?): {exc}")
        try:
            self.gpus = select_gpus(self.nvml, self.visible)
        except Exception as exc:
            return self._off(f"cannot map CUDA_VISIBLE_DEVICES={self.visible!r}: {exc}")
        if not self.gpus:
            return self._off(f"no GPU for this job (CUDA_VISIBLE_DEVICES={self.visible!r})")
        return True

    def _read(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED and the like: the value is unknown
            return None

    def sample(self) -> list[dict[str, Any]]:
        """Sample every GPU once, append the lines, check idleness; the records written."""
        nvml, now = self.nvml, self.clock()
        records: list[dict[str, Any]] = []
        for uuid, bus, handle in self.gpus:
            rates = self._read(nvml.nvmlDeviceGetUtilizationRates, handle)
            util = None if rates is None else int(rates.gpu)
            mem = self._read(nvml.nvmlDeviceGetMemoryInfo, handle)
            temp = self._read(nvml.nvmlDeviceGetTemperature, handle, 0)  # NVML_TEMPERATURE_GPU
            power = self._read(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
            records.append(
                {
                    "ts": round(now, 3),
                    "node": self.node,
                    "attempt": self.attempt,
                    "gpu": uuid,
                    "pci": bus,
                    "util": util,
                    "mem_used": None if mem is None else int(mem.used) // 2**20,
                    "mem_total": None if mem is None else int(mem.total) // 2**20,
                    "temp_c": temp,
                    "power_w": None if power is None else round(power / 1000, 1),
                }
            )
        self._write(records)
        self._check_idle(records)
        return records

    def _write(self, records: list[dict[str, Any]]) -> None:
        fd = os.open(
            self.job_dir / jobdir.GPU_METRICS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
        )
        try:
            for record in records:
                line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
                if len(line) < _PIPE_BUF:
                    os.write(fd, line)
        finally:
            os.close(fd)

    def _check_idle(self, records: list[dict[str, Any]]) -> None:
        utils = [r["util"] for r in records]
        idle = bool(utils) and all(isinstance(u, int) and u < self.idle_util for u in utils)
        self.idle_run = self.idle_run + 1 if idle else 0
        now = records[0]["ts"] if records else self.clock()
        self.idle_since = (self.idle_since or now) if idle else None
        self._leave_idle_state(now)
        if self.idle_run == self.idle_samples:
            self.ledger.append(
                "gpu_idle",
                node=self.node,
                gpus=[r["gpu"] for r in records],
                samples=self.idle_run,
                seconds=round(self.idle_run * self.interval, 1),
                max_util=max(utils),
            )

    def _leave_idle_state(self, now: float) -> None:
        """``control/idle/<node>.json`` for the sidecar's idle guard (hpclaunch/supervise/
        idle.py): since when every GPU of this node is idle (``null``: busy), as of ``now``."""
        state = {"since": self.idle_since, "at": now, "interval": self.interval}
        folder = self.job_dir / jobdir.CONTROL / jobdir.IDLE
        with contextlib.suppress(OSError):
            write_atomic(
                folder / f"{self.node}.json",
                lambda fh: fh.write(json.dumps(state).encode()),
                private_dirs=True,
            )

    def run(
        self,
        keep_going: Callable[[], bool],
        sleep: Callable[[float], None] = time.sleep,
        *,
        started: bool = False,
    ) -> None:
        """Start (unless ``started``), then sample every ``interval`` seconds while
        ``keep_going()``; never raises."""
        try:
            if not started and not self.start():
                return
            next_at = self.clock()
            while keep_going():
                if self.clock() >= next_at:
                    self.sample()
                    next_at += self.interval
                sleep(min(1.0, max(0.0, next_at - self.clock())))
        except Exception as exc:  # monitoring must never take the job down
            if not self.stopped:
                self._off(f"sampler failed: {exc!r}")
        finally:
            if self.nvml is not None and self.gpus:
                self._read(self.nvml.nvmlShutdown)


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def start_detached(env: Mapping[str, str]) -> int | None:
    """Start the node's sampler (call right before ``exec``); its pid, or ``None``.

    Only the first task of the node (``SLURM_LOCALID`` unset or 0) samples. Turned off
    (``HPCLAUNCH_GPU_INTERVAL=0``) or without pynvml, the ``gpu_monitor_off`` event is
    written here, before the ``exec``, so it is never lost to a launch that ends at once.
    Otherwise a child is forked; it polls its parent pid at
    least once a second and leaves when the parent (the launcher this process becomes) has
    exited. It stays in the launch's process group, so the sidecar's stop (SIGTERM, then
    SIGKILL, to the group) ends it with the launch; SIGTERM is held back until its start
    (``nvmlInit``, or the ledger event saying why not) is done.
    """
    if (env.get("SLURM_LOCALID") or "0") != "0":
        return None
    # Turned off (HPCLAUNCH_GPU_INTERVAL=0), or no pynvml: say so here, without a fork. The
    # interval is looked at first, so that "off" means off on a machine with GPUs too.
    off = GpuSampler.from_env(env).interval <= 0
    nvml, why = (None, None) if off else load_nvml()
    if nvml is None:
        with contextlib.suppress(Exception):  # monitoring never stops the job
            GpuSampler.from_env(env, None, why).start()
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    code = 0
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        sampler = GpuSampler.from_env(env, nvml)
        started = sampler.start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        if started:
            sampler.run(lambda: os.getppid() == parent, started=True)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def read_metrics(text: str) -> list[dict[str, Any]]:
    """The samples in the text of a ``metrics.jsonl`` (torn or foreign lines skipped)."""
    return [value for value in parse_ledger(text) if "gpu" in value]


def latest_samples(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest sample of each (node, GPU), sorted by node then PCI bus id."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        key = (str(record.get("node")), str(record.get("gpu")))
        if key not in newest or float(record.get("ts") or 0) >= float(newest[key].get("ts") or 0):
            newest[key] = record
    return sorted(newest.values(), key=lambda r: (str(r.get("node")), str(r.get("pci"))))
