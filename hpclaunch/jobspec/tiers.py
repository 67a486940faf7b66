"""The priority tiers a job spec names and a site maps to QOS: one definition that the spec
and the site config share (without the site importing the whole spec)."""

from __future__ import annotations

from typing import Literal

__all__ = ["Tier"]

Tier = Literal["critical", "high", "medium", "low"]
