"""The pyslurm backend's retry of a busy slurmctld, with a stand-in for pyslurm: the test
cluster cannot be made to answer EAGAIN on demand (bench/backends.py saw it once, with
thousands of jobs queued). Everything else of the backend is tested on the cluster, with
the real pyslurm (tests/integration, marker ``backends``)."""

from __future__ import annotations

import errno
import types

import pytest

from hpclaunch.backends.pyslurm import PyslurmBackend


class RPCError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.errno = code


class Description:
    def __init__(self, answers: list[int | RPCError]) -> None:
        self.answers = answers
        self.calls = 0

    def submit(self) -> int:
        answer = self.answers[self.calls]
        self.calls += 1
        if isinstance(answer, RPCError):
            raise answer
        return answer


def backend(slept: list[float]) -> PyslurmBackend:
    made = object.__new__(PyslurmBackend)  # no slurmctld to ask for its release
    made.pyslurm = types.SimpleNamespace(RPCError=RPCError)  # type: ignore[assignment]
    made.sleep = slept.append
    return made


def test_busy_answers_are_retried_like_sbatch() -> None:
    slept: list[float] = []
    busy = RPCError(errno.EAGAIN, "Resource temporarily unavailable")
    full = RPCError(2007, "Unable to create job record, try again")
    description = Description([busy, full, 42])
    assert backend(slept)._submit_retrying(description) == 42
    assert slept == [1, 2]  # sbatch's sleep(++retries)


def test_a_refusal_is_not_retried() -> None:
    slept: list[float] = []
    description = Description([RPCError(2002, "Invalid account or account/partition combination")])
    with pytest.raises(RPCError, match="Invalid account"):
        backend(slept)._submit_retrying(description)
    assert (description.calls, slept) == (1, [])


def test_retries_end_after_fifteen() -> None:
    slept: list[float] = []
    busy = RPCError(errno.EAGAIN, "Resource temporarily unavailable")
    description = Description([busy] * 16)
    with pytest.raises(RPCError):
        backend(slept)._submit_retrying(description)
    assert (description.calls, slept) == (16, [float(i) for i in range(1, 16)])
