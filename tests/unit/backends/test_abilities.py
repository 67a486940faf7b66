"""Backend abilities: the Slurm backends declare them all, the local backend none, and
asking the local backend for one names the backend that has it."""

from __future__ import annotations

from typing import get_args

import pytest

from hpclaunch.backends.abilities import (
    Ability,
    ArbiterView,
    ControlsJobs,
    EstimatesStart,
    ReadsAccounting,
    ReadsQueue,
    accounting_of,
    arbiter_view_of,
    control_of,
    estimates_of,
    queue_of,
    supports,
)
from hpclaunch.backends.cli import CliBackend
from hpclaunch.backends.local import LocalBackend
from hpclaunch.backends.pyslurm import PyslurmBackend
from hpclaunch.errors import BackendUnavailable
from hpclaunch.transport.local import LocalRunner
from tests.unit.conftest import make_site
from tests.unit.fakes import FakeRunner, result


def test_the_slurm_backends_have_every_ability() -> None:
    cli = CliBackend(FakeRunner(lambda argv: result(argv)), make_site())
    for ability in get_args(Ability):
        assert supports(cli, ability), ability
    # pyslurm needs its library to be made: its class declares them all as its bases.
    for protocol in (ReadsQueue, ControlsJobs, ReadsAccounting, EstimatesStart, ArbiterView):
        assert issubclass(PyslurmBackend, protocol), protocol
    for accessor in (queue_of, control_of, accounting_of, estimates_of, arbiter_view_of):
        assert accessor(cli) is cli


def test_the_local_backend_has_none_and_says_which_backend_has_them() -> None:
    local = LocalBackend(LocalRunner(), make_site())
    assert not any(supports(local, ability) for ability in get_args(Ability))
    with pytest.raises(BackendUnavailable, match="'local' backend cannot list the queue") as err:
        queue_of(local)
    assert err.value.hint == "use the 'cli' backend (--backend cli)"
    with pytest.raises(BackendUnavailable, match="cannot read Slurm's accounting"):
        accounting_of(local)
    with pytest.raises(BackendUnavailable, match="cannot change, hold, requeue or signal"):
        control_of(local)
