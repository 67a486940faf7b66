"""A job spec's ``retry:``: run the job again when it fails in a way worth another try.

::

    launcher: srun                  # the sidecar does it: any launcher but none
    retry:
      times: 3                      # retries at most, over the job's life
      when: [node_failure, job_lost, oom, exit_code: [3, 75]]
      backoff: 60                   # seconds before the first retry; doubled each time
      max_backoff: 3600             # the longest wait
      oom_memory_factor: 1.5        # after an OOM, 1.5x the memory (at most the node's)

Endings (how the sidecar saw the attempt end, ``hpclaunch events``):

- ``node_failure``: a node of the job failed (past ``checkpoint.max_requeues``, which
  requeues node failures at once, without backoff);
- ``job_lost``: Slurm lost the job, or srun could not reach slurmctld to start it;
- ``oom``: out of memory (Slurm's OOM kill, CUDA or Python out of memory);
- ``exit_code: [..]``: the command exited with one of these codes;
- ``user_error``: any other failure of the command: only when named, since a bug fails the
  same way every time.

A retry requeues the job (the same job id, the next attempt resuming from its checkpoint
as after a preemption) and sets its start time to now + the wait, so it waits in the
queue (Reason ``BeginTime``), holding no GPU. Time limits and preemptions are not failures:
``checkpoint.max_requeues`` and the tier handle them.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ENDINGS", "ExitCodes", "Retry", "RetryEnding"]

RetryEnding = Literal["node_failure", "job_lost", "oom", "user_error"]
ENDINGS: tuple[RetryEnding, ...] = ("node_failure", "job_lost", "oom", "user_error")


class ExitCodes(BaseModel):
    """``exit_code: [3, 75]``: the command's exit codes that are worth a retry."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    exit_code: tuple[int, ...] = Field(
        min_length=1, description="Exit codes (1-255) of the command to retry on."
    )

    @model_validator(mode="after")
    def _codes(self) -> ExitCodes:
        bad = [c for c in self.exit_code if not 1 <= c <= 255]
        if bad:
            raise ValueError(f"exit codes are 1 to 255 (0 is success): {bad}")
        return self


class Retry(BaseModel):
    """How many times, on which endings, and how long to wait before each retry."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    times: int = Field(ge=1, le=100, description="Retries at most, over the job's life.")
    when: tuple[RetryEnding | ExitCodes, ...] = Field(
        min_length=1,
        description="Endings to retry on: node_failure, job_lost, oom, user_error (any "
        "failure of the command), or exit_code: [codes].",
        examples=[["node_failure", "job_lost", {"exit_code": [3]}]],
    )
    backoff: int = Field(
        60,
        ge=0,
        le=86400,
        description="Seconds before the first retry; doubled each time. Never shorter than "
        "Slurm's own requeue delay (its credential's expiry + 1 s: 11 s on the test cluster).",
    )
    max_backoff: int = Field(3600, ge=0, le=604800, description="The longest wait, in seconds.")
    oom_memory_factor: float | None = Field(
        None,
        gt=1,
        le=16,
        description="After an out-of-memory ending, the next attempt gets the memory that "
        "was enforced times this (1.5: half as much again), at most the partition's nodes' "
        "memory; the ledger says what it asked. Needs oom in when.",
        examples=[1.5],
    )

    @model_validator(mode="after")
    def _factor_needs_oom(self) -> Retry:
        if self.oom_memory_factor is not None and "oom" not in self.endings:
            raise ValueError(
                "oom_memory_factor raises the memory after an out-of-memory ending, but "
                "when does not name oom: add oom to when (when: [oom])"
            )
        return self

    @property
    def endings(self) -> tuple[RetryEnding, ...]:
        """The named endings."""
        return tuple(w for w in self.when if isinstance(w, str))

    @property
    def exit_codes(self) -> tuple[int, ...]:
        """The exit codes named (all ``exit_code`` lists together)."""
        return tuple(c for w in self.when if isinstance(w, ExitCodes) for c in w.exit_code)

    def describe(self, max_mem_mb: int | None = None) -> str:
        """The dry run's note: when the job is retried, and how memory grows after an OOM."""
        named = [*self.endings, *(f"exit code {c}" for c in self.exit_codes)]
        note = (
            f"retry: up to {self.times} time(s) on {', '.join(named)}, the first "
            f"{self.backoff} s after the failure, each wait doubled (at most "
            f"{self.max_backoff} s)"
        )
        if self.oom_memory_factor is not None:
            cap = f"{max_mem_mb:,} MB, the partition's nodes" if max_mem_mb else "no cap known"
            note += (
                f"; after an OOM the next attempt asks {self.oom_memory_factor:g}x the memory "
                f"enforced (at most {cap})"
            )
        return note

    def env_value(self, max_mem_mb: int | None = None) -> str:
        """``HPCLAUNCH_RETRY``: what the sidecar reads (:mod:`hpclaunch.supervise.retry`);
        ``max_mem_mb``: the partition's nodes' memory, the most an OOM retry asks for."""
        value: dict[str, object] = {
            "times": self.times,
            "endings": list(self.endings),
            "exit_codes": list(self.exit_codes),
            "backoff": self.backoff,
            "max_backoff": self.max_backoff,
        }
        if self.oom_memory_factor is not None:
            value["oom_memory_factor"] = self.oom_memory_factor
            if max_mem_mb is not None:
                value["max_mem_mb"] = max_mem_mb
        return json.dumps(value, separators=(",", ":"))
