"""What every parser of Slurm's text shares: the ways Slurm says "nothing", and the
``Key=Value`` words of ``scontrol show`` (one record a line with ``--oneliner``)."""

from __future__ import annotations

import re

__all__ = ["EMPTY", "field", "is_empty", "key_values"]

#: Slurm's ways of printing no value, across its commands and releases 22.05-26.05:
#: ``(null)`` (unset strings and plugins), ``N/A`` and ``n/a`` (squeue's times and nodes),
#: ``None``/``NONE`` (reasons, sacctmgr's lists), ``Unknown`` (start times not yet known),
#: ``None assigned`` (sacct's node list of a job that never ran), and the empty string.
EMPTY = frozenset({"", "(null)", "N/A", "n/a", "None", "NONE", "Unknown", "None assigned"})

# Values may hold spaces only in fields we do not read (Reason=..., OS=...): a word that
# starts with Key= opens a field, any other word continues the one before.
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_/]*)=(.*)$")


def is_empty(text: str | None) -> bool:
    """Whether ``text`` is one of Slurm's ways of printing no value (surrounding spaces
    ignored)."""
    return text is None or text.strip() in EMPTY


def field(text: str) -> str | None:
    """A value as printed, stripped, or ``None`` for Slurm's ways of saying "nothing"."""
    text = text.strip()
    return None if text in EMPTY else text


def key_values(line: str) -> dict[str, str]:
    """``Key=Value`` words of one ``scontrol show ... --oneliner`` record: a word that
    starts with ``Key=`` opens a field, any other word continues the one before (a value
    with spaces in it)."""
    out: dict[str, str] = {}
    last = None
    for word in line.split():
        match = _KEY.match(word)
        if match:
            last = match.group(1)
            out[last] = match.group(2)
        elif last is not None:
            out[last] += " " + word
    return out
