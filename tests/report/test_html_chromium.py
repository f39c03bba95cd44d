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


def screenshot(page, out, tmp_path, width: int = 1200) -> np.ndarray:
    import matplotlib.image

    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
               f"--screenshot={out}", f"--window-size={width},1800", page.as_uri()]
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


FASTEST_GOLD = (0xFF, 0xF1, 0xC1)  # tr.fastest and its swatch in the key
HEIGHT = 1800
# Headless Chromium keeps a window at least 500 px wide, so the page is shown in a
# frame of the width wanted (its own viewport: the page's media queries apply),
# and a script of the frame's parent (the page itself has none) measures it: what
# overflows the frame, which figures did not draw, where the key, story and
# footnote are.
FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" width="{width}" height="{height}" style="border:0" srcdoc="{page}"></iframe>
<script>
document.getElementById("page").addEventListener("load", e => {{
  const doc = e.target.contentDocument, width = doc.documentElement.clientWidth, out = document.body.dataset;
  out.overflow = doc.documentElement.scrollWidth > width ? "page" : "none";
  out.wideImages = [...doc.images].filter(i => i.getBoundingClientRect().right > width + 1).length;
  out.brokenImages = [...doc.images].filter(i => !i.naturalWidth).length;
  const seen = sel => [...doc.querySelectorAll(sel)].filter(e => e.offsetHeight > 0).length;
  out.keys = seen("p.key"); out.stories = seen("p.story"); out.footnotes = seen("p.footnote");
  out.swatches = seen(".swatch.fastest") + "," + seen(".swatch.cheapest");
}});
</script></body></html>"""


def framed(page, tmp_path, width: int):
    from html import escape

    frame = tmp_path / f"frame-{width}.html"
    frame.write_text(FRAME.format(width=width, height=HEIGHT, page=escape(page.read_text())))
    return frame


def measured(frame, tmp_path, width: int) -> dict:
    import re

    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile-dom'}",
               f"--window-size={max(width, 500)},{HEIGHT}", "--dump-dom", frame.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    body = re.search(r"<body([^>]*)>", done.stdout)
    assert body, f"chromium gave no DOM (exit {done.returncode}): {done.stderr[-2000:]}"
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))


@pytest.mark.parametrize("width", [1400, 390])
def test_cost_story_page_at_desktop_and_phone_width(tmp_path, width):
    """The page at 1400 px and at a phone's 390 px: nothing wider than the window but
    the tables' own scroll boxes, every figure drawn, a key, a sentence and a footnote
    under the table, and the fastest and cheapest rows in their distinct colours."""
    from .helpers import cost_story_records

    mnist = [r for r in cost_story_records() if r["workload"] == "mnist-ddp"]
    page = write_html(build_report(mnist), tmp_path / "report.html")
    frame = framed(page, tmp_path, width)
    found = measured(frame, tmp_path, width)
    assert found["overflow"] == "none" and found["wide-images"] == "0"
    assert found["broken-images"] == "0"
    assert found["keys"] == "1" and found["stories"] == "1" and found["footnotes"] == "1"
    assert found["swatches"] == "1,1"
    pixels = screenshot(frame, tmp_path / f"shot-{width}.png", tmp_path, max(width, 500))
    gold, green = rows_with(pixels, FASTEST_GOLD), rows_with(pixels, BEST_GREEN)
    assert gold.size >= 10 and green.size >= 10, "fastest and cheapest not both highlighted"
    assert rows_with(pixels, PARETO_RED, tolerance=12).size >= 5, "no cost figure drawn"
