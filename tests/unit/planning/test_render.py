"""Rendering: recorded scripts (tests/golden/), quoting, template errors, and the script's
own behaviour under bash (private job dir, one log per attempt)."""

from __future__ import annotations

import difflib
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch import jobdir
from hpclaunch.errors import RenderError
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import RenderedJob, render, render_command_section, sbatch_quote
from hpclaunch.planning.script_start import EXIT_NO_WORKDIR
from tests.unit.conftest import CONTAINER_SITE, make_site, make_spec

PlanFor = Callable[..., SubmissionPlan]
GOLDEN = Path(__file__).resolve().parents[2] / "golden"

CASES = {
    "gpu1": make_spec(
        name="resnet50 baseline",
        command=["python", "train.py", "--config", "configs/r50.yaml", "--lr", "0.1"],
        env={"OMP_NUM_THREADS": "4", "WANDB_PROJECT": "vision runs"},
        resources={"gpus_per_node": 1, "cpus_per_task": 4, "mem": "3G", "time": "00:45:00"},
        tier="low",
        project="vision",
        checkpoint={"dir": "~/ckpt/r50"},
    ),
    "srun2node": make_spec(
        name="two-node",
        command=["python", "-m", "trainer", "--nodes", "2"],
        launcher="srun",
        resources={"nodes": 2, "gpus_per_node": 4, "cpus_per_task": 2, "time": "30"},
        tier="high",
    ),
    "torchrun2node": make_spec(
        name="ddp",
        command=["python", "train.py", "--steps", "100"],
        launcher="torchrun",
        resources={"nodes": 2, "cpus_per_task": 2, "time": "10"},
        tier="low",
        checkpoint={"signal": "USR2", "signal_lead_time": 30, "max_requeues": 3},
    ),
    "cpu": make_spec(
        name="preprocess",
        command=["bash", "-c", 'echo "hello from $(hostname)"; sleep 2; echo done'],
        workdir="data",
        output_dir="/scratch/alice/logs",
        resources={"mem": "500M", "time": "5"},
    ),
    "envdeps": make_spec(
        name="eval after train",
        command=None,
        script="scripts/eval.sh",
        args=["--split", "test set", "$(not run)"],
        modules=["cuda/12.1"],
        conda="torch-2.3",
        dependencies=[{"job": "1001"}, {"job": "1002"}, {"job": "1000", "type": "afterany"}],
        sbatch_extra={"--nice": 10, "--mail-type": "END,FAIL", "--begin=now": None},
        resources={
            "gpus_per_node": 2,
            "gpu_type": "A100",
            "cpus_per_gpu": 8,
            "constraint": "ib",
            "exclusive": True,
            "time": "02:00:00",
        },
    ),
    # One per container runtime (the site below offers them all).
    "apptainer": make_spec(
        name="in apptainer",
        command=["python", "train.py", "--data", "/data/my set"],
        resources={"gpus_per_node": 1, "time": "10"},
        container={"image": "torch 2.sif", "mounts": ["/datasets:/data:ro"]},
    ),
    "apptainer_torchrun": make_spec(
        name="ddp in apptainer",
        command=["python", "train.py"],
        launcher="torchrun",
        resources={"nodes": 2, "gpus_per_node": 2, "time": "10"},
        tier="low",
        container={"image": "/images/torch.sif", "runtime": "apptainer"},
    ),
    "charliecloud": make_spec(
        name="in charliecloud",
        command=["python", "train.py"],
        resources={"time": "10"},
        container={"image": "/images/torch-dir", "runtime": "charliecloud", "workdir": "/work"},
    ),
    "pyxis": make_spec(
        name="in pyxis",
        command=["python", "train.py"],
        env={"NCCL_DEBUG": "INFO"},
        resources={"gpus_per_node": 4, "time": "10"},
        container={"image": "nvcr.io#nvidia/pytorch:24.05-py3", "runtime": "pyxis"},
    ),
    "pyxis_torchrun": make_spec(
        name="ddp in pyxis",
        command=["python", "train.py"],
        launcher="torchrun",
        resources={"nodes": 2, "gpus_per_node": 4, "time": "10"},
        container={"image": "/images/torch.sqsh", "runtime": "pyxis"},
    ),
    "oci": make_spec(
        name="in an oci bundle",
        command=["nvidia-smi"],
        resources={"gpus_per_node": 1, "time": "5"},
        container={"image": "/bundles/torch", "runtime": "oci"},
    ),
}
#: The site of each case (default: site-configs/local.yaml).
SITES = {
    **dict.fromkeys(
        ["apptainer", "apptainer_torchrun", "charliecloud", "pyxis", "pyxis_torchrun", "oci"],
        CONTAINER_SITE,
    ),
    "envdeps": make_site(
        partitions=[
            {"name": "a100", "gpu_type": "a100", "gpus_per_node": 4, "cpus_per_node": 64},
        ],
        module_system="lmod",
        modules=["gcc/12.2"],
        scratch="$SCRATCH/hpclaunch",
        # A site whose Slurm is not first on PATH (a space, to see it quoted).
        slurm_bin="/opt/slurm 25.11/bin",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, plan_for: PlanFor, update_golden: bool) -> None:
    script = render(plan_for(CASES[case], SITES.get(case))).script
    path = GOLDEN / f"{case}.sbatch"
    if update_golden:
        path.write_text(script)
        return
    assert path.exists(), f"{path} missing: run pytest --update-golden and review the diff"
    expected = path.read_text()
    if script != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                script.splitlines(keepends=True),
                fromfile=f"golden/{case}.sbatch",
                tofile="rendered",
            )
        )
        pytest.fail(f"rendered script differs (refresh with --update-golden):\n{diff}")


def test_sbatch_argv_is_a_list_with_the_script_path(plan_for: PlanFor) -> None:
    job = render(plan_for(CASES["cpu"]))
    assert isinstance(job, RenderedJob)
    assert job.sbatch_argv == ("sbatch", "--parsable", job.plan.script_path)
    assert job.script_path == job.plan.script_path


@pytest.mark.parametrize("case", sorted(CASES))
def test_sbatch_lines_come_before_any_command(case: str, plan_for: PlanFor) -> None:
    # sbatch ignores #SBATCH lines after the first command (sbatch(1)).
    lines = render(plan_for(CASES[case], SITES.get(case))).script.splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    sbatch = [i for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    assert sbatch
    assert max(sbatch) < first_command
    assert lines[first_command] == "set -euo pipefail"


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_is_valid_bash(case: str, plan_for: PlanFor) -> None:
    script = render(plan_for(CASES[case], SITES.get(case))).script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_hostile_job_name_is_quoted_for_sbatch(plan_for: PlanFor) -> None:
    script = render(plan_for(make_spec(name='a "b" \\c #d'))).script
    assert '#SBATCH --job-name="a \\"b\\" \\\\c #d"' in script.splitlines()


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("gpu:2", "gpu:2"),
        ("B:USR1@120", "B:USR1@120"),
        ("/a/b-%j.out", "/a/b-%j.out"),
        ("my job", '"my job"'),
        ("it's", '"it\'s"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a\\b", '"a\\\\b"'),
        ("#x", '"#x"'),
        ("ünï", '"ünï"'),
    ],
)
def test_sbatch_quote(value: str, quoted: str) -> None:
    assert sbatch_quote(value) == quoted


@pytest.mark.parametrize(
    ("value", "words"),
    [("a\nb", "newline"), ("x\ty", "control"), ("myHetJob", "heterogeneous"), ("packjob", "het")],
)
def test_sbatch_quote_refuses(value: str, words: str) -> None:
    with pytest.raises(RenderError, match=words):
        sbatch_quote(value)


def test_missing_variable_names_template_and_variable(plan_for: PlanFor, tmp_path: Path) -> None:
    (tmp_path / "sbatch.sh.j2").write_text("#!/bin/bash\n{{ plan.job_dir }} {{ account_name }}\n")
    with pytest.raises(
        RenderError, match=r"template 'sbatch\.sh\.j2': 'account_name' is undefined"
    ):
        render(plan_for(CASES["cpu"]), extra_template_dirs=[tmp_path])


def test_missing_template(plan_for: PlanFor, tmp_path: Path) -> None:
    (tmp_path / "sbatch.sh.j2").write_text('{% include "nope.j2" %}\n')
    with pytest.raises(RenderError, match=r"template 'nope\.j2' not found"):
        render(plan_for(CASES["cpu"]), extra_template_dirs=[tmp_path])


def test_template_syntax_error(plan_for: PlanFor, tmp_path: Path) -> None:
    (tmp_path / "sbatch.sh.j2").write_text("line\n{% if %}\n")
    with pytest.raises(RenderError, match="line 2: syntax error"):
        render(plan_for(CASES["cpu"]), extra_template_dirs=[tmp_path])


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_script_runs_with_private_dir_and_one_log_per_attempt(
    plan_for: PlanFor, tmp_path: Path
) -> None:
    """Run the whole script under bash as slurmd would (minus --chdir) for two attempts."""
    dumper = tmp_path / "dump.py"
    dumper.write_text(
        "import json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'attempt': os.environ['HPCLAUNCH_ATTEMPT'],"
        " 'umask': os.umask(0)}))\n"
    )
    spec = make_spec(command=[sys.executable, str(dumper), "x y"])
    home = tmp_path / "home"
    job = render(plan_for(spec, home=str(home), cwd=str(tmp_path)))
    job_dir = Path(job.plan.job_dir)
    for attempt in ("0", "1"):
        env = {**os.environ, "SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": attempt}
        if attempt == "0":
            del env["SLURM_RESTART_COUNT"]  # a first attempt has no restart count
        proc = subprocess.run(
            ["bash", "-c", job.script, "job.sbatch"],
            cwd=job.plan.workdir,  # slurmd's --chdir
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""  # everything went to the attempt log
    assert stat.S_IMODE(job_dir.stat().st_mode) == 0o700
    logs = sorted(p.name for p in job_dir.iterdir())
    assert logs == ["attempt-0.log", "attempt-1.log"]
    for attempt in ("0", "1"):
        lines = (job_dir / f"attempt-{attempt}.log").read_text().splitlines()
        assert lines[0].startswith(f"hpclaunch: job 42 attempt {attempt} on ")
        data = json.loads(lines[1])
        assert data["argv"] == ["x y"]
        assert data["attempt"] == attempt
        assert data["umask"] == current_umask()  # the submitter's umask is restored


def test_a_warning_during_set_up_reaches_the_sidecar(plan_for: PlanFor, tmp_path: Path) -> None:
    """Slurm's USR1 lands while the script still sets up (here: the venv's activate sends
    it to the batch shell): bash does not die of it; the sidecar, once it runs, records
    ``early_signal`` and handles it like a warning at its start (no scontrol here: the
    requeue fails, exit 75). Without the trap bash dies of USR1 (exit 138)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("kill -USR1 $$\nsleep 0.2\n")
    repo = Path(__file__).resolve().parents[3]
    trainer = repo / "tests" / "supervise" / "trainer.py"
    spec = make_spec(
        command=[sys.executable, str(trainer), "--steps", "1000"],
        launcher="srun",
        tier="low",
        venv=str(venv),
        resources={"time": "10"},
    )
    job = render(
        plan_for(spec, home=str(tmp_path / "home"), cwd=str(tmp_path), python=sys.executable)
    )
    # An scontrol that refuses, first on PATH: Debian's 22.05 package puts a real one in
    # /usr/bin, which requeued job 42 of a running test cluster.
    nobin = tmp_path / "nobin"
    nobin.mkdir()
    (nobin / "scontrol").write_text("#!/bin/sh\necho 'scontrol: no cluster here' >&2\nexit 1\n")
    (nobin / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_JOB_ID="42", PATH=f"{nobin}:/usr/bin:/bin", PYTHONPATH=str(repo))
    proc = subprocess.run(
        ["bash", "-c", job.script, "job.sbatch"],
        cwd=job.plan.workdir,  # slurmd's --chdir
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 75, (proc.returncode, proc.stderr)
    ledger = Path(job.plan.job_dir) / "events.jsonl"
    events = [json.loads(line)["event"] for line in ledger.read_text().splitlines()]
    assert events[:3] == ["attempt_start", "early_signal", "signal_received"], events


def test_venv_is_activated_before_the_command(plan_for: PlanFor, tmp_path: Path) -> None:
    """A spec's venv (relative to the workdir, here with a space and a quote in its path)
    is activated, so `python` in the command is the venv's."""
    venv = tmp_path / "it's a venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(
        'export VIRTUAL_ENV="' + str(venv) + '"\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n'
    )
    fake_python = venv / "bin" / "python"
    fake_python.write_text('#!/bin/sh\necho "venv python $*"\n')
    fake_python.chmod(0o755)
    spec = make_spec(name="v", command=["python", "train.py"], venv="it's a venv")
    plan = plan_for(spec, cwd=str(tmp_path))
    assert plan.venv == str(venv)
    section = tmp_path / "section.sh"
    section.write_text(render_command_section(plan))
    proc = subprocess.run(
        ["bash", "-u", str(section)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "venv python train.py\n"


def test_no_venv_no_activation(plan_for: PlanFor) -> None:
    script = render(plan_for(make_spec(name="n", command=["true"]))).script
    assert "activate" not in script


FAKE_TOOLS = """
module() { echo "module $*" >> "$TRACE"; }
conda() {
  if [ "$1" = shell.bash ]; then echo 'echo hook >> "$TRACE"'; else echo "conda $*" >> "$TRACE"; fi
}
export -f module conda
"""


def test_modules_conda_scratch_then_script_with_args(plan_for: PlanFor, tmp_path: Path) -> None:
    """Under bash with fake module/conda functions: the site's modules, the spec's, conda's
    hook, activation, in that order; then the script gets exactly its args."""
    script = tmp_path / "it's.sh"
    script.write_text('#!/bin/bash\nprintf "%s\\n" "$HPCLAUNCH_SCRATCH" "$@" >> "$TRACE"\n')
    script.chmod(0o755)
    spec = make_spec(
        command=None,
        script="it's.sh",
        args=["a b", "$(touch canary)", "`x`"],
        modules=["cuda/12.1"],
        conda="torch env".replace(" ", "-"),
    )
    plan = plan_for(spec, SITES["envdeps"], cwd=str(tmp_path))
    trace = tmp_path / "trace"
    section = tmp_path / "section.sh"
    section.write_text(FAKE_TOOLS + render_command_section(plan))
    proc = subprocess.run(
        ["bash", "-u", str(section)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "TRACE": str(trace), "SCRATCH": "/fast"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert trace.read_text().splitlines() == [
        "module load gcc/12.2",
        "module load cuda/12.1",
        "hook",
        "conda activate torch-env",
        "/fast/hpclaunch",
        "a b",
        "$(touch canary)",
        "`x`",
    ]
    assert not (tmp_path / "canary").exists()


def test_missing_module_command_and_scratch_variable_fail_clearly(
    plan_for: PlanFor, tmp_path: Path
) -> None:
    plan = plan_for(make_spec(command=["true"], modules=["cuda"]), SITES["envdeps"])
    section = render_command_section(plan)
    proc = subprocess.run(
        ["bash", "-c", section],
        env={"PATH": "/usr/bin:/bin", "SCRATCH": "/s"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 127
    assert "the 'module' command is not defined" in proc.stderr
    proc = subprocess.run(
        ["bash", "-c", section],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "the scratch variable SCRATCH of the site config is not set" in proc.stderr


def test_a_node_without_the_workdir_stops_before_anything_runs(
    plan_for: PlanFor, tmp_path: Path
) -> None:
    """Slurm starts the script in /tmp when the node lacks --chdir's directory: the script
    notices, says where and why in one line, and runs nothing (a hostile name stays inert)."""
    workdir = tmp_path / "pro ject $(touch pwned)"
    marker = tmp_path / "ran"
    spec = make_spec(command=["touch", str(marker)], workdir=str(workdir))
    job = render(plan_for(spec, home=str(tmp_path / "home"), cwd=str(tmp_path)))
    env = {**os.environ, "SLURM_JOB_ID": "42"}

    def run_in(cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", job.script, "job.sbatch"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    elsewhere = tmp_path / "fallback"  # where Slurm started it instead
    elsewhere.mkdir()
    proc = run_in(elsewhere)
    assert proc.returncode == EXIT_NO_WORKDIR, proc.stderr
    assert not marker.exists()
    assert not (tmp_path / "pwned").exists()
    assert not (elsewhere / "pwned").exists()
    log_dir = Path(job.plan.log_dir)
    (why,) = (log_dir / jobdir.START_FAILURE).read_text().splitlines()
    assert why.startswith(f"the node {socket.gethostname()} has no directory {workdir} ")
    assert f"Slurm started the job in {elsewhere} instead" in why
    assert "a filesystem the compute nodes share" in why
    assert f"hpclaunch: {why}" in (log_dir / "attempt-0.log").read_text()

    workdir.mkdir()  # the node has it: the command runs
    proc = run_in(workdir)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
