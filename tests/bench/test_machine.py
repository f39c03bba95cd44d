"""`gpubench bench` against the mock cloud: rent, sweep over SSH, report, terminate,
and terminate also when the sweep cannot even start; both errors told when the
teardown fails too."""

import getpass

import pytest

from tests.helpers import mock_cloud
from gpubench.bench import machine as bench_mod
from gpubench.bench import teardown as bench_teardown
from gpubench.bench.plan import BenchPlan
from gpubench.bench.request import BenchRequest
from gpubench.bench.teardown import TeardownError
from gpubench.errors import GpubenchError
from gpubench.store.ledger import Ledger
from gpubench.providers.common import ProviderError, provider_name
from gpubench.store.results import ResultsStore
from tests.lifecycle.helpers import Cloud
from tests.remote.helpers import tiny_script


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch,
                          GPUBENCH_LAMBDA_SSH_USER=getpass.getuser(),  # sshd logs in real users only
                          COLUMNS="300")  # the report's table on one line per row, labels whole


@pytest.mark.slow
def test_bench_terminates_when_the_sweep_fails(cloud, tmp_path, cli):
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--name", "b2", "--remote-python", "/no/such/python",
                         "--results", str(tmp_path))
    assert code == 1
    assert err.strip().splitlines() == [err.strip()] and "missing python" in err
    assert Ledger().find("b2").status == "terminated"
    assert "b2 terminated; the whole bench cost $" in out


@pytest.mark.slow
def test_bench_terminates_on_ctrl_c(cloud, tmp_path, cli, monkeypatch):
    import gpubench.sweep.run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gpubench.sweep.run, "sweep", interrupted)
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--name", "b3", "--no-preflight", "--results", str(tmp_path))
    assert code == 130, (out, err)
    assert Ledger().find("b3").status == "terminated"
    assert "b3 terminated; the whole bench cost $" in out


def test_bench_workdir_without_a_script_is_one_line(tmp_path, cli):
    code, out, err = cli("bench", "runpod", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--workdir", str(tmp_path))
    assert code == 2 and err.strip() == \
        "error: --workdir is for your own scripts; --workload names only suite workloads"


def test_bench_max_steps_ends_the_scripts_and_leaves_the_suite_to_its_own_steps(cloud, tmp_path, cli,
                                                                                monkeypatch):
    """What bench hands its sweeps: the user's script ended after --max-steps, the suite
    workload beside it untouched; a list of suite workloads alone is told where theirs go."""
    seen = []

    def captured(req, *args, **kwargs):
        seen.extend((w.name, w.in_suite, w.max_steps) for w in req.workloads)
        raise GpubenchError("stopped before renting")

    monkeypatch.setattr(bench_mod, "bench", captured)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    code, _, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", f"mnist-ddp,{script}",
                       "--max-steps", "20", "--results", str(tmp_path / "results"))
    assert code == 1 and err.strip() == "error: stopped before renting"
    assert seen == [("mnist-ddp", True, None), (str(script), False, 20)]
    code, _, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", "mnist-ddp,gpt-ddp",
                       "--max-steps", "20", "--results", str(tmp_path / "results"))
    assert code == 2 and err.strip() == (
        "error: --max-steps is for your own scripts; --workload names only suite workloads "
        "(each takes its own: --args NAME=\"--steps N\")")


def test_bench_reports_both_the_sweep_error_and_the_failed_teardown(tmp_path, monkeypatch):
    import gpubench.lifecycle.provision

    cloud = Cloud(terminate_errors=[ProviderError("mem", "DELETE", "oops", status=503)] * 1000)

    def provision_then_fail(provider, req, offers, ledger, progress, gate=None, consent=None):
        inst = cloud.add(req.name)
        row = ledger.begin(req.name, "lambda", provider_name(req.name))
        ledger.mark(row.row_id, "launched", "created_at", instance_id=inst.instance_id)
        raise GpubenchError("the workload exploded")

    monkeypatch.setattr(gpubench.lifecycle.provision, "provision", provision_then_fail)
    monkeypatch.setattr(bench_teardown, "TERMINATE_DEADLINE_S", 0.3)
    req = BenchRequest("lambda", 1, [], name="both")
    with Ledger() as ledger, pytest.raises(TeardownError) as e:
        bench_mod.bench(req, ResultsStore(tmp_path), lambda line: None, ledger=ledger, provider=cloud)
    lines = str(e.value).splitlines()
    assert lines[0] == "the workload exploded"
    assert len(lines) == 2 and lines[1].startswith("error: both is NOT confirmed terminated")


# -- what a machine cost, in its records ---------------------------------------------

def test_the_machines_cost_is_added_to_its_records_atomically(tmp_path):
    import json

    from gpubench.store.billing import add_machine_cost

    store = ResultsStore(tmp_path)
    for n in range(3):
        store.append("run-a", {"schema_version": 1, "n": n, "status": "ok"})
    (tmp_path / "run-b.jsonl").write_text('{"n": 0}\n{"n": 1, "torn')      # a run stopped mid-line
    warnings = add_machine_cost(tmp_path, ["run-a", "run-b", "run-never"], 1.25, 1.1)
    records = [json.loads(line) for line in (tmp_path / "run-a.jsonl").read_text().splitlines()]
    assert [(r["n"], r["estimated_cost"], r["billed_cost"]) for r in records] == \
        [(0, 1.25, 1.1), (1, 1.25, 1.1), (2, 1.25, 1.1)]
    # a file with a line that is not a record is left exactly as it was, with a warning
    assert (tmp_path / "run-b.jsonl").read_text() == '{"n": 0}\n{"n": 1, "torn'
    assert len(warnings) == 1 and "run-b.jsonl" in warnings[0] and "line 2" in warnings[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-a.jsonl", "run-b.jsonl"]  # no temp left
    add_machine_cost(tmp_path, ["run-a"], 1.25, None)       # billing not reported: null
    assert json.loads((tmp_path / "run-a.jsonl").read_text().splitlines()[0])["billed_cost"] is None


# -- --hosts K -------------------------------------------------------------------------

def _offer(oid: str, machine: int | None, price: float = 1.0, gpu: str = "H100 SXM"):
    from gpubench.providers.common import Offer

    extra = {"machine_id": machine} if machine is not None else {}
    return Offer("vast", oid, gpu, 1, price, available=1, extra=extra)


def test_machines_started_at_once_get_disjoint_hosts_and_the_plan_counts_all_of_them():
    from gpubench.bench import hosts as bench_hosts
    from gpubench.lifecycle.budget import Estimate

    offers = [_offer("a", 1, 1.0), _offer("b", 2, 1.1), _offer("c", 1, 1.2), _offer("d", 3, 1.3),
              _offer("e", None, 1.4)]
    first, second = bench_hosts.split_hosts(offers, 2)
    assert [o.offer_id for o in first] == ["a", "c", "d", "e"]     # machines 1 and 3
    assert [o.offer_id for o in second] == ["b", "e"]              # machine 2
    assert [o.offer_id for o in bench_hosts.not_used(offers, {"1"})] == ["b", "d", "e"]
    with pytest.raises(bench_hosts.NotEnoughHostsError, match="on 3 distinct host"):
        bench_hosts.check_enough(offers, 4, "vast")
    bench_hosts.check_enough([_offer("x", None)], 4, "lambda")     # every launch a machine of its own
    assert [o.offer_id for o in bench_hosts.same_type(offers + [_offer("f", 9, 0.5, "A100")],
                                                       offers[0])] == list("abcde")
    plan = BenchPlan(None, offers, Estimate(2, 1800.0, 1.0), 1.0, None, hosts=3)
    said = plan.describe()
    assert said.startswith("3 machines of 1x H100 SXM on distinct hosts, about $1.50 for all 3")
    assert "each stops itself after" in said
    assert bench_hosts.for_all(plan.estimate, 3).dollars == pytest.approx(1.5)


def test_hosts_must_be_a_sensible_count(cli):
    code, out, err = cli("bench", "vast", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--hosts", "0")
    assert code == 2 and err.strip() == "error: --hosts must be 1 to 16 (got 0)"


@pytest.mark.slow
def test_bench_on_two_hosts_in_turn_records_each_host_and_what_it_cost(cloud, tmp_path, cli):
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    code, out, err = cli("bench", "vast", "--yes", "--gpus", "1", "--workload", str(script),
                         "--counts", "1,4", "--hosts", "2", "--name", "bh", "--no-preflight",
                         "--results", str(results))
    assert code == 0, (out, err)
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"], r["provider"]) for r in records] == [(1, "ok", "vast")] * 2
    assert "[1 gpu] rank 0 of 1 started" in out and "skipping 4 GPUs" in out
    for r in records:
        entry = Ledger().by_instance("vast", r["instance_id"])
        assert (r["instance_type"], r["gpu_name"]) == (entry.instance_type, entry.gpu_name)
        assert r["price_per_hour"] == pytest.approx(entry.price_per_hour)
    # it ran on the mock's CPU, whatever GPU the mock advertises: the records and the table say so
    assert {(r["device"], r["mock_instance"]) for r in records} == {("cpu", True)}
    assert "on a CPU standing in for GPUs" in out and "(mock, CPU)" in out
    hosts = {r["host_id"] for r in records}
    assert len(hosts) == 2 and None not in hosts               # two distinct Vast.ai machines
    rows = {r.name: r for r in Ledger().entries(include_done=True)}
    assert {rows["bh-1"].status, rows["bh-2"].status} == {"terminated"}
    for r in records:
        machine = Ledger().by_instance("vast", r["instance_id"])
        assert r["estimated_cost"] == pytest.approx(machine.cost(), rel=1e-6)
        # billed as Vast.ai bills (the mock rounds each charge to a tenth of a cent, so a
        # machine of a few seconds may be billed $0.000): reported, and near the estimate
        assert r["billed_cost"] is not None and r["billed_cost"] == pytest.approx(machine.billed_cost)
        assert r["billed_cost"] == pytest.approx(r["estimated_cost"], abs=0.001)
    assert "spread across hosts" in out and "what each machine cost" in out
    assert "bh-1 terminated" in out and "bh-2 terminated" in out


@pytest.mark.slow
def test_bench_on_two_hosts_at_once_each_sent_the_project(cloud, tmp_path, cli, monkeypatch):
    from tests.remote.helpers import watch_gpu_samples
    from tests.remote.test_workdir import project

    proj = project(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    samples = watch_gpu_samples(monkeypatch)
    code, out, err = cli("bench", "vast", "--yes", "--gpus", "1", "--workload", str(proj / "train.py"),
                         "--workdir", str(proj), "--counts", "1", "--hosts", "2", "--parallel", "--name", "bp",
                         "--no-preflight", "--results", str(results))
    assert code == 0, (out, err)
    records = ResultsStore(results).load().records
    assert len({r["host_id"] for r in records}) == 2 and len(records) == 2
    assert [(r["status"], r["throughput"]) for r in records] == [("ok", 200.0)] * 2   # the project's own
    assert "[bp-1] " in out and "[bp-2] " in out
    assert all(r.status == "terminated" for r in Ledger().entries(include_done=True))
    # each machine's GPUs streamed beside its run (the mock's nvidia-smi has no figure, and
    # the records never claim one), drawn, never printed under its name as a line it said
    assert all(s.gpu["util"] is None for s in samples) and "GPUBENCH_GPU" not in out + err
    assert {r["gpu_sampling"] for r in records} <= {"off: nvidia-smi gave no figures",
                                                    "off: nvidia-smi gave no samples"}


@pytest.mark.slow
def test_ctrl_c_during_a_parallel_bench_takes_every_machine_down(cloud, tmp_path, cli, monkeypatch):
    import os
    import signal
    import time

    import gpubench.sweep.run

    def interrupted_then_busy(launcher, plan, store, echo):
        os.kill(os.getpid(), signal.SIGINT)     # the user presses Ctrl-C
        for _ in range(200):
            time.sleep(0.05)
            echo("still working")               # a worker stops at its next line
        raise AssertionError("the worker was never told to stop")

    monkeypatch.setattr(gpubench.sweep.run, "sweep", interrupted_then_busy)
    code, out, err = cli("bench", "vast", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--hosts", "2", "--parallel", "--name", "bc", "--no-preflight",
                         "--results", str(tmp_path))
    assert code == 130, (out, err)
    rows = [r for r in Ledger().entries(include_done=True) if r.name.startswith("bc-")]
    assert len(rows) == 2 and all(r.status == "terminated" for r in rows)
    assert "stopping: taking every machine of this bench down" in out
