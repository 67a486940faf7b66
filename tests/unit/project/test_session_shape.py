"""``Session`` stays a small core of the cluster's verbs with nouns for the rest (issue 46):
a method added for every new thing would make it a phone book again."""

from __future__ import annotations

import hpclaunch
from hpclaunch.ops.nouns import Pipelines, SiteSetup, Sweeps, Webhooks


def _public_methods(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))]


def test_session_has_at_most_twenty_public_methods() -> None:
    methods = _public_methods(hpclaunch.Session)
    assert len(methods) <= 20, methods
    assert {"submit", "dryrun", "render", "map", "job", "status", "cancel"} <= set(methods)


def test_the_nouns_hold_the_rest() -> None:
    session = hpclaunch.Session(warn=lambda _message: None)
    assert isinstance(session.sweeps, Sweeps)
    assert isinstance(session.pipelines, Pipelines)
    assert isinstance(session.site, SiteSetup)
    assert isinstance(session.notify, Webhooks)
    assert session.sweeps is session.sweeps  # one each a session
    # One preview convention: what submits has a dryrun beside it.
    for noun in (Sweeps, Pipelines):
        assert {"submit", "dryrun"} <= set(_public_methods(noun))
    assert {"submit", "dryrun"} <= set(_public_methods(hpclaunch.Session))


def test_no_static_helper_is_left_on_session() -> None:
    """What needs no session lives in ``hpclaunch.ops.helpers``, not as static methods."""
    statics = [
        name
        for name, value in vars(hpclaunch.Session).items()
        if isinstance(value, (staticmethod, classmethod))
    ]
    assert statics == []
