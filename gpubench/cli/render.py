"""The commands' output: one line to stderr or stdout, and the check of --format.
Listings are rendered by gpubench.format.render_rows (re-exported here), so every
command shows the same table and the same csv and json."""

from __future__ import annotations

import sys
from typing import Sequence

from gpubench.errors import UsageError
from gpubench.format import FORMATS, format_cell, format_dollars, render_rows  # noqa: F401  (for the commands)


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def out(message: str = "") -> None:
    print(message, flush=True)


def check_format(fmt: str, allowed: Sequence[str] = FORMATS) -> str:
    if fmt not in allowed:
        raise UsageError(f"--format: '{fmt}' is not one of {', '.join(allowed)}")
    return fmt
