"""What the 1,000-point sweep speed-ups must not change (bench/sweep_submit.py)."""

from __future__ import annotations

import json
import math
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.ops.sweep import submit_sweep
from hpclaunch.planning.points import params_lines
from hpclaunch.planning.sweep import plan_sweep
from tests.unit.conftest import HOME, SUBMISSION_ID, make_site, sweep_spec
from tests.unit.fakes import FakeRunner, result

SITE = make_site()


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "two\nlines",
        'quo"te\\',
        "ünïcødé ✓ 😀",
        "\u2028sep",
        "",
        0,
        -7,
        1.5e-3,
        True,
        math.inf,
        math.nan,
    ],
)
def test_params_lines_is_json_dumps_per_line(value: Any) -> None:
    # The shared encoder writes exactly what json.dumps(..., ensure_ascii=False) wrote.
    points = [{"a": value, "b": i} for i in range(3)]
    expected = "".join(
        json.dumps({"index": i, "params": p}, ensure_ascii=False) + "\n"
        for i, p in enumerate(points)
    )
    assert params_lines(points) == expected
    assert params_lines(points).count("\n") == 3  # the file is read by "\n" lines


def test_local_home_does_not_import_ssh() -> None:
    code = (
        "import sys\n"
        "from hpclaunch.ops.session import Session\n"
        "app = Session(env={'HOME': '/home/u'})\n"
        "print(app.home)\n"
        "print('hpclaunch.transport.ssh' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    home, ssh_loaded = out.stdout.split()
    assert ssh_loaded == "False"
    assert home


class _CountingRunner(FakeRunner):
    """A FakeRunner that also counts the writes of each file."""

    def __init__(self, answer: Any) -> None:
        super().__init__(answer)
        self.writes: Counter[str] = Counter()

    def put_file(self, path: str, content: str, mode: int) -> None:
        self.writes[path] += 1
        super().put_file(path, content, mode)


def test_a_sweep_writes_its_script_once_and_every_array_runs_it() -> None:
    from hpclaunch.backends.cli import CliBackend
    from hpclaunch.planning.render import render

    spec = sweep_spec(sweep={"method": "list", "points": [{"i": i} for i in range(7)]}, cap=2)
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    jobs = iter(["100", "101", "102"])
    runner = _CountingRunner(lambda argv: result(argv, out=next(jobs) + "\n"))
    refs = submit_sweep(CliBackend(runner, SITE), runner, planned)
    assert [r.job_id for r in refs] == ["100", "101", "102"]
    script = planned.plan.script_path
    assert runner.writes == {script: 1, planned.params_file: 1}
    assert runner.files[script] == (render(planned.plan).script, 0o700)
    sbatch = runner.calls_to("sbatch")
    assert [c[-2:] for c in sbatch] == [(script, "0"), (script, "3"), (script, "6")]
    # Each array is still tagged with its own submission id (a lost reply finds the right one).
    assert [c[3] for c in sbatch] == [f"--comment=hpclaunch:{SUBMISSION_ID}-a{i}" for i in range(3)]


def test_a_single_submit_still_writes_its_script() -> None:
    from hpclaunch.backends.cli import CliBackend
    from hpclaunch.planning.render import render

    spec = sweep_spec(sweep={"method": "list", "points": [{"i": 0}]})
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    runner = _CountingRunner(lambda argv: result(argv, out="7\n"))
    job = render(planned.plan)
    CliBackend(runner, SITE).submit(job)
    CliBackend(runner, SITE).submit(job, script_written=True)
    assert runner.writes == {job.script_path: 1}
    assert len(runner.calls_to("sbatch")) == 2


# -- compiled templates kept on disk ---------------------------------------------------------


@pytest.fixture
def template_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from hpclaunch.planning import render as render_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    render_module._environment.cache_clear()
    yield tmp_path / "cache" / "hpclaunch" / "templates"
    render_module._environment.cache_clear()


def _fresh_render(plan: Any, **kwargs: Any) -> str:
    from hpclaunch.planning import render as render_module

    render_module._environment.cache_clear()  # a new process: compile or load from disk
    return render_module.render(plan, **kwargs).script


def _one_point_plan() -> Any:
    spec = sweep_spec(sweep={"method": "list", "points": [{"i": 0}]})
    return plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3).plan


def test_cached_templates_render_the_same_script(template_cache: Path) -> None:
    plan = _one_point_plan()
    blocked = template_cache.parents[1].parent / "a-file"
    blocked.write_text("")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(blocked))  # no directory can be made under a file
        compiled = _fresh_render(plan)  # compiled in memory, as before
    first = _fresh_render(plan)
    assert stat.S_IMODE(template_cache.stat().st_mode) == 0o700
    assert list(template_cache.iterdir())  # written
    second = _fresh_render(plan)  # loaded
    assert compiled == first == second


def test_an_edited_template_is_compiled_again(template_cache: Path, tmp_path: Path) -> None:
    plan = _one_point_plan()
    override = tmp_path / "site-templates"
    override.mkdir()
    (override / "sbatch.sh.j2").write_text("#!/bin/bash\n# one {{ plan.job_name }}\n")
    assert _fresh_render(plan, extra_template_dirs=[override]).endswith("# one sw\n")
    (override / "sbatch.sh.j2").write_text("#!/bin/bash\n# two {{ plan.job_name }}\n")
    assert _fresh_render(plan, extra_template_dirs=[override]).endswith("# two sw\n")


def test_a_cache_others_can_write_is_not_used(template_cache: Path) -> None:
    from hpclaunch.planning.render import _template_cache

    template_cache.mkdir(parents=True)
    template_cache.chmod(0o777)
    assert _template_cache() is None
    template_cache.chmod(0o700)
    assert _template_cache() is not None
