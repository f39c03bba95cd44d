"""`gpubench advise` and `offers --workload` against the mock cloud's offers: ranked
predictions with their basis, the advice, records that make a figure measured, and
bad input in one line."""

from __future__ import annotations

import json

import pytest

from gpubench.store.results import ResultsStore


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def advise(cli, tmp_path, *args):
    code, out, err = cli("advise", *args, "--results", str(tmp_path / "results"))
    return code, out, err


def test_every_offer_and_count_ranked_by_cost_with_basis_front_and_advice(cloud, cli, tmp_path):
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["work"] == {"units": 1281167.0, "what": "1 epoch", "unit": "images/s"}
    rows = [r for r in doc["predictions"] if r["throughput"] is not None]
    assert len({r["provider"] for r in rows}) == 3                  # every provider asked at once
    assert [r["dollars"] for r in rows] == sorted(r["dollars"] for r in rows)
    assert {r["basis"] for r in rows} <= {"modelled", "published", "scaled", "datasheet", "assumed"}
    assert any(r["pareto"] for r in rows)
    for r in rows:
        assert r["seconds"] == pytest.approx(1281167 / r["throughput"])
        assert r["dollars"] == pytest.approx(r["price_per_hour"] * r["seconds"] / 3600)
        assert r["sources"]                                         # where each figure came from
    assert doc["advice"].startswith("Cheapest")


def test_the_table_ends_with_the_advice_and_a_deadline_names_the_cheapest_that_meets_it(cloud, cli, tmp_path):
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--deadline", "5m", "--gpus", "1,8")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "predicted" in lines[0] and "basis" in out and "front" in out
    assert lines[-1].startswith("Cheapest") and "within 5 min" in lines[-1]


def test_a_measured_record_makes_that_gpu_types_figure_measured(cloud, cli, tmp_path):
    store = ResultsStore.for_writing(tmp_path / "results")
    store.append("r1", {"workload": "resnet-ddp", "workload_args": [], "precision": "fp32", "status": "ok",
                        "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "nodes": 1, "device": "cuda",
                        "throughput": 1234.0, "batch_per_gpu": 256})
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--gpus", "1", "--format", "json")
    assert code == 0, err
    h100 = [r for r in json.loads(out)["predictions"] if r["gpu"] == "H100 SXM"]
    assert h100 and all(r["basis"] == "measured" and r["throughput"] == pytest.approx(1234.0) for r in h100)


def test_offers_gain_predicted_columns_and_sort_by_cost_per_epoch(cloud, cli):
    code, out, err = cli("offers", "--workload", "resnet-ddp", "--sort", "cost-per-epoch", "--format", "json")
    assert code == 0, err
    rows = [r for r in json.loads(out) if r["epoch_cost"] is not None]
    assert rows and [r["epoch_cost"] for r in rows] == sorted(r["epoch_cost"] for r in rows)
    code, out, err = cli("offers", "--workload", "resnet-ddp", "--sort", "time-per-epoch", "--format", "json")
    times = [r["epoch_time"] for r in json.loads(out) if r["epoch_time"] is not None]
    assert times == sorted(times)


def test_limit_cuts_json_and_csv_as_it_does_a_table_and_zero_means_all(cloud, cli, tmp_path):
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "json", "--limit", "0")
    every = json.loads(out)["predictions"]
    assert code == 0 and len(every) > 2 and "more configuration" not in err
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "json", "--limit", "2")
    doc = json.loads(out)
    assert code == 0 and doc["predictions"] == every[:2] and doc["advice"].startswith("Cheapest")
    assert f"{len(every) - 2} more configuration(s): --limit 0 shows all" in err
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "csv", "--limit", "2")
    assert code == 0 and len(out.strip().splitlines()) == 1 + 2 + 1      # header, 2 rows, the advice
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "json")
    assert len(json.loads(out)["predictions"]) == len(every)             # json gives all unless --limit


@pytest.mark.parametrize("args, says", [
    (["resnet-ddp", "--epochs", "2", "--samples", "100"], "--epochs and --samples both say how much work"),
    (["resnet-ddp", "--deadline", "soon"], "--deadline: 'soon' is not a duration"),
    (["resnet-ddp", "--sort", "fun"], "--sort: 'fun' is not one of cost-per-epoch, time-per-epoch"),
    (["resnet-ddp", "--gpus", "0"], "--gpus"),
    (["resnet-ddp", "--budget", "-1"], "--budget must be a positive number of dollars"),
    (["resnet-9000"], "resnet-9000"),
    (["resnet-ddp", "--results", "r", "--", "--widht", "8"], "--widht"),
    (["resnet-ddp", "--max-price", "0.0001"], "no offer fits: --max-price 0.0001 leave nothing"),
    (["resnet-ddp", "--gpu", "H900"], "have no offers of type H900; GPU types offered: A10, "),
])
def test_bad_input_is_one_line_and_no_traceback(cloud, cli, tmp_path, args, says):
    code, out, err = advise(cli, tmp_path, *args)
    assert code != 0 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_offers_sorted_by_a_prediction_needs_the_workload(cloud, cli):
    code, _, err = cli("offers", "--sort", "cost-per-epoch")
    assert code != 0 and "--sort cost-per-epoch needs --workload W" in err


def test_a_provider_without_a_key_is_left_out_once_and_the_others_go_on(cloud, cli, tmp_path, monkeypatch):
    monkeypatch.delenv("VAST_API_KEY")
    monkeypatch.setenv("GPUBENCH_CONFIG_DIR", str(tmp_path / "no-config"))
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--format", "json")
    assert code == 0, err
    assert {r["provider"] for r in json.loads(out)["predictions"]} == {"lambda", "runpod"}
    assert sum("vast" in line for line in err.splitlines()) == 1


def test_cards_too_small_for_the_model_are_left_out_in_one_line_each(cloud, cli, tmp_path):
    code, out, err = cli("advise", "gpt-ddp", "--gpus", "1,2", "--results", str(tmp_path), "--", "--n-layer", "24",
                         "--n-head", "32", "--n-embd", "2048", "--precision", "bf16")
    assert code == 0, err
    # one GPU trains the model alone; two hold DDP's gradient buckets besides
    assert ("left out: RTX 4090 at 1 GPU: 1.3B with AdamW on one GPU needs about 21 GB a GPU plus "
            "2.4 GB a sequence; this card has 24 GB: batch 1 at most (asked 8)") in err.splitlines()
    assert any(line.startswith("left out: RTX 4090 at 2 GPUs: 1.3B with AdamW under DDP needs about 26 GB "
                               "a GPU plus 2.4 GB a sequence; this card has 24 GB: not even the model fits; "
                               "FSDP over 2 GPUs would need") for line in err.splitlines())
    assert "H100 SXM" in out                     # 80 GB cards fit, and are ranked


def test_a_model_past_a_cards_memory_gets_fsdp_rows_where_it_fits_there(cloud, cli, tmp_path):
    """1.3B with AdamW under DDP needs about 21 GB a GPU before activations: a 24 GB card is
    left out under DDP at every count, and where the offers give several such cards the
    same model sharded (gpt-fsdp) is predicted instead, said in the strategy column."""
    code, out, err = cli("advise", "gpt-ddp", "--gpus", "1,2,4,8", "--limit", "0", "--results", str(tmp_path),
                         "--format", "json", "--", "--params", "1.3B", "--precision", "bf16",
                         "--batch-size", "1")
    assert code == 0, err
    rows = json.loads(out)["predictions"]
    fsdp = [r for r in rows if r["strategy"] == "FSDP"]
    assert fsdp and all(r["throughput"] and r["gpus"] > 1 for r in fsdp)
    ddp_left_out = {(r["gpu"], r["gpus"]) for r in rows if r["strategy"] == "DDP" and r["left_out"]}
    assert {(r["gpu"], r["gpus"]) for r in fsdp} <= ddp_left_out    # only where DDP cannot hold it
    code, table, err = cli("advise", "gpt-ddp", "--gpus", "1,2,4,8", "--limit", "0", "--results", str(tmp_path),
                           "--", "--params", "1.3B", "--precision", "bf16", "--batch-size", "1")
    assert code == 0, err
    assert "strategy" in table.splitlines()[1] and "FSDP" in table
    assert "strategy FSDP: the same model as gpt-fsdp" in err


def test_a_model_no_card_holds_is_one_line_per_gpu_type_and_one_saying_what_would_fit(cloud, cli, tmp_path):
    code, out, err = cli("advise", "gpt-fsdp", "--gpus", "8", "--results", str(tmp_path), "--", "--params", "6.7B")
    lines = err.strip().splitlines()
    assert code != 0 and out == "" and "Traceback" not in err      # no table of dashes
    left_out = [ln for ln in lines if ln.startswith("left out: ")]
    assert len(left_out) == len({ln.split(" at ")[0] for ln in left_out}) <= 8    # one per GPU type
    assert len(lines) == len(left_out) + 1
    assert lines[-1].startswith("error: gpt-fsdp --params 6.7B fits none of the ")
    assert "batch 6 a GPU fits 8x 80 GB (" in lines[-1] and "`--batch-size 6`" in lines[-1]
    assert "`--activation-checkpointing --precision bf16` keeps batch 8 on 8x L40S (48 GB)" in lines[-1]


def test_rows_with_no_figure_are_left_out_of_the_table_and_counted(cloud, cli, tmp_path):
    code, out, err = cli("advise", "gpt-ddp", "--gpus", "1", "--limit", "0", "--results", str(tmp_path), "--",
                         "--params", "1.3B", "--precision", "bf16")
    assert code == 0, err
    table = out.splitlines()[3:-1]
    assert table and not any(" - " in ln or "does not fit" in ln for ln in table)
    assert "configuration(s) with no figure are left out of the table:" in err


@pytest.mark.parametrize("budget", ["0.01", "0.33"])
def test_configurations_dearer_than_the_budget_are_not_listed(cloud, cli, tmp_path, budget):
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--budget", budget, "--format", "json", "--limit", "0")
    if budget == "0.01":
        assert code != 0 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("error: no configuration is predicted within the budget of $0.01: the cheapest, ")
        return
    assert code == 0, err
    costs = [r["dollars"] for r in json.loads(out)["predictions"] if r["dollars"] is not None]
    assert costs and max(costs) <= 0.33
    assert "configuration(s) dearer than the budget of $0.33 are left out" in err


def test_the_title_says_what_an_epoch_is(cloud, cli, tmp_path):
    code, out, err = advise(cli, tmp_path, "gpt-ddp", "--gpus", "8", "--limit", "2")
    assert code == 0, err
    assert "gpt-ddp: 1 epoch (9.04 billion OpenWebText tokens), predicted" in out.splitlines()[0]


def test_a_small_scripts_times_and_costs_read_in_finer_units(cloud, cli, tmp_path, monkeypatch):
    """A script of 1.87 MFLOP a sample over 4,000 samples: milliseconds and millionths of a
    dollar, never '0.0 s' or '$0.0000'; its counted step is modelled on every card."""
    from gpubench.predict import calibrate
    from tests.helpers import counted_calibration

    monkeypatch.setattr(calibrate, "run_calibration", lambda ref, args, world=(1, 1): counted_calibration())
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('never run: calibrated by the test')\n")
    code, out, err = cli("advise", str(project / "train.py"), "--gpus", "1,8", "--limit", "0",
                         "--format", "json", "--results", str(tmp_path / "results"))
    assert code == 0, err
    doc = json.loads(out)
    code, table, err = cli("advise", str(project / "train.py"), "--gpus", "1,8", "--limit", "0",
                           "--results", str(tmp_path / "results"))
    assert code == 0, err
    assert "0.0 s" not in table and "$0.0000 " not in table and "$0.0000\n" not in table
    assert " ms" in table and "$0.00000" in table
    assert "4,000 samples" in table.splitlines()[0]
    one_gpu = [r for r in doc["predictions"] if r.get("gpus") == 1 and r.get("basis")]
    assert one_gpu and {r["basis"] for r in one_gpu} == {"modelled"}


def test_at_80_columns_advise_and_offers_keep_their_predicted_columns(cloud, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = advise(cli, tmp_path, "resnet-ddp", "--gpus", "1,8", "--limit", "5")
    assert code == 0, err
    header = out.splitlines()[1].split()
    assert {"gpu", "gpus", "time", "cost", "basis", "front"} <= set(header)
    assert max(len(ln) for ln in out.splitlines()[:-1]) <= 80       # the advice is a sentence
    code, out, err = cli("advise", "gpt-ddp", "--gpus", "1,2", "--limit", "5", "--results", str(tmp_path),
                         "--", "--params", "1.3B", "--precision", "bf16", "--batch-size", "1")
    assert code == 0, err
    assert {"strategy", "time", "cost", "basis", "front"} <= set(out.splitlines()[1].split())
    code, out, err = cli("offers", "--workload", "resnet-ddp", "--limit", "5")
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert {"predicted", "time/epoch", "$/epoch", "basis", "gpu", "$/h"} <= set(header)
    assert max(len(ln) for ln in out.splitlines()) <= 80
