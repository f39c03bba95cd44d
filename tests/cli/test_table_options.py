"""--wide and --columns on `offers` and `ls` as on `report` (one shared option each and
one helper building the TableFit), tables at 80 columns with no number cut, cell text
shown as it is (never read as rich markup), and `offers` taking gpu type, price and
region from [defaults]."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from gpubench.format import TableFit, render_rows
from gpubench.store.ledger import Ledger


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def _prices(text: str) -> list[str]:
    return re.findall(r"\$\d+\.\d\d(?!\d)", text)


def test_offers_at_80_columns_keeps_every_price_whole(cloud, cli, monkeypatch):
    code, wide, err = cli("offers", "--limit", "10")
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("offers", "--limit", "10")
    assert code == 0, err
    table = out.split("left out")[0]
    assert _widest(table) <= 80 and "…" not in out
    assert _prices(table) == _prices(wide)            # every price, whole, in its place
    assert "left out to fit 80 columns: type" in out and "--wide" in out


def test_offers_wide_shows_every_column(cloud, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("offers", "--limit", "5", "--wide")
    assert code == 0, err
    assert "left out" not in out
    header = out.splitlines()[0].split()
    assert header == ["provider", "gpu", "gpus", "GB/gpu", "$/h", "$/gpu/h", "region", "avail", "type"]


def test_offers_columns_picks_and_orders_in_every_format(cloud, cli):
    code, out, err = cli("offers", "--limit", "3", "--columns", "$/h,gpu,provider")
    assert code == 0, err
    assert out.splitlines()[0].split() == ["$/h", "gpu", "provider"]
    code, out, err = cli("offers", "--limit", "3", "--format", "csv", "--columns", "$/h,gpu,offer_id")
    assert code == 0, err
    assert next(csv.reader(io.StringIO(out))) == ["price_per_hour", "gpu", "offer_id"]
    code, out, err = cli("offers", "--format", "json", "--limit", "2", "--columns", "gpu,vram_gb")
    assert [set(row) for row in json.loads(out)] == [{"gpu", "vram_gb"}] * 2


@pytest.mark.parametrize("command", ["offers", "ls"])
def test_an_unknown_column_is_one_line(cloud, cli, command):
    code, out, err = cli(command, "--columns", "provider,colour")
    assert code != 0 and out == ""
    assert err.strip().splitlines()[-1].startswith("error: --columns: no column 'colour' (columns: ")
    code, out, err = cli(command, "--columns", " , ")
    assert code != 0 and "name at least one column" in err


def test_offers_honours_the_defaults_in_config_toml(cloud, cli, isolated):
    isolated.config.mkdir(parents=True, exist_ok=True)
    (isolated.config / "config.toml").write_text(
        '[defaults]\ngpu_type = "rtx4090"\nmax_price = 0.35\nregion = "Taiwan, TW"\n')
    code, out, err = cli("offers", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and {(r["gpu"], r["region"]) for r in rows} == {("RTX 4090", "Taiwan, TW")}
    assert all(r["price_per_hour"] <= 0.35 for r in rows)
    code, out, err = cli("offers", "--format", "json", "--gpu", "A100", "--max-price", "100",
                         "--region", "us-east-1")
    rows = json.loads(out)         # the flags win over [defaults]
    assert rows and all("A100" in r["gpu"] and r["region"] == "us-east-1" for r in rows)


def _ledger_rows(count: int = 3) -> None:
    with Ledger() as ledger:
        for i in range(count):
            entry = ledger.begin(f"box-[x]{i}", "lambda", f"gpubench-box-{i}", gpu_name="A100",
                                 gpu_count=8, price_per_hour=14.32 + i, region="us-east-1",
                                 instance_type="gpu_8x_a100_80gb_sxm4")
            ledger.mark(entry.row_id, "launched", "created_at", instance_id=f"0123456789abcdef{i}")


def test_ls_at_80_columns_keeps_name_status_and_money(cli, monkeypatch):
    _ledger_rows()
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("ls")
    assert code == 0, err
    table = out.split("left out")[0]
    assert _widest(table) <= 80 and "…" not in out
    header = table.splitlines()[0].split()
    assert {"name", "status", "gpus", "$/h", "cost"} <= set(header)
    for price in ("14.32", "15.32", "16.32"):
        assert price in table.split()
    assert "box-[x]0" in table                          # a bracket is text, not markup
    assert "left out to fit 80 columns:" in out and "note" in out.split("left out")[1]


def test_ls_wide_and_columns(cli, monkeypatch):
    _ledger_rows()
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("ls", "--wide")
    assert code == 0, err
    assert "left out" not in out and "provider says" in out and "note" in out.splitlines()[0]
    assert _widest(out) > 80
    code, out, err = cli("ls", "--columns", "cost,name")
    assert out.splitlines()[0].split() == ["cost", "$", "name"]
    code, out, err = cli("ls", "--format", "json", "--columns", "name,deadline_at")
    assert [set(r) for r in json.loads(out)] == [{"name", "deadline_at"}] * 3


@pytest.mark.parametrize("text", ["[lambda]", "[x]", "[bold]H100[/bold]", "a\\[b]", "[/]"])
def test_cell_text_is_never_markup(text):
    rows = [{"name": text, "n": 1.5}]
    shown = render_rows(rows, [("name", "name"), ("n", "n")], "table", title=text,
                        fit=TableFit(width=80))
    assert shown.count(text) == 2, shown          # in the title and in the cell
