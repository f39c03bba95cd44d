"""The cost story: the fastest against the cheapest paid configuration in one
sentence, a free machine marked free (never cheapest), a footnote where a price
is a share of a machine, a key for every highlight, and figures whose time and
work units follow the data."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from gpubench.report.compute import build_report
from gpubench.report.html import render_html
from gpubench.report.plots import cost_time_plot, report_plots, time_unit
from gpubench.report.tables import workload_sections

from .helpers import cost_story_records, rec, write_store


def section(report, workload):
    return next(s for s in workload_sections(report) if s.workload == workload and not s.stand_in)


def test_sentence_compares_fastest_with_cheapest_paid():
    report = build_report(cost_story_records())
    story = section(report, "mnist-ddp").story
    fast, cheap = story.fastest, story.cheapest
    assert (fast["provider"], fast["gpu_count"]) == ("lambda", 2)
    assert (cheap["provider"], cheap["gpu_count"]) == ("vast", 1)  # least money per image
    cost = (2.58 / 10318.25) / (0.17 / 5012.4)
    speed = 10318.25 / 5012.4
    assert story.sentences[0].startswith(
        f"2x A100-SXM4-40GB on Lambda is {cost:.1f}x the cost of 1x RTX 3090 on Vast.ai "
        f"for {speed:.2f}x the speed (an epoch in 5.81 s for $0.0042, against an epoch in 12 s")
    assert story.sentences[1] == ("1 CPU process on local is free (not counted as cheapest), "
                                  "at 0.013x the speed of the fastest.")


def test_free_machine_is_free_not_cheapest(cli, tmp_path):
    store = write_store(tmp_path / "r", cost_story_records())
    code, out, err = cli("report", "--results", str(store), "--format", "json")
    assert code == 0, err
    rows = [r for r in json.loads(out) if r["workload"] == "mnist-ddp"]
    local = next(r for r in rows if r["provider"] == "local")
    assert local["price_per_hour"] == 0 and not local["cheapest"]
    assert [(r["provider"], r["gpu_count"]) for r in rows if r["cheapest"]] == [("vast", 1)]
    code, out, err = cli("report", "--results", str(store), "--workload", "mnist-ddp")
    assert code == 0, err
    local_line = next(line for line in out.splitlines() if line.startswith("local"))
    assert local_line.rstrip().endswith("free") and "cheapest" not in local_line
    assert "is 7.4x the cost of 1x RTX 3090 on Vast.ai for 2.06x the speed" in " ".join(out.split())


def test_only_free_machines_have_no_cheapest():
    story = section(build_report(cost_story_records()), "./train.py").story
    assert story.cheapest is None
    assert story.sentences[0] == ("2 CPU processes on local is the fastest; no configuration "
                                  "here has a price above zero on record, so none is cheapest.")


def test_fastest_without_a_price():
    records = [rec(1, 100.0, 3.6), rec(2, 180.0, 7.2),
               rec(1, 400.0, None, provider="q", instance_type="q.1x")]
    story = section(build_report(records), "w").story
    assert story.sentences[0].startswith(
        "1x G100 on q is the fastest, at an unknown price; the cheapest paid is 1x G100 on p "
        "at 0.25x its speed")


def test_one_configuration_both_fastest_and_cheapest():
    records = [rec(1, 100.0, 3.6), rec(2, 250.0, 7.2)]
    story = section(build_report(records), "w").story
    assert story.sentences == ["2x G100 on p is both the fastest and the cheapest paid "
                               "configuration (an epoch in 4 s for $0.0080)."]


def test_share_of_a_machine_has_a_footnote(cli, tmp_path):
    report = build_report(cost_story_records())
    mnist = section(report, "mnist-ddp")
    marked = {(r["provider"], r["gpu_count"]): r["price_per_hour"] for r in mnist.rows}
    assert marked[("lambda", 1)] == "1.29*" and marked[("vast", 1)] == "0.17*"
    assert marked[("lambda", 2)] == 2.58  # the whole machine: no mark
    assert mnist.footnotes == ["* a share of the machine's price: a run pays for the GPUs it "
                               "used (here 1 of 2 GPUs on lambda gpu_2x_a100 at $2.58/h is "
                               "priced $1.29/h)"]
    whole = build_report([rec(1, 100.0, 3.6), rec(2, 180.0, 7.2)])  # no machine price on record
    assert section(whole, "w").footnotes == []
    store = write_store(tmp_path / "r", cost_story_records())
    code, out, _ = cli("report", "--results", str(store), "--format", "markdown")
    assert code == 0 and "a share of the machine's price" in out and "| 1.29* " in out


class Page(HTMLParser):
    """Rows' classes, keys, stories and image titles of a report page."""

    def __init__(self):
        super().__init__()
        self.row_classes, self.keys, self.stories, self.titles = [], [], [], []
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and attrs.get("class"):
            self.row_classes.append(attrs["class"])
        if tag == "p" and attrs.get("class") == "key":
            self.keys.append(attrs["data-key"])
        if tag == "p" and attrs.get("class") == "story":
            self._in = "story"
            self.stories.append("")
        if tag == "img" and attrs.get("title"):
            self.titles.append((attrs["data-kind"], attrs["title"]))

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "story":
            self.stories[-1] += data


def test_page_has_a_key_for_every_highlight_and_the_story():
    mnist = [r for r in cost_story_records() if r["workload"] == "mnist-ddp"]
    page = Page()
    page.feed(render_html(build_report(mnist)))
    assert "fastest" in page.row_classes and "cheapest" in page.row_classes
    assert "free" in page.row_classes
    assert page.keys == ["fastest cheapest free"]
    assert any("the cost of 1x RTX 3090 on Vast.ai" in s for s in page.stories)
    hover = dict(page.titles)["cost-time"].splitlines()  # each point in words, on hover
    assert "vast 1x RTX 3090: 12 s, $0.0006" in hover and "local 1x cpu: 7.45 min, $0.00" in hover


@pytest.mark.parametrize("seconds, unit", [([5.8, 12.0, 447.0], "s"), ([300.0, 900.0], "min"),
                                           ([0.03 * 3600, 4 * 3600, 9 * 3600], "h")])
def test_time_unit_by_magnitude(seconds, unit):
    assert time_unit(seconds)[0] == unit


def test_cost_figure_units_and_labels():
    report = build_report(cost_story_records())
    plots = {(p.workload, p.kind): p for p in report_plots(report)}
    mnist = plots[("mnist-ddp", "cost-time")].figure.axes[0]
    assert mnist.get_xlabel() == "time for one epoch (s)"
    labels = {t.get_text() for t in mnist.texts}
    assert labels == {"lambda 1x A100-SXM4-40GB", "lambda 2x A100-SXM4-40GB", "vast 1x RTX 3090",
                      "vast 2x RTX 3090", "local 1x cpu"}  # every point, not only the front
    script = plots[("./train.py", "cost-time")].figure.axes[0]
    assert script.get_xlabel() == "time for one run (s)" and "epoch" not in script.get_title()
    legend = [t.get_text() for t in plots[("mnist-ddp", "cost-time")].figure.legends[0].texts]
    assert {"fastest", "cheapest paid", "free (not cheapest)"} <= set(legend)


def test_labels_stay_inside_the_axes_and_apart():
    """Nothing clipped, nothing buried: every label inside its axes, none on another."""
    records = [rec(n, 100.0 * n * (0.9 + 0.01 * i), 1.0 * n + 0.05 * i,
                   provider=f"c{i}", instance_type=f"c{i}") for i in range(4) for n in (1, 2, 4)]
    figure = cost_time_plot("w", build_report(records).rows).figure
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    box = axes.get_window_extent(renderer)
    extents = [t.get_window_extent(renderer) for t in axes.texts]
    assert len(extents) == 12
    inside = [e for e in extents if e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1
              and e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1]
    assert len(inside) == len(extents)
    overlapping = sum(a.overlaps(b) for i, a in enumerate(extents) for b in extents[i + 1:])
    assert overlapping <= 2  # a crowded corner may keep one or two
    assert re.match(r"time for one epoch \((s|min|h)\)", axes.get_xlabel())
