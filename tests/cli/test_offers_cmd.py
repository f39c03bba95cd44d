"""`gpubench offers` on the mock cloud: a screenful sorted as asked, one price
precision, a VRAM column, spot offers marked, json with every field, and an empty
list explained."""

from __future__ import annotations

import json
import re

import pytest


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def _body_rows(table: str) -> list[list[str]]:
    """The cells of each table row that starts a new offer (a provider in its first cell)."""
    rows = []
    for line in table.splitlines():
        # columns are set two or more spaces apart (or by rules, in a framed table)
        cells = [c.strip() for c in re.split(r"│|\s{2,}", line.strip("│┃ "))]
        if cells and cells[0] in ("lambda", "vast", "runpod"):
            rows.append(cells)
    return rows


def test_a_screenful_with_vram_and_one_price_precision(cloud, cli):
    code, out, err = cli("offers")
    assert code == 0
    rows = _body_rows(out)
    assert len(rows) == 20
    assert re.search(r"^showing 20 of \d+; --limit 0 for all$", err, re.M)
    header = next(line for line in out.splitlines() if "provider" in line)
    assert "GB/gpu" in header and "spot" not in header
    prices = [cell for row in rows for cell in row[4:6]]
    assert all(re.fullmatch(r"\$\d+\.\d\d", p) for p in prices), prices
    assert all(row[3].isdigit() for row in rows)
    code, out, err = cli("offers", "--limit", "0")
    assert len(_body_rows(out)) > 60 and "showing" not in err


def test_json_keeps_every_offer_and_gains_the_new_fields(cloud, cli):
    code, out, err = cli("offers", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) > 60 and "showing" not in err
    assert {"vram_gb", "kind", "reliability", "offer_id", "interruptible", "price_per_hour"} <= set(rows[0])
    assert {r["kind"] for r in rows} == {"on-demand"}
    assert all(isinstance(r["vram_gb"], int) for r in rows if r["provider"] != "vast" or "A100" not in r["gpu"])
    code, out, err = cli("offers", "--format", "json", "--limit", "3", "--sort", "vram")
    rows = json.loads(out)
    assert len(rows) == 3 and all(r["vram_gb"] == 80 for r in rows)


def test_spot_and_on_demand_side_by_side(cloud, cli):
    code, out, err = cli("offers", "vast", "--kind", "all", "--gpu", "RTX-4090", "--gpus", "1")
    assert code == 0
    header = next(line for line in out.splitlines() if "provider" in line)
    assert "spot" in header
    assert {row[7] for row in _body_rows(out)} == {"yes", "no"}
    assert "lowest bid" in err
    code, out, err = cli("offers", "--spot", "--format", "json")
    rows = json.loads(out)
    assert rows and all(r["kind"] == "spot" and r["provider"] == "vast" for r in rows)


@pytest.mark.parametrize("args,line", [
    (("vast", "--gpus", "3"), "vast has 71 offers, none with 3 GPUs; 1, 2, 4 and 8 are offered"),
    (("vast", "--gpu", "rtx5090"), "vast has no offers of type RTX 5090; GPU types offered: A10, "),
    (("--gpu", "rtx4090", "--max-price", "0.2"),
     "have 12 offers of RTX 4090, none at or under $0.20/h (cheapest is $0.30/h: 1x RTX 4090 in Taiwan, TW)"),
    (("--min-vram", "100"), "none with at least 100 GB per GPU; the most is 80 GB (H100 SXM)"),
    (("vast", "--region", "Mars"), "vast has no offers in region Mars; regions offered: Bavaria, DE; "),
    (("lambda", "--spot"), "lambda has no interruptible machines available to rent right now"),
])
def test_an_empty_list_says_which_filter_emptied_it(cloud, cli, args, line):
    code, out, err = cli("offers", *args)
    assert code == 0 and out == ""
    assert line in err and len(err.strip().splitlines()) == 1


def test_provision_says_the_same(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "3", "--yes")
    assert code == 1
    assert err.strip() == "error: vast has 71 offers, none with 3 GPUs; 1, 2, 4 and 8 are offered"


@pytest.mark.parametrize("args,words", [
    (("--sort", "speed"), "--sort: 'speed' is not one of price, price-per-gpu, vram, gpus, region or reliability"),
    (("--kind", "cheap"), "--kind: 'cheap' is not one of on-demand, spot or all"),
    (("--spot", "--kind", "all"), "--spot and --kind all disagree"),
    (("--min-vram", "0"), "--min-vram must be a positive number of GB"),
])
def test_bad_options_are_one_line(cli, args, words):
    code, out, err = cli("offers", *args)
    assert code != 0 and words in err and len(err.strip().splitlines()) == 1


def test_every_sort_is_in_the_help(cli):
    code, out, err = cli("offers", "--help")
    flat = re.sub(r"\s+", " ", re.sub(r"-\n\s*", "-", out))
    for name in ("price:", "price-per-gpu:", "vram:", "gpus:", "region:", "reliability:"):
        assert name in flat


@pytest.mark.parametrize("typed,gpu", [("rtx4090", "RTX 4090"), ("4090", "RTX 4090"),
                                       ("H100-SXM5-80GB", "H100 SXM")])
def test_provision_and_bench_read_gpu_types_as_offers_does(cloud, cli, typed, gpu):
    from gpubench.bench.plan import plan_bench
    from gpubench.bench.request import BenchRequest

    code, out, err = cli("provision", "vast", "--gpus", "1", "--gpu-type", typed, "--dry-run")
    assert code == 0 and f"cheapest match: 1x {gpu} on vast" in out, err
    plan = plan_bench(BenchRequest("runpod", 1, [], [], None, typed))
    assert {o.gpu_name for o in plan.offers} == {gpu}


def test_a_script_as_workload_is_one_line_pointing_to_advise(cloud, cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    code, out, err = cli("offers", "--workload", str(script))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == (f"error: --workload: '{script}' is a script; 'gpubench advise {script}' predicts "
                   "for a script of your own\n")
    code, out, err = cli("offers", "--workload", str(tmp_path / "missing.py"))
    assert code == 2 and err.count("\n") == 1 and "no such script" in err
