"""The backend registry imports a backend only when it is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpclaunch import backends
from hpclaunch.backends.cli import CliBackend
from hpclaunch.errors import BackendUnavailable, ConfigError


def test_cli_backend_by_name() -> None:
    assert backends.get_backend_class("cli") is CliBackend
    assert "cli" in backends.available_backends()


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'slurmrest'") as info:
        backends.get_backend_class("slurmrest")
    assert info.value.hint == "known backends: " + ", ".join(backends.available_backends())


def test_missing_optional_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._REGISTRY, "ghost", backends._Entry("no_such_pkg_xyz:B", "ssh"))
    with pytest.raises(BackendUnavailable, match="'no_such_pkg_xyz'") as info:
        backends.get_backend_class("ghost")
    assert info.value.hint == "pip install 'hpclaunch[ssh]'"


def test_registry_import_is_lazy() -> None:
    code = "import sys, hpclaunch.backends; print('hpclaunch.backends.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_auto_over_ssh_takes_cli_and_says_why() -> None:
    from tests.unit.conftest import make_site
    from tests.unit.fakes import FakeRunner, result

    runner = FakeRunner(lambda argv: result(argv))
    runner.is_local = False
    backend, why = backends.choose_backend("auto", runner, make_site())
    assert backend.name == "cli"
    assert why == "cli: Slurm is reached over SSH (the fake); pyslurm works on the login node"


def test_auto_without_pyslurm_takes_cli_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.conftest import make_site
    from tests.unit.fakes import FakeRunner, result

    entry = backends._Entry("no_such_pyslurm_xyz:B", "pyslurm")
    monkeypatch.setitem(backends._REGISTRY, "pyslurm", entry)
    backend, why = backends.choose_backend("auto", FakeRunner(lambda a: result(a)), make_site())
    assert backend.name == "cli"
    assert why.startswith("cli: pyslurm not usable (backend 'pyslurm' needs the Python package")


def test_pyslurm_backend_refuses_ssh() -> None:
    from tests.unit.conftest import make_site
    from tests.unit.fakes import FakeRunner, result

    runner = FakeRunner(lambda argv: result(argv))
    runner.is_local = False
    with pytest.raises(BackendUnavailable, match="over SSH") as info:
        backends.create_backend("pyslurm", runner, make_site())
    assert info.value.hint is not None
    assert "--backend cli" in info.value.hint
