"""SubmitOptions: one value through every submit path; ``then`` chains the hooks."""

from __future__ import annotations

import dataclasses

import pytest

from hpclaunch.ops.submit_options import SubmitOptions


def test_then_calls_the_given_hook_after_the_one_there_and_leaves_the_original() -> None:
    calls: list[str] = []
    first: SubmitOptions[str] = SubmitOptions(
        submission_id="s1", before_submit=lambda plan: calls.append(f"upload {plan}")
    )
    both = first.then(lambda plan: calls.append(f"write call {plan}"))
    assert both.before_submit is not None
    both.before_submit("p")
    assert calls == ["upload p", "write call p"]
    assert (both.submission_id, both.check, both.dry_run) == ("s1", True, False)
    calls.clear()
    assert first.before_submit is not None
    first.before_submit("q")
    assert calls == ["upload q"]


def test_then_without_a_hook_there_calls_only_the_new_one() -> None:
    seen: list[int] = []
    chained = SubmitOptions[int]().then(seen.append)
    assert chained.before_submit is not None
    chained.before_submit(3)
    assert seen == [3]


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SubmitOptions().check = False  # type: ignore[misc]
