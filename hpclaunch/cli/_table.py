"""Plain aligned tables for the commands that list many rows (status, history, queue).

rich's Table took 0.8 s to lay out 300 rows of ``hpclaunch status`` (profiled, 2026-11-25):
these tables need only left-aligned columns and a coloured state, which this prints in
microseconds a row. Colour only on a terminal (click.style; none when piped).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

import click

__all__ = ["STATE_COLOURS", "print_table", "state_colour"]

#: The colour of a state; any other finished state is red.
STATE_COLOURS = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    colours: Mapping[int, Sequence[str | None]] | None = None,
) -> None:
    """Print ``rows`` under ``headers``, columns two spaces apart.

    Args:
        colours: Column index → one colour (or ``None``) per row, used on a terminal.
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    tty = sys.stdout.isatty()
    head = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    click.echo(click.style(head, bold=True) if tty else head)
    for index, row in enumerate(rows):
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            padded = cell.ljust(width)
            colour = colours[i][index] if tty and colours and i in colours else None
            cells.append(click.style(padded, fg=colour) if colour else padded)
        click.echo("  ".join(cells).rstrip())


def state_colour(state: str, finished: bool) -> str | None:
    """A state's colour: :data:`STATE_COLOURS`, else red once finished."""
    return STATE_COLOURS.get(state, "red" if finished else None)
