"""``hpclaunch resize --force`` right after a refused resize reported the old refusal
(issue 45): the answer is the sidecar's entry for this request's id."""

from __future__ import annotations

from hpclaunch.ops.resize import _answer_to
from hpclaunch.supervise.resize import request_data


def test_the_answer_is_the_entry_of_this_request_not_an_older_refusal() -> None:
    older = request_data(2, why="asked by the user", by="me", force=False)
    forced = request_data(2, why="asked by the user", by="me", force=True)
    assert older["request_id"] != forced["request_id"]
    at = float(forced["requested_at"])
    ledger = [
        {"event": "resize_requested", "time": at - 3, "request_id": older["request_id"],
         "refused": "the last resize was 37 s ago"},
        {"event": "resize_requested", "time": at + 1, "request_id": forced["request_id"],
         "refused": None},
        {"event": "resize_issued", "time": at + 2},
        {"event": "attempt_end", "time": at + 3, "reason": "resized"},
    ]  # fmt: skip
    answer = _answer_to(ledger, forced)
    assert answer[0]["request_id"] == forced["request_id"]
    assert not answer[0]["refused"]
    assert [e["event"] for e in answer[1:]] == ["resize_issued", "attempt_end"]
    assert _answer_to(ledger[:1], forced) == []  # not taken yet
