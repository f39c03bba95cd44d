"""`gpubench bench all --candidates K` against the mock cloud: the question a user
sees, bad input in one line before anything is rented, then (slow) one bench across
the three providers with a candidate that never boots and one whose first host fails
preflight, Ctrl-C while the machines boot, and a SIGKILLed CLI whose machines `ls` and
`down --all` find and remove as a user would."""

from __future__ import annotations

import getpass
import json
import re
import signal
import subprocess
import time

import pytest

from gpubench.providers import registry
from gpubench.store.ledger import Ledger
from tests.helpers import mock_cloud, start_gpubench

PROVIDERS = ("lambda", "vast", "runpod")
# One GPU type, one candidate per provider: vast's is cheapest (the front), then runpod, lambda.
H100 = ["--gpus", "1", "--gpu-type", "H100 PCIe", "--candidates", "3"]
QUICK = ["--workload", "mnist-ddp", "--counts", "1", "--repeat", "1"]


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch, GPUBENCH_LAMBDA_SSH_USER=getpass.getuser(),
                          COLUMNS="250")


def nothing_billing() -> bool:
    """Every row of the ledger terminated, and no provider lists a machine."""
    return (all(r.status == "terminated" for r in Ledger().entries(include_done=True))
            and all(registry.get(p).list() == [] for p in PROVIDERS))


def test_the_question_lists_each_candidate_with_its_price_prediction_and_the_total(cloud, tmp_path):
    from gpubench.bench.request import BenchRequest
    from gpubench.bench.shortlist import plan_across
    from gpubench.cli.across_cmd import question
    from gpubench.suite import resolve_list

    req = BenchRequest("all", 1, resolve_list("resnet-ddp", None), gpu_type="H100 PCIe", budget=5.0,
                       results=tmp_path)
    text = question(plan_across(req, list(PROVIDERS), 3, print))
    lines = text.splitlines()
    assert lines[0] == "Rent 3 machines at once, one per candidate, for this bench?"
    assert [re.sub(r"\d+\.\d\d", "N", ln.split(":")[0]) for ln in lines[1:4]] == [
        "  1. 1x H100 PCIe (80 GB) at $N/h on vast", "  2. 1x H100 PCIe (80 GB) at $N/h on runpod",
        "  3. 1x H100 PCIe (80 GB) at $N/h on lambda"]
    assert all(" an epoch (" in ln and "; this bench about " in ln for ln in lines[1:4])
    assert "(modelled, on the front)" in lines[1]       # same speed, cheapest: the front
    assert lines[4].startswith("  about $") and " in all; each stops itself after " in lines[4]
    assert lines[4].endswith("budget $5.00 for all; each terminated at the end")


def test_cards_the_memory_model_says_cannot_hold_the_model_are_not_offered(cloud, cli, tmp_path):
    """6.7B under FSDP at 8 sequences a GPU fits no card on offer: refused in one line that
    says what would fit, nothing rented; at 6 a GPU only the 80 GB cards are candidates,
    and one candidate is 'machine', not 'machines'."""
    from gpubench.bench.request import BenchRequest
    from gpubench.bench.shortlist import plan_across
    from gpubench.cli.across_cmd import question
    from gpubench.suite import resolve_list

    code, out, err = cli("bench", "all", "--gpus", "8", "--workload", "gpt-fsdp", "--candidates", "3",
                         "--budget", "2000", "--yes", "--results", str(tmp_path), "--", "--params", "6.7B",
                         "--steps", "2")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: --candidates 3: the memory model says none of the ")
    assert "can hold the workload at its batch" in err and "`--batch-size 6`" in err
    assert Ledger().entries(include_done=True) == []

    req = BenchRequest("all", 8, resolve_list("gpt-fsdp", None), budget=2000.0, results=tmp_path,
                       workload_args=["--params", "6.7B", "--batch-size", "6", "--steps", "2"])
    plan = plan_across(req, list(PROVIDERS), 3, print)
    assert len(plan.chosen) == 3 and all("(80 GB)" in s.describe() for s in plan.chosen)
    one = question(plan_across(req, list(PROVIDERS), 1, print)).splitlines()[0]
    assert one == "Rent 1 machine, the one candidate, for this bench?"


def test_each_candidates_records_will_keep_the_figure_the_question_showed(cloud, tmp_path):
    from gpubench.bench.request import BenchRequest
    from gpubench.bench.shortlist import plan_across
    from gpubench.suite import resolve_list

    req = BenchRequest("all", 8, resolve_list("resnet-ddp", None), gpu_type="H100", results=tmp_path)
    for s in plan_across(req, list(PROVIDERS), 2, print).chosen:
        p, o = s.candidate.prediction, s.candidate.offer
        kept = s.plan.kept[("resnet-ddp", o.gpu_count, 1)]
        assert kept["predicted_throughput"] == pytest.approx(p.throughput) and kept["predicted_basis"] == p.basis
        assert {key[1] for key in s.plan.kept} == {1, 2, 4, 8}       # every count the sweep will run


def test_bad_input_is_one_line_before_anything_is_rented(cloud, cli, monkeypatch, tmp_path):
    results = ["--results", str(tmp_path)]
    code, out, err = cli("bench", "all", *H100[:-1], "4", *QUICK, "--yes", *results)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: --candidates 4: only 3 offer(s) match within --gpu-type H100 PCIe: "
                          "1x H100 PCIe on vast, 1x H100 PCIe on runpod and 1x H100 PCIe on lambda")

    monkeypatch.delenv("RUNPOD_API_KEY")      # left out, said once; the others go on
    code, out, err = cli("bench", "all", *H100[:-1], "2", *QUICK, "--yes", "--budget", "0.01", *results)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 2 and lines[0].startswith("warning: runpod left out: ")
    assert "no API key" in lines[0]
    assert lines[1].startswith("error: the budget of $0.01 cannot cover even one candidate: the "
                               "cheapest, 1x H100 PCIe on vast, is expected to cost about $")

    for args, words in ((["vast,nosuch"], "unknown provider 'nosuch'"),
                        (["all", "--hosts", "2"], "--hosts do not go with a bench across candidates"),
                        (["lambda,vast"], "nothing rented: pass --yes")):   # no terminal to ask on
        code, out, err = cli("bench", *args, "--gpus", "1", *QUICK, *results)
        assert code == 2 and err.count("\n") == 1 and words in err, (args, err)
    assert Ledger().entries(include_done=True) == []


def test_candidates_zero_is_refused_like_any_count_out_of_range(cloud, cli, tmp_path):
    for k in ("0", "-2", "9"):   # 0 is not "no --candidates": it must not fall back to the default
        code, out, err = cli("bench", "all", *H100[:-1], k, *QUICK, "--yes", "--results", str(tmp_path))
        assert code == 2 and err == f"error: --candidates must be 1 to 8 (got {k})\n", (k, err)
    assert Ledger().entries(include_done=True) == []


@pytest.mark.slow
def test_three_candidates_at_once_one_never_boots_one_fails_preflight(cloud, cli, tmp_path):
    cloud.set_faults("lambda:never-boots,vast:bad-host=throttle")
    results = tmp_path / "results"
    code, out, err = cli("bench", "all", *H100, *QUICK, "--max-price", "3", "--attempts", "2",
                         "--boot-timeout", "2", "--yes", "--budget", "2", "--name", "ac",
                         "--results", str(results), "--", "--steps", "2")
    assert code == 1, (out, err)          # a candidate was dropped
    assert out.startswith("renting 3 candidates at once: 1x H100 PCIe on vast at $2.00/h")
    # every machine, the thrown-away ones too, terminated and confirmed gone
    rows = Ledger().entries(include_done=True)
    assert sorted(r.name for r in rows) == ["ac-1", "ac-1", "ac-2", "ac-3", "ac-3"]
    assert all(r.termination_confirmed for r in rows) and nothing_billing()
    assert sum(r.cost() for r in rows) < 2.0
    # the vast candidate's first host failed preflight and was replaced; lambda never booted
    assert "[ac-1] replace: preflight failed: throttle" in out
    assert "[ac-3] dropped: could not provision on lambda (2 launched, 0 refused)" in out
    # one report across the surviving candidates: a row each, measured beside predicted
    table = out[out.index("mnist-ddp, on a CPU"):out.index("what each machine cost")]
    assert [ln.split()[0] for ln in table.splitlines()[3:5]] == ["runpod", "vast"]
    assert "predicted" in table and "vs pred." in table and ("cheapest paid" in table)
    assert re.search(r" [-+]\d+\.\d%  ", table)                 # vs pred. as a percentage
    # each record keeps the figure made before renting: the model's for an H100 PCIe, the
    # same for both candidates, never 'no basis' nor a sibling's measurement
    from gpubench.store.results import ResultsStore

    kept = [r for r in ResultsStore(results).load().records if r.get("workload") == "mnist-ddp"]
    assert kept and all(r["predicted_basis"] not in (None, "no basis") for r in kept)
    assert len({r["predicted_throughput"] for r in kept if r["gpu_count"] == 1}) == 1
    assert "is both the fastest and the cheapest" in table or " the cost of " in table
    candidates = out[out.index("the candidates: predicted, then measured"):]
    assert re.search(r"1 +1x H100 PCIe on vast +ac-1 +\$2\.00 .* measured +2 ", candidates)
    assert re.search(r"3 +1x H100 PCIe on lambda +ac-3 +\$2\.49 .* dropped +2 ", candidates)
    assert re.search(r"In all \$[\d.]+ for 5 machine\(s\) of 3 candidate\(s\), 2 measured; "
                     r"\$[\d.]+ of it on 3 machine\(s\) thrown away \(replaced or dropped\)", candidates)


def _started_booting(*args: str):
    """`gpubench bench all ...` started with every machine booting for ever; returned
    once all three are launched (and billing)."""
    proc = start_gpubench("bench", "all", "--gpus", "1", "--candidates", "3", *QUICK, "--yes",
                          "--name", "kc", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = Ledger().entries()
        if len(rows) == 3 and all(r.instance_id for r in rows):
            return proc
        if proc.poll() is not None:
            pytest.fail(proc.stdout.read())
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the machines were never launched")


@pytest.mark.slow
def test_ctrl_c_takes_every_machine_down(cloud, tmp_path):
    cloud.set_faults("never-boots")
    proc = _started_booting("--results", str(tmp_path))
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out
    assert "stopping: taking every machine of this bench down" in out
    assert all(f"kc-{i} terminated; the whole bench cost $" in out for i in (1, 2, 3)), out
    assert len(Ledger().entries(include_done=True)) == 3 and nothing_billing()


def test_a_killed_bench_leaves_machines_ls_and_down_find(cloud, cli, tmp_path):
    cloud.set_faults("never-boots")
    proc = _started_booting("--results", str(tmp_path))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    code, out, err = cli("ls", "--format", "json")
    assert code == 0 and sorted(r["name"] for r in json.loads(out)) == ["kc-1", "kc-2", "kc-3"]
    code, out, err = cli("down", "--all", "--yes")
    assert code == 0, err
    assert nothing_billing()
    code, out, err = cli("ls")
    assert out.strip() == "no instances"
