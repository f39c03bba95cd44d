"""The HTML page opened in headless Chromium, with no network: the screenshot
must show the table (its header colour) and the figures (matplotlib's line colours)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from gpubench.report.compute import build_report
from gpubench.report.html import write_html

from .helpers import scaling_records

HEADER_BLUE = (0xE8, 0xEE, 0xF7)  # th background in the page's style
BEST_GREEN = (0xEA, 0xF7, 0xE6)  # the fastest / cheapest rows
PLOT_ORANGE = (255, 127, 14)  # tab:orange: the line of the machine with three GPU counts
PARETO_RED = (214, 39, 40)  # tab:red, the Pareto front

pytestmark = pytest.mark.slow


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (scripts/test.sh installs Debian's chromium)")


def screenshot(page, out, tmp_path) -> np.ndarray:
    import matplotlib.image

    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
               f"--screenshot={out}", "--window-size=1200,1800", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert out.exists(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    pixels = matplotlib.image.imread(out)[:, :, :3]
    return np.rint(pixels * 255).astype(int)


def rows_with(pixels: np.ndarray, colour, tolerance: int = 6) -> np.ndarray:
    """Indices of the screenshot rows holding more than a few pixels of `colour`."""
    match = (np.abs(pixels - np.array(colour)) <= tolerance).all(axis=2)
    return np.flatnonzero(match.sum(axis=1) > 3)


def test_page_draws_tables_and_figures(tmp_path):
    page = write_html(build_report(scaling_records()), tmp_path / "report.html")
    pixels = screenshot(page, tmp_path / "shot.png", tmp_path)
    height = pixels.shape[0]
    assert (pixels < 250).any(axis=2).sum() > 10_000, "the page is blank"

    header = rows_with(pixels, HEADER_BLUE)
    best = rows_with(pixels, BEST_GREEN)
    lines = rows_with(pixels, PLOT_ORANGE, tolerance=12)
    front = rows_with(pixels, PARETO_RED, tolerance=12)
    assert header.size >= 10, "no table header drawn"
    assert best.size >= 10, "the fastest/cheapest rows are not highlighted"
    assert lines.size >= 20, "no figure drawn"
    assert front.size >= 5, "no Pareto front drawn"
    # the table comes first, the figures below it, all inside the window
    assert header.min() < best.min() < lines.min() < height
    # the failed-runs table follows the figures: a second header further down
    assert header.max() > lines.min()
