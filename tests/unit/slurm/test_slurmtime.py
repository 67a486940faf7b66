"""Slurm time formats (sbatch --time, slurm.conf MaxTime)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from hpclaunch.slurm.times import (
    clock_text,
    format_time,
    parse_cpu_time,
    parse_time,
    parse_time_limit,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        (30, 1800),
        ("5:30", 330),
        ("01:00:00", 3600),
        ("48:00:00", 172800),
        ("2-12", 2 * 86400 + 12 * 3600),
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
        (" 10 ", 600),
    ],
)
def test_parse(text: str | int, seconds: int) -> None:
    assert parse_time(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "abc", "1:2:3:4", "-5", "0", "00:00:00", "1-25", "10:61", "1.5"]
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"time|zero|below"):
        parse_time(text)


def test_bool_is_not_a_time() -> None:
    with pytest.raises(ValueError, match="time limit"):
        parse_time(True)


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", None])
def test_unlimited(text: str | None) -> None:
    assert parse_time_limit(text) is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(60, "00:01:00"), (3600, "01:00:00"), (90061, "1-01:01:01")]
)
def test_format(seconds: int, text: str) -> None:
    assert format_time(seconds) == text
    assert parse_time(text) == seconds


@pytest.mark.parametrize(
    ("text", "meant"),
    [("2h", "02:00:00"), ("90m", "01:30:00"), ("1d", "1-00:00:00"), ("1.5h", "01:30:00")],
)
def test_a_time_with_a_unit_is_refused_with_slurms_spelling(text: str, meant: str) -> None:
    """Issue 27: ``time: 2h`` got no suggestion."""
    with pytest.raises(ValueError, match=f"for {re.escape(text)} write {meant}$"):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:01.500", 1.5),
        ("01:02:03", 3723.0),
        ("1-00:00:00", 86400.0),
        ("12:34", 754.0),
        ("", None),
        ("x", None),
        ("00:01.5x", None),
    ],
)
def test_cpu_time_as_sacct_prints_it(text: str, seconds: float | None) -> None:
    assert parse_cpu_time(text) == seconds


def test_clock_text_shows_the_date_only_on_another_day() -> None:
    """Against a clock the test sets: the same day, a minute past midnight, New Year."""

    def at(text: str) -> float:
        return datetime.fromisoformat(text).timestamp()

    now = at("2026-11-29T10:00:00")
    assert clock_text(at("2026-11-29T15:00:00"), now) == "15:00"
    assert clock_text(at("2026-11-30T00:01:00"), now) == "11-30 00:01"
    assert clock_text(at("2027-01-01T00:00:10"), at("2026-12-31T23:59:50")) == "01-01 00:00"
    assert clock_text(at("2028-02-29T23:59:00"), at("2028-02-29T00:00:00")) == "23:59"
