"""Debian's ``chromium``, headless, for the report pages (scripts/test installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["CHROMIUM", "browser", "console_errors"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browser(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Load ``page`` headless with ``args`` (``--dump-dom``, ``--screenshot=F``)."""
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--log-level=0", "--window-size=800,1600", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def console_errors(loaded: subprocess.CompletedProcess[str]) -> list[str]:
    """What the page's scripts logged or threw (chromium's stderr)."""
    return [line for line in loaded.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
