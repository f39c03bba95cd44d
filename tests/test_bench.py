"""`gpubench bench` against the mock cloud: rent, sweep over SSH, report, terminate,
and terminate also when the sweep cannot even start; both errors told when the
teardown fails too."""

import getpass

import pytest

from tests.helpers import mock_cloud
from gpubench import bench as bench_mod
from gpubench.errors import GpubenchError
from gpubench.lifecycle.ledger import Ledger
from gpubench.providers.common import ProviderError, provider_name
from gpubench.results import ResultsStore
from tests.lifecycle.helpers import Cloud
from tests.remote.helpers import tiny_script


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch,
                          GPUBENCH_LAMBDA_SSH_USER=getpass.getuser(),  # sshd logs in real users only
                          COLUMNS="300")  # the report's table on one line per row, labels whole


@pytest.mark.slow
def test_bench_rents_sweeps_reports_and_terminates(cloud, tmp_path, cli):
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "2", "--workload", str(script),
                         "--counts", "1,4", "--name", "b1", "--results", str(results))
    assert code == 0, err
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"], r["provider"]) for r in records] == [(1, "ok", "lambda")]
    entry = Ledger().find("b1")
    assert entry.status == "terminated"
    assert records[0]["instance_type"] == entry.instance_type and entry.instance_type
    assert records[0]["gpu_name"] == entry.gpu_name
    assert records[0]["price_per_hour"] == pytest.approx(entry.price_per_hour / 2)  # 1 GPU of 2
    assert "[1 gpu] rank 0 of 1 started" in out and "skipping 4 GPUs" in out
    assert "b1 terminated; the whole bench cost $" in out
    # it ran on the mock's CPU, whatever GPU the mock advertises: the record and the table say so
    assert (records[0]["device"], records[0]["mock_instance"]) == ("cpu", True)
    assert "on a CPU standing in for GPUs" in out and "(mock, CPU)" in out


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
    import gpubench.sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gpubench.sweep, "sweep", interrupted)
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--name", "b3", "--results", str(tmp_path))
    assert code == 130, (out, err)
    assert Ledger().find("b3").status == "terminated"
    assert "b3 terminated; the whole bench cost $" in out


@pytest.mark.slow
def test_bench_sends_a_project_with_workdir(cloud, tmp_path, cli):
    from tests.remote.test_workdir import project

    proj = project(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    code, out, err = cli("bench", "runpod", "--yes", "--gpus", "1", "--workload",
                         str(proj / "train.py"), "--workdir", str(proj), "--name", "b4",
                         "--results", str(results))
    assert code == 0, err
    records = ResultsStore(results).load().records
    assert [(r["status"], r["throughput"]) for r in records] == [("ok", 200.0)]
    assert Ledger().find("b4").status == "terminated"


def test_bench_workdir_without_a_script_is_one_line(tmp_path, cli):
    code, out, err = cli("bench", "runpod", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                         "--workdir", str(tmp_path))
    assert code == 2 and err.strip() == \
        "error: --workdir is for your own scripts; --workload names only suite workloads"


def test_bench_reports_both_the_sweep_error_and_the_failed_teardown(tmp_path, monkeypatch):
    import gpubench.lifecycle.provision

    cloud = Cloud(terminate_errors=[ProviderError("mem", "DELETE", "oops", status=503)] * 1000)

    def provision_then_fail(provider, req, offers, ledger, progress, gate=None):
        inst = cloud.add(req.name)
        row = ledger.begin(req.name, "lambda", provider_name(req.name))
        ledger.mark(row.row_id, "launched", "created_at", instance_id=inst.instance_id)
        raise GpubenchError("the workload exploded")

    monkeypatch.setattr(gpubench.lifecycle.provision, "provision", provision_then_fail)
    monkeypatch.setattr(bench_mod, "TERMINATE_DEADLINE_S", 0.3)
    req = bench_mod.BenchRequest("lambda", 1, [], name="both")
    with Ledger() as ledger, pytest.raises(bench_mod.TeardownError) as e:
        bench_mod.bench(req, ResultsStore(tmp_path), lambda line: None, ledger=ledger, provider=cloud)
    lines = str(e.value).splitlines()
    assert lines[0] == "the workload exploded"
    assert len(lines) == 2 and lines[1].startswith("error: both is NOT confirmed terminated")
