"""Fixtures and helpers for the unit tests: the local site, specs and plans built from dicts,
the CLI run in this process against a fake Slurm, and hostile text for quoting tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import strategies as st

from hpclaunch.cli import cli
from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.plan import SubmissionPlan, build_plan
from hpclaunch.store.history import SubmissionRecord, history_path, record_submission
from hpclaunch.transport.base import Runner

from .fakes import FakeSlurm, install_fake_slurm

SUBMISSION_ID = "0123456789abcdef0123456789abcdef"
HOME = "/home/alice"
CWD = "/home/alice/project"
#: The sidecar's interpreter in rendered scripts (build_plan's default is sys.executable).
PYTHON = "/opt/hpclaunch/venv/bin/python"
REPO = Path(__file__).resolve().parents[2]
HELLO = str(REPO / "examples" / "hello.yaml")
#: The environment of a CLI run (:func:`run`).
Env = dict[str, str]


@pytest.fixture(scope="session")
def site() -> SiteConfig:
    """site-configs/local.yaml."""
    return load_site("local")


def make_spec(**fields: Any) -> JobSpec:
    """A valid JobSpec; keyword arguments replace or add fields."""
    data: dict[str, Any] = {"name": "test", "command": ["python", "train.py"]}
    data.update(fields)
    return JobSpec.model_validate(data)


def make_site(**fields: Any) -> SiteConfig:
    """A small valid SiteConfig; keyword arguments replace fields."""
    data: dict[str, Any] = {
        "name": "testsite",
        "partitions": [
            {"name": "short", "gpus_per_node": 4, "cpus_per_node": 8, "max_time": "30"},
            {
                "name": "long",
                "gpus_per_node": 4,
                "cpus_per_node": 8,
                "max_time": "2-00:00:00",
                "default": True,
            },
        ],
        "tiers": {"medium": {"qos": "normal"}, "low": {"qos": "low", "preemptible": True}},
        "default_account": "research",
        "poll_min_interval": 0.01,
    }
    data.update(fields)
    return SiteConfig.model_validate(data)


@pytest.fixture
def plan_for(site: SiteConfig) -> Callable[..., SubmissionPlan]:
    """Build a plan for a spec (default: the local site, fixed id, home and cwd)."""

    def build(spec: JobSpec, on: SiteConfig | None = None, **kwargs: Any) -> SubmissionPlan:
        kwargs.setdefault("submission_id", SUBMISSION_ID)
        kwargs.setdefault("home", HOME)
        kwargs.setdefault("cwd", CWD)
        kwargs.setdefault("python", PYTHON)
        return build_plan(spec, on or site, **kwargs)

    return build


# -- the CLI in this process, against a fake Slurm behind the real CliBackend ---------------


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return install_fake_slurm(monkeypatch)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private HOME and XDG dirs; the fake backend; a site that allows fast polling."""
    site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site["poll_min_interval"] = 0.01
    site_path = tmp_path / "fast.yaml"
    site_path.write_text(yaml.safe_dump(site))
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "HPCLAUNCH_SITE": str(site_path),
        "HPCLAUNCH_BACKEND": "fakeslurm",
        "HPCLAUNCH_REMOTE": "",
    }


def run(
    env: dict[str, str], *args: str, runner: Runner | None = None, input: str | None = None
) -> Result:
    """``hpclaunch ARGS`` in this process; ``runner``: where its Slurm commands run;
    ``input``: its standard input."""
    obj = {"runner": runner} if runner is not None else None
    return CliRunner().invoke(cli, list(args), env=env, prog_name="hpclaunch", obj=obj, input=input)


def assert_clean_error(result: Result, code: int, words: str) -> None:
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1
    assert words in result.stderr
    assert "Traceback" not in result.output


def remember(env: Env, job_id: str, log_dir: Path, name: str = "job", sid: str = "") -> None:
    record_submission(
        SubmissionRecord(
            job_id=job_id,
            cluster=None,
            name=name,
            submission_id=sid or f"sid-{job_id}",
            job_dir=str(log_dir.parent),
            site="hpclaunch",
            submitted_at="2026-11-22T00:00:00+00:00",
            log_dir=str(log_dir),
            tier="low",
            qos="low",
        ),
        path=history_path(env),
    )


#: A site with every container runtime (apptainer the default).
CONTAINER_SITE = make_site(
    containers={
        "runtimes": ["apptainer", "charliecloud", "pyxis", "oci"],
        "image_dir": "~/images",
        "mounts": ["/shared", "/scratch:/scratch"],
        "flags": {"apptainer": ["--writable-tmpfs"], "pyxis": ["--no-container-mount-home"]},
        "hpclaunch_path": "/shared/hpclaunch/site-packages",
    }
)


#: Text that breaks quoting: shell syntax, Slurm's %-patterns, newlines, wide characters.
HOSTILE = [
    "$(touch canary)",
    "`touch canary`",
    "$(touch${IFS}canary)",
    "'",
    '"',
    "\\",
    "\n",
    "\r",
    ";",
    "&&",
    "|",
    ">",
    "<",
    "$HOME",
    "${PATH}",
    "*",
    "?",
    "~",
    "!",
    "#",
    "%j",
    " ",
    "\t",
    "-n",
    "--",
    "$'\\x41'",
    "ü",
    "日本",
    "🙂",
    "\u2028",
    "=",
    "{a,b}",
    "[x]",
]
ANY_CHAR = st.characters(codec="utf-8", exclude_characters="\x00")
hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(ANY_CHAR, max_size=6)), max_size=5
).map("".join)


def sweep_spec(
    *, sweep: dict[str, Any] | None = None, cap: int | None = None, **fields: Any
) -> JobSpec:
    data: dict[str, Any] = {"name": "sw", "command": ["python", "train.py"], **fields}
    if sweep is not None:
        data["sweep"] = {**sweep, **({"max_concurrent": cap} if cap else {})}
    return JobSpec.model_validate(data)


#: Every backend module: all of hpclaunch/backends/ but its light package and the protocols
#: of what a backend can do (backends/abilities.py: no backend, no Slurm call).
_BACKENDS = Path(__file__).parents[2] / "hpclaunch" / "backends"
BACKEND_MODULES = tuple(
    ".".join(
        ("hpclaunch", "backends", *path.relative_to(_BACKENDS).with_suffix("").parts)
    ).removesuffix(".__init__")
    for path in sorted(_BACKENDS.rglob("*.py"))
    if path.relative_to(_BACKENDS).as_posix() not in ("__init__.py", "abilities.py")
)
#: Modules too heavy for start-up (``--help``, ``import hpclaunch``).
HEAVY = (
    "jinja2",
    "rich",
    "pydantic",
    "yaml",
    "optuna",
    "wandb",
    "mlflow",
    "tensorboard",
    *BACKEND_MODULES,
    "hpclaunch.planning.render",
)

PROBE = """
import json, sys
{body}
heavy = sorted(m for m in sys.modules if m.startswith({heavy!r}))
print(json.dumps(heavy))
"""


def loaded_after(body: str) -> list[str]:
    code = PROBE.format(body=body, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
