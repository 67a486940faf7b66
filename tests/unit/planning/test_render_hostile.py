"""Property tests: hostile names, arguments and environment values reach the job exactly,
and nothing in them ever runs.

* The command section of the script (templates/command.sh.j2, rendered standalone) is run
  under bash; a tiny python program dumps the argv and environment it received as JSON.
  Hostile strings try ``$(touch canary)`` and backticks: the canary must never appear.
* ``#SBATCH`` lines are parsed back with a re-implementation of sbatch's own line splitter
  (Slurm 22.05 src/sbatch/opt.c ``_get_argument``: blanks split, ``'``/``"`` quote,
  ``\\`` escapes everywhere, an unquoted ``#`` ends the line) and must give back the value.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.plan import build_plan
from hpclaunch.planning.render import render, render_command_section
from tests.unit.conftest import CONTAINER_SITE, SUBMISSION_ID, hostile_text, make_site

env_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: (
        not n.upper().startswith(("SLURM_", "SBATCH_", "HPCLAUNCH_"))
        and n not in {"PATH", "LC_ALL", "PWD", "SHLVL", "_", "OLDPWD", "LC_CTYPE"}
    )
)
job_names = hostile_text.filter(
    lambda n: (
        n.strip() != ""
        and n.isprintable()
        and len(n) <= 200
        and "hetjob" not in n.lower()
        and "packjob" not in n.lower()
    )
)

DUMPER = (
    "import json, os, sys\njson.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, sys.stdout)\n"
)
# Variables bash itself (or python) may add to a child's environment.
SHELL_ADDED = {"PWD", "SHLVL", "_", "OLDPWD", "LC_CTYPE"}
SITE = make_site()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    args=st.lists(hostile_text, max_size=5),
    env=st.dictionaries(env_names, hostile_text, max_size=4),
)
def test_command_and_env_arrive_exactly(args: list[str], env: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        dumper = workdir / "dump.py"
        dumper.write_text(DUMPER)
        spec = JobSpec(name="x", command=(sys.executable, str(dumper), *args), env=env)
        plan = build_plan(spec, SITE, submission_id=SUBMISSION_ID, home=tmp, cwd=tmp)
        section = workdir / "section.sh"
        section.write_text(render_command_section(plan), encoding="utf-8")
        proc = subprocess.run(
            ["bash", str(section)],
            cwd=workdir,
            env={"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"},
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert proc.stderr == b""
        got = json.loads(proc.stdout)  # exactly one JSON document: nothing else printed
        assert got["argv"] == args
        expected_env = {**dict(plan.runtime_env), **env}
        for name, value in expected_env.items():
            assert got["env"][name] == value
        unexpected = set(got["env"]) - set(expected_env) - {"PATH", "LC_ALL"} - SHELL_ADDED
        assert not unexpected
        assert not (workdir / "canary").exists()


# Its filtered strategy is the slowest to draw: as the other tests here, no health check
# for slow data (it failed once in a full parallel unit run, 2026-11-27, and passed on every
# rerun; its message was not kept: the likely cause, not a confirmed one).
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    name=job_names,
    workdir=hostile_text.filter(
        lambda w: (
            w.isprintable()
            and w.strip()
            and "hetjob" not in w.lower()
            and "packjob" not in w.lower()
            and "\\" not in w
            and not w.startswith("~")
        )
    ),
)
def test_sbatch_lines_give_back_the_values(name: str, workdir: str) -> None:
    spec = JobSpec(name=name, command=("true",), workdir=workdir)
    plan = build_plan(spec, SITE, submission_id=SUBMISSION_ID, home="/h", cwd="/c")
    script = render(plan).script
    parsed = [
        sbatch_line_args(line[len("#SBATCH") :])
        for line in script.splitlines()
        if line.startswith("#SBATCH")
    ]
    expected = [
        [flag if value is None else f"{flag}={value}"] for flag, value in plan.sbatch_options
    ]
    assert parsed == expected
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)


def sbatch_line_args(rest: str) -> list[str]:
    """Split what follows ``#SBATCH`` into arguments the way sbatch does (see module doc)."""
    blanks = " \t\n\v\f\r"  # C isspace() in the C locale: ASCII only
    args: list[str] = []
    i, n = 0, len(rest)
    while True:
        while i < n and rest[i] in blanks:
            i += 1
        arg: list[str] = []
        quote = ""
        escaped = comment = False
        while i < n and (quote or rest[i] not in blanks) and rest[i] != "\n":
            char = rest[i]
            i += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                comment = True
                break
            arg.append(char)
        if quote:
            raise ValueError(f"sbatch would stop: unmatched {quote} in {rest!r}")
        if not arg:  # sbatch stops at the first empty argument
            return args
        args.append("".join(arg))
        if comment:
            return args


def test_the_splitter_itself() -> None:
    assert sbatch_line_args(' --a=1 --b="x y" # c') == ["--a=1", "--b=x y"]
    assert sbatch_line_args(" --a='it\"s' --b=\\#x") == ['--a=it"s', "--b=#x"]
    assert sbatch_line_args(' --a="p\\"q\\\\r"') == ['--a=p"q\\r']


# Module and conda names: what the spec lets through (one word, no quotes, $, ;, ...) must
# still reach `module`/`conda` exactly, glob characters and all.
word_names = hostile_text.map(lambda w: "m" + re.sub(r"[\s'\"`$;&|<>(){}\\]", "", w))
script_names = hostile_text.filter(
    lambda n: (
        bool(n)
        and "/" not in n
        and "\\" not in n
        and n not in {".", ".."}
        and not n.startswith("~")
    )
)
RECORDERS = """
module() { printf '%s\\0' module "$@" >> "$TRACE"; }
conda() {
  if [ "$1" = shell.bash ]; then echo :; else printf '%s\\0' conda "$@" >> "$TRACE"; fi
}
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=script_names,
    args=st.lists(hostile_text, max_size=4),
    modules=st.lists(word_names, min_size=1, max_size=3),
    conda=word_names,
)
def test_script_args_modules_and_conda_arrive_exactly(
    script: str, args: list[str], modules: list[str], conda: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        path = workdir / script
        try:
            path.write_text(f"#!{sys.executable}\n" + DUMPER, encoding="utf-8")
        except (OSError, UnicodeEncodeError):  # a name this filesystem cannot hold
            return
        path.chmod(0o755)
        spec = JobSpec(name="x", script=script, args=args, modules=modules, conda=conda)
        site = make_site(module_system="lmod")
        plan = build_plan(spec, site, submission_id=SUBMISSION_ID, home=tmp, cwd=tmp)
        trace = workdir / "trace"
        section = workdir / "section.sh.txt"
        section.write_text(RECORDERS + render_command_section(plan), encoding="utf-8")
        proc = subprocess.run(
            ["bash", str(section)],
            cwd=workdir,
            env={"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8", "TRACE": str(trace)},
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert json.loads(proc.stdout)["argv"] == args
        calls = trace.read_bytes().decode().split("\0")[:-1]
        expected = [w for m in modules for w in ("module", "load", m)]
        assert calls == [*expected, "conda", "activate", conda]
        assert not (workdir / "canary").exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runtime=st.sampled_from(["apptainer", "charliecloud", "pyxis", "oci"]),
    env=st.dictionaries(env_names, hostile_text, min_size=1, max_size=3),
    image=hostile_text,
)
def test_container_env_and_image_reach_the_runtime_exactly(
    runtime: str, env: dict[str, str], image: str
) -> None:
    """The container's ``env`` and image, as the runtime program receives them: the program
    (``apptainer``, ``ch-run``, ``srun``) is the dumper, first on PATH."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bin_dir = workdir / "bin"
        bin_dir.mkdir()
        program = {"charliecloud": "ch-run", "pyxis": "srun", "oci": "srun"}.get(runtime, runtime)
        fake = bin_dir / program
        fake.write_text(f"#!{sys.executable}\n{DUMPER}")
        fake.chmod(0o755)
        container = {"image": "/" + image.replace("\n", ""), "runtime": runtime, "env": env}
        spec = JobSpec(name="x", command=("true",), container=container)  # type: ignore[arg-type]
        plan = build_plan(spec, CONTAINER_SITE, submission_id=SUBMISSION_ID, home=tmp, cwd=tmp)
        section = workdir / "section.sh"
        section.write_text(render_command_section(plan), encoding="utf-8")
        proc = subprocess.run(
            ["bash", str(section)],
            cwd=workdir,
            env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"},
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        got = json.loads(proc.stdout)
        assert got["argv"] == list(plan.launch_argv[1:])
        if runtime == "charliecloud":
            assert [f"--set-env={n}={v}" for n, v in env.items()] == [
                a for a in got["argv"] if a.startswith("--set-env=")
            ]
        else:
            prefix = "APPTAINERENV_" if runtime == "apptainer" else ""
            for name, value in env.items():
                assert got["env"][prefix + name] == value
        assert not (workdir / "canary").exists()
