"""``site check``'s container runtime probe: its shell script run here for real (as the one
srun task would run it on a node), with a PATH and a Slurm config directory of the test's."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.errors import CommandTimeout
from hpclaunch.ops.site import runtime_problems
from hpclaunch.slurm.runtime_probe import RuntimeFinding, probe_runtimes
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, result

OCI_CONF = 'RunTimeQuery="crun state %n"\nRunTimeRun="crun --root=/run/x run --bundle %b %n"\n'


def node(tmp_path: Path, programs: list[str], oci_conf: str | None) -> Callable[..., CommandResult]:
    """An answer that runs srun's command here: ``programs`` on PATH, ``oci_conf`` beside
    SLURM_CONF; ``srun --help`` without pyxis' options."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in programs:
        path = bin_dir / name
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    # Only the tools the probe uses besides the runtimes: this machine may have ch-run.
    for tool in ("hostname", "awk", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    (tmp_path / "etc").mkdir()
    if oci_conf is not None:
        (tmp_path / "etc" / "oci.conf").write_text(oci_conf)
    env = {
        "PATH": str(bin_dir),
        "SLURM_CONF": str(tmp_path / "etc" / "slurm.conf"),
        "HOME": os.environ.get("HOME", "/"),
    }

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:2] == ("srun", "--help"):
            return result(argv, out="Usage: srun [OPTIONS...]\n  -N, --nodes=N\n")
        command = argv[argv.index("sh") :]
        done = subprocess.run(
            ["/bin/sh", *command[1:]], capture_output=True, text=True, env=env, check=False
        )
        return result(argv, done.returncode, done.stdout, done.stderr)

    return answer


def test_finds_programs_and_the_oci_runtime_that_oci_conf_calls(tmp_path: Path) -> None:
    runner = FakeRunner(node(tmp_path, ["ch-run", "crun"], OCI_CONF))
    probe = probe_runtimes(runner, ["charliecloud", "oci"], partition="gpu", account="research")
    assert probe.not_checked is None
    found = {f.runtime: f for f in probe.findings}
    assert found["charliecloud"].ok
    assert found["charliecloud"].detail.endswith("/bin/ch-run")
    assert found["oci"].ok
    assert found["oci"].detail.endswith("/bin/crun")
    assert not runtime_problems(probe)
    (srun,) = runner.calls_to("srun")
    assert {"--immediate=20", "--partition=gpu", "--account=research"} <= set(srun)
    assert not any(a.startswith("--qos") for a in srun)


def test_missing_programs_and_configs_are_problems_of_containers_runtimes(tmp_path: Path) -> None:
    runner = FakeRunner(node(tmp_path, [], None))
    probe = probe_runtimes(runner, ["apptainer", "charliecloud", "oci", "pyxis"])
    found = {f.runtime: f for f in probe.findings if f.node != "login"}
    assert not any(f.ok for f in probe.findings)
    assert found["apptainer"].detail == "no apptainer on PATH"
    assert found["charliecloud"].detail == "no ch-run on PATH"
    assert found["oci"].detail.startswith(f"no {tmp_path}/etc/oci.conf")
    assert found["pyxis"].detail == "no enroot on PATH"
    # pyxis is also asked of the login node's srun (its SPANK options)
    login = [f for f in probe.findings if f.node == "login"]
    assert login == [
        RuntimeFinding(
            "pyxis",
            False,
            "login",
            "srun --help has no --container-image (pyxis not in plugstack.conf)",
        )
    ]
    problems = runtime_problems(probe)
    assert len(problems) == 5
    assert all(p.where == "containers.runtimes" for p in problems)
    assert "container runtime 'charliecloud' is not usable on " in str(problems[1])


def test_an_oci_conf_without_a_run_command_is_reported(tmp_path: Path) -> None:
    runner = FakeRunner(node(tmp_path, ["crun"], 'RunTimeQuery="crun state %n"\n'))
    (finding,) = probe_runtimes(runner, ["oci"]).findings
    assert not finding.ok
    assert finding.detail.endswith("sets no RunTimeRun or RunTimeCreate")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            lambda argv: result(
                argv, 1, "", "srun: error: Unable to allocate resources: Immediate"
            ),
            "Immediate",
        ),
        (lambda argv: result(argv, 0, "nothing the probe prints\n"), "srun exited 0"),
    ],
)
def test_a_probe_that_could_not_run_is_not_checked_never_missing(
    answer: Callable[[tuple[str, ...]], CommandResult], why: str
) -> None:
    probe = probe_runtimes(FakeRunner(answer), ["charliecloud"])
    assert probe.findings == ()
    assert probe.not_checked is not None
    assert why in probe.not_checked
    assert runtime_problems(probe) == []


def test_a_probe_that_times_out_is_not_checked() -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        raise CommandTimeout(argv, 80)

    probe = probe_runtimes(FakeRunner(answer), ["charliecloud"])
    assert probe.not_checked is not None
    assert probe.not_checked.startswith("command timed out after 80 s: srun")
