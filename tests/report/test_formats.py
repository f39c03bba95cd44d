"""Each output of `gpubench report`, parsed back."""

from __future__ import annotations

import base64
import csv
import io
import json
from html.parser import HTMLParser

import pytest

from gpubench.store.results import ResultsStore

from .helpers import rec, write_store

REQUIRED_KEYS = {"workload", "provider", "gpu_name", "gpu_count", "throughput", "speedup",
                 "efficiency", "price_per_hour", "cost_per_epoch"}


def test_json_rows(cli, store):
    code, out, err = cli("report", "--results", str(store), "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert all(REQUIRED_KEYS <= set(r) for r in rows)
    ok = [r for r in rows if r["status"] == "ok"]
    two = next(r for r in ok if r["provider"] == "p" and r["gpu_count"] == 2)
    assert two["speedup"] == pytest.approx(1.8) and two["efficiency"] == pytest.approx(0.9)
    assert two["cost_per_epoch"] == pytest.approx(0.002 * 1000 / 180)
    q = next(r for r in ok if r["provider"] == "q")
    assert q["price_per_hour"] is None and q["cost_per_epoch"] is None  # unknown, not 0
    local = next(r for r in ok if r["provider"] == "local")
    assert local["price_per_hour"] == 0.0 and local["cost_per_epoch"] == 0.0
    assert not local["cheapest"]  # free, not cheapest: the cheapest is the one to rent
    assert next(r for r in ok if r["provider"] == "p" and r["gpu_count"] == 1)["cheapest"]
    failed = [r for r in rows if r["status"] == "failed"]
    assert [(f["gpu_count"], f["error"]) for f in failed] == [(8, "NCCL timeout")]
    assert "note:" in err and "no price" in err  # notes stay off stdout


def test_csv_rows(cli, store):
    code, out, _ = cli("report", "--results", str(store), "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert REQUIRED_KEYS <= set(rows[0])
    four = next(r for r in rows if r["provider"] == "p" and r["gpu_count"] == "4")
    assert float(four["speedup"]) == pytest.approx(3.2)
    assert four["fastest"] == "True"
    q = next(r for r in rows if r["provider"] == "q")
    assert q["cost_per_epoch"] == ""


def markdown_tables(text: str) -> list[list[list[str]]]:
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if current is None:
                current = []
                tables.append(current)
            if not set("".join(cells)) <= set("-: "):
                current.append(cells)
        else:
            current = None
    return tables


def test_markdown_tables(cli, store):
    code, out, _ = cli("report", "--results", str(store), "--format", "markdown")
    assert code == 0
    assert "### w" in out
    table, failed = markdown_tables(out)
    header = table[0]
    assert header[:4] == ["provider", "gpu", "precision", "gpus"]
    rows = [dict(zip(header, r)) for r in table[1:]]
    p2 = next(r for r in rows if r["provider"] == "p" and r["gpus"] == "2")
    assert p2["speedup"] == "1.80" and p2["efficiency"] == "0.9" and p2["gpu"] == "G100"
    q = next(r for r in rows if r["provider"] == "q")
    assert q["$/h"] == "unknown" and q["$/epoch"] == "unknown"
    assert next(r for r in rows if r["provider"] == "local")["best"] == "free"
    assert next(r for r in rows if r["provider"] == "p" and r["gpus"] == "1")["best"] == "cheapest paid"
    assert next(r for r in rows if r["gpus"] == "4")["best"] == "fastest"
    assert failed[1][failed[0].index("error")] == "NCCL timeout"
    assert "note: speedup is relative to 1 GPU of the same machine type" in out


def test_terminal_table(cli, store):
    code, out, _ = cli("report", "--results", str(store))
    assert code == 0
    assert "speedup" in out and "fastest" in out and "cheapest" in out and "unknown" in out
    assert "NCCL timeout" in out


def test_tokens_unit_in_headings(cli, tmp_path):
    records = [rec(1, 1000.0, 3.6, workload="gpt", throughput_unit="tokens/s"),
               rec(2, 1900.0, 7.2, workload="gpt", throughput_unit="tokens/s")]
    code, out, _ = cli("report", "--results", str(write_store(tmp_path / "r", records)),
                       "--format", "markdown")
    assert code == 0
    assert "tokens/s" in out and "$/M tokens" in out and "tokens/$" in out


def test_compare_formats(cli, store):
    code, out, err = cli("report", "--results", str(store), "--compare", "p", "q", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["gpu_count"] for r in rows] == [1, 2, 4]
    assert rows[0]["a"] == "p" and rows[0]["b"] == "q"
    assert rows[0]["throughput_ratio"] == pytest.approx(1.5)
    code, out, _ = cli("report", "--results", str(store), "--compare", "p", "q", "--format", "markdown")
    header = markdown_tables(out)[0][0]
    assert "p throughput" in header and "q throughput" in header and "q/p speed" in header


class PageParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.images, self.external = [], [], []
        self._row = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
            self.tables[-1].append(self._row)
        elif tag in ("td", "th"):
            self._row.append("")
        elif tag == "img":
            self.images.append(attrs)
        for name in ("src", "href"):
            if attrs.get(name) and not attrs[name].startswith("data:"):
                self.external.append(attrs[name])

    def handle_data(self, data):
        if self._row is not None and self._row:
            self._row[-1] += data.strip()


def test_html_page_is_self_contained(cli, store, tmp_path):
    page = tmp_path / "report.html"
    code, out, err = cli("report", "--results", str(store), "--html", str(page))
    assert code == 0, err
    parser = PageParser()
    parser.feed(page.read_text())
    assert parser.external == []
    main_table = parser.tables[0]
    assert main_table[0][:4] == ["provider", "gpu", "precision", "gpus"]
    assert len(main_table) == 1 + 5
    assert any("NCCL timeout" in cell for row in parser.tables[-1] for cell in row)
    kinds = [img["data-kind"] for img in parser.images]
    assert kinds == ["throughput", "efficiency", "cost-time"]
    for img in parser.images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        assert base64.b64decode(img["src"][len(prefix):])[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_files(cli, store, tmp_path):
    plots = tmp_path / "plots"
    code, _, err = cli("report", "--results", str(store), "--plot", str(plots), "--plot-format", "both")
    assert code == 0, err
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(f"w-{kind}.{ext}" for kind in ("throughput", "efficiency", "cost-time")
                           for ext in ("png", "svg"))
    assert (plots / "w-throughput.png").read_bytes()[:4] == b"\x89PNG"
    svg = (plots / "w-cost-time.svg").read_text()
    assert "<svg" in svg and "Pareto front" in svg
    assert "ideal linear scaling" in (plots / "w-throughput.svg").read_text()


def test_html_page_with_a_comparison(cli, store, tmp_path):
    page = tmp_path / "report.html"
    code, _, err = cli("report", "--results", str(store), "--html", str(page), "--compare", "p", "q")
    assert code == 0, err
    parser = PageParser()
    parser.feed(page.read_text())
    first = parser.tables[0]
    assert "p throughput" in first[0] and len(first) == 1 + 3


def test_render_report_after_a_sweep(store):
    from gpubench.report.render import render_report

    text = render_report(ResultsStore(store).load().records, "table", workload="w")
    assert "speedup" in text and "NCCL timeout" in text
