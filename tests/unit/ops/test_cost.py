"""hpclaunch.slurm.usage and ``hpclaunch cost``: sacct lines (recorded on the local Slurm 22.05
cluster, plus a running, a pending and a typed-GPU line), requeued attempts, clipping to the
period, grouping, prices, and the table, JSON and CSV output."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.ops.cost import report, tier_of_qos
from hpclaunch.slurm.usage import COST_FIELDS, cost_argv, parse_usage, parse_when
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeSlurm, install_fake_slurm, result

# sacct -a -X -D -n -P -S ... -E ... --format=COST_FIELDS. 4472 was requeued after 3 s
# (REQUEUED line) and then ran 6 s: without -D sacct prints only the 6 s line.
RECORDED = (Path(__file__).parents[1] / "data" / "sacct_cost.txt").read_text()
SINCE = datetime(2026, 11, 22, 13, 0)
UNTIL = datetime(2026, 11, 22, 15, 0)


@pytest.fixture(scope="module")
def site() -> SiteConfig:
    return load_site("local")


def test_argv_is_one_sacct_with_every_attempt() -> None:
    argv = cost_argv(SINCE, UNTIL, all_users=True)
    assert argv[:6] == ["sacct", "-a", "-X", "-D", "-n", "-P"]
    assert argv[6:10] == ["-S", "2026-11-22T13:00:00", "-E", "2026-11-22T15:00:00"]
    assert argv[-1] == f"--format={','.join(COST_FIELDS)}"
    assert cost_argv(SINCE, UNTIL, all_users=False, user="bob")[1] == "--user=bob"


def test_parse_recorded_lines() -> None:
    usages = parse_usage(RECORDED)
    assert len(usages) == 9  # the garbage line is skipped
    requeued, final = usages[0], usages[1]
    assert (requeued.job_id, requeued.state, requeued.elapsed, requeued.gpus) == (
        "4472",
        "REQUEUED",
        3,
        2,
    )
    assert final.elapsed == 6
    assert usages[2].state == "CANCELLED"
    assert usages[3].gpus == 0  # no GPUs
    running = usages[6]
    assert (running.state, running.end, running.start) == (
        "RUNNING",
        None,
        datetime(2026, 11, 22, 14, 45),
    )
    assert usages[7].start is None
    assert (usages[8].gpus, dict(usages[8].typed)) == (2, {"a100": 2})


def test_each_attempt_counts_once_and_straddling_jobs_are_clipped(site: SiteConfig) -> None:
    usages = {(u.job_id, u.state): u for u in parse_usage(RECORDED)}
    assert usages["4472", "REQUEUED"].seconds_in(SINCE, UNTIL) == 3
    assert usages["4472", "COMPLETED"].seconds_in(SINCE, UNTIL) == 6
    # 12:00-14:00 with the period from 13:00: one hour of its two.
    assert usages["2408", "COMPLETED"].seconds_in(SINCE, UNTIL) == 3600
    # Running since 14:45 for 600 s (sacct's elapsed up to now), period until 14:50.
    running = usages["1_0", "RUNNING"]
    assert running.seconds_in(SINCE, datetime(2026, 11, 22, 14, 50)) == 300
    assert running.seconds_in(SINCE, UNTIL) == 600
    assert usages["1_1", "PENDING"].seconds_in(SINCE, UNTIL) == 0
    # Never more than ElapsedRaw (suspended time is not in it).
    assert usages["3001", "COMPLETED"].seconds_in(datetime(2026, 1, 1), UNTIL) == 36

    cost = report(parse_usage(RECORDED), site, SINCE, UNTIL, ("project",))
    hours = {row.keys: row.gpu_hours for row in cost.rows}
    research = (2 * 9 + 4 * 3600 + 1 * 600 + 2 * 3600) / 3600
    assert hours == {("research",): pytest.approx(research), ("vision",): pytest.approx(36 / 3600)}
    assert cost.total.gpu_hours == pytest.approx(research + 36 / 3600)
    # Jobs with GPU time: 4472 (2 attempts: one job), 2408, 1_0, 5000; 3001 in vision.
    assert [(row.keys, row.jobs) for row in cost.rows] == [(("research",), 4), (("vision",), 1)]
    assert cost.total.jobs == 5


def test_project_and_tier_of_accounts_and_qos(site: SiteConfig) -> None:
    assert site.project_of("research-oq") == "research"
    assert site.project_of("vision") == "vision"
    assert site.project_of("other-oq") == "other"  # the site's pattern
    assert site.project_of("other") == "other"
    assert [tier_of_qos(site, q) for q in ("normal", "low", "overquota", "odd")] == [
        "medium",
        "low",
        "over-quota",
        "qos:odd",
    ]


def test_grouping_by_tier_and_user_and_prices(site: SiteConfig) -> None:
    cost = report(parse_usage(RECORDED), site, SINCE, UNTIL, ("tier", "user"))
    rows = {row.keys: row for row in cost.rows}
    assert set(rows) == {
        ("high", "root"),
        ("low", "root"),
        ("medium", "root"),
        ("over-quota", "hpcuser"),
    }
    # local.yaml: 2.5 EUR per GPU-hour, a100 3.2: job 5000 has 2 a100 for one hour.
    assert rows["high", "root"].cost == pytest.approx(2 * 3.2)
    assert rows["medium", "root"].cost == pytest.approx((2 * 9 + 4 * 3600) / 3600 * 2.5)
    assert cost.currency == "EUR"
    assert cost.total.cost == pytest.approx(sum(r.cost or 0 for r in cost.rows))
    unpriced = report(parse_usage(RECORDED), site.model_copy(update={"prices": None}), SINCE, UNTIL)
    assert unpriced.currency is None
    assert unpriced.total.cost is None
    assert "cost" not in unpriced.to_dict()["total"]  # type: ignore[operator]
    with pytest.raises(ValueError, match="group by"):
        report([], site, SINCE, UNTIL, ("account",))


def test_parse_when() -> None:
    now = datetime(2026, 11, 22, 15, 30, 10)
    assert parse_when("now", now) == now
    assert parse_when("today", now) == datetime(2026, 11, 22)
    assert parse_when("7d", now) == datetime(2026, 11, 15, 15, 30, 10)
    assert parse_when("90min", now) == datetime(2026, 11, 22, 14, 0, 10)
    assert parse_when("2026-11-01", now) == datetime(2026, 11, 1)
    assert parse_when("2026-11-01T08:00", now) == datetime(2026, 11, 1, 8)
    with pytest.raises(ValueError, match="not a time"):
        parse_when("last tuesday", now)


# -- the command ------------------------------------------------------------------------


@dataclass
class CostSlurm(FakeSlurm):
    """FakeSlurm that also answers the cost sacct call with :data:`RECORDED`."""

    calls: int = 0

    def _sacct(self, argv: tuple[str, ...]) -> CommandResult:
        if "-D" in argv and f"--format={','.join(COST_FIELDS)}" in argv:
            self.calls += 1
            return result(argv, out=RECORDED)
        return super()._sacct(argv)


@pytest.fixture
def cost_slurm(monkeypatch: pytest.MonkeyPatch) -> CostSlurm:
    fake = CostSlurm()
    install_fake_slurm(monkeypatch, fake)
    return fake


PERIOD = ("--since", "2026-11-22T13:00", "--until", "2026-11-22T15:00")


def test_cost_json(env: dict[str, str], cost_slurm: CostSlurm) -> None:
    out = run(env, "cost", *PERIOD, "--all-users", "--json", "--by", "project", "--by", "tier")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert cost_slurm.calls == 1
    assert data["by"] == ["project", "tier"]
    assert data["currency"] == "EUR"
    assert {(g["project"], g["tier"]) for g in data["groups"]} == {
        ("research", "high"),
        ("research", "low"),
        ("research", "medium"),
        ("vision", "over-quota"),
    }
    assert set(data["total"]) == {"jobs", "gpu_hours", "charged_gpu_hours", "cost"}
    # What fair share counts: preemptible and over-quota work at the site's factor 0.5.
    for group in data["groups"]:
        factor = 0.5 if group["tier"] in ("low", "over-quota") else 1.0
        assert group["charged_gpu_hours"] == pytest.approx(factor * group["gpu_hours"])
    assert 0 < data["total"]["charged_gpu_hours"] < data["total"]["gpu_hours"]
    assert sum(a["gpu_hours"] for a in data["attempts"]) == pytest.approx(
        data["total"]["gpu_hours"]
    )
    assert (data["since"], data["until"]) == ("2026-11-22T13:00:00", "2026-11-22T15:00:00")


def test_cost_csv_and_table(env: dict[str, str], cost_slurm: CostSlurm) -> None:
    out = run(env, "cost", *PERIOD, "--csv", "--by", "user")
    assert out.exit_code == 0, out.output
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0] == ["user", "jobs", "gpu_hours", "charged_gpu_hours", "cost", "currency"]
    assert [r[0] for r in rows[1:]] == ["hpcuser", "root"]
    table = run(env, "cost", *PERIOD)
    assert table.exit_code == 0, table.output
    assert "COST (EUR)" in table.stdout
    assert "CHARGED" in table.stdout  # the recorded attempts include low and over-quota work
    assert "TOTAL" in table.stdout
    assert "research" in table.stdout


def test_cost_bad_flags(env: dict[str, str], cost_slurm: CostSlurm) -> None:
    assert_clean_error(run(env, "cost", "--json", "--csv"), 2, "choose one")
    assert_clean_error(
        run(env, "cost", "--since", "2026-11-22", "--until", "2026-11-21"), 2, "empty"
    )
    bad = run(env, "cost", "--since", "yesterday-ish")
    assert bad.exit_code == 2
    assert "not a time" in bad.output


def test_cost_from_python_is_the_clis(
    env: dict[str, str], cost_slurm: CostSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import datetime

    import hpclaunch

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    report_ = hpclaunch.Session().cost(
        since=datetime(2026, 11, 22, 13), until=datetime(2026, 11, 22, 15), all_users=True
    )
    cli = json.loads(run(env, "cost", *PERIOD, "--all-users", "--json").stdout)
    assert report_.to_dict() == cli
    with pytest.raises(hpclaunch.HpclaunchError, match="the period is empty"):
        hpclaunch.Session().cost(since=datetime(2026, 11, 22), until=datetime(2026, 11, 21))
