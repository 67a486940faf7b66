"""How many more jobs an association and a QOS take now: their job-count limits as
slurmctld holds them (``scontrol show assoc_mgr``), each with the jobs counted against it.

A sweep is one job per array task to these limits (as to MaxJobCount): a sweep past one of
them fails part-way, its later arrays refused at sbatch with "Job violates accounting/QOS
policy (job submit limit, user's size and/or time limits)". What is read, per record
(``scontrol show assoc_mgr flags=assoc,qos users=U qos=Q``, the same text from 22.05 to
26.05: ``LIMIT(USED)``, ``N(USED)`` without a limit, empty where unset):

- the user's association in the account: ``MaxSubmitJobs`` (that user's jobs there) and
  ``GrpSubmitJobs``;
- the account and each parent up to the root (``ParentAccount=NAME(ID)``):
  ``GrpSubmitJobs`` (everyone's jobs under it);
- the QOS: ``GrpSubmitJobs``, ``MaxSubmitJobsPU`` (per user) and ``MaxSubmitJobsPA`` (per
  account; the count shown is the QOS's busiest, an upper bound for this account).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JobCountLimit", "parse_submit_limits", "submit_limits_argv"]

_FIELD = re.compile(r"(\w+)=(\S*)")
_LIMIT = re.compile(r"^(\d+)\((\d+)\)$")


@dataclass(frozen=True)
class JobCountLimit:
    """One limit on how many jobs may be queued or running at once.

    Attributes:
        what: The limit and whose it is (``MaxSubmitJobs of user ana in account vision``).
        limit: How many jobs it allows.
        used: How many count against it now.
    """

    what: str
    limit: int
    used: int

    @property
    def room(self) -> int:
        """How many more jobs it takes now."""
        return max(0, self.limit - self.used)


def submit_limits_argv(user: str, qos: str) -> list[str]:
    """The one scontrol call that shows the user's associations, their accounts' and the
    QOS's limits with their counts."""
    return ["scontrol", "show", "assoc_mgr", "flags=assoc,qos", f"users={user}", f"qos={qos}"]


def parse_submit_limits(text: str, user: str, account: str | None, qos: str) -> list[JobCountLimit]:
    """The job-count limits that a job of ``user`` in ``account`` (``None``: the user's
    default) under ``qos`` is held to, from :func:`submit_limits_argv`'s output."""
    records = _records(text)
    mine = [
        r
        for r in records
        if r.get("UserName", "").split("(")[0] == user
        and (r.get("Account") == account if account else r.get("DefAssoc") == "Yes")
    ]
    found: list[JobCountLimit] = []
    if mine:
        own = mine[0]
        account = own.get("Account", "")
        where = f"user {user} in account {account}"
        found += _limit(own, "MaxSubmitJobs", where) + _limit(own, "GrpSubmitJobs", where)
    accounts = {r.get("Account"): r for r in records if "Account" in r and not r.get("UserName")}
    seen: set[str] = set()
    while account and account in accounts and account not in seen:  # up to the root
        seen.add(account)
        record = accounts[account]
        found += _limit(record, "GrpSubmitJobs", f"account {account}")
        account = record.get("ParentAccount", "").split("(")[0]
    for record in records:
        if record.get("QOS", "").split("(")[0] == qos:
            for name in ("GrpSubmitJobs", "MaxSubmitJobsPU", "MaxSubmitJobsPA"):
                found += _limit(record, name, f"QOS {qos}")
    return found


def _records(text: str) -> list[dict[str, str]]:
    """Each association or QOS record's fields (a record starts at ``ClusterName=`` or
    ``QOS=`` at the start of a line; its fields run on over indented lines)."""
    records: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith(("ClusterName=", "QOS=")):
            records.append({})
        if records and line.strip():
            records[-1].update(_FIELD.findall(line))
    return records


def _limit(record: dict[str, str], name: str, whose: str) -> list[JobCountLimit]:
    found = _LIMIT.match(record.get(name, ""))
    if found is None:  # unset, or N(used): no limit
        return []
    return [JobCountLimit(f"{name} of {whose}", int(found.group(1)), int(found.group(2)))]
