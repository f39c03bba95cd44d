"""The prediction kept in a run's record: made from the records before it, on a CPU
from this host's own measurements only, and never costing the record itself."""

from __future__ import annotations

import pytest

from gpubench.predict.for_records import predicted_fields
from gpubench.store.results import ResultsStore
from gpubench.sweep.predicted import WithPredictions


def cpu_record(world=1, threads=2, throughput=None, **more) -> dict:
    return {"workload": "mnist-ddp", "workload_args": ["--steps", "10"], "precision": "fp32",
            "status": "ok", "device": "cpu", "host": "box", "gpu_name": "cpu", "gpu_count": world,
            "world_size": world, "nodes": 1, "threads_per_process": threads, "throughput": throughput,
            "samples": 320 * world, "steps": 10, "grad_bytes": 4_800_000, **more}


def gloo(busbw=0.5, world=2, host="box") -> dict:
    curve = [{"size": size, "busbw": busbw if size == 4_194_304 else busbw / 10} for size in (1024, 4_194_304)]
    return {"workload": "allreduce", "status": "ok", "device": "cpu", "host": host, "gpu_count": world,
            "curve": curve}


def test_two_processes_on_a_cpu_from_the_one_process_run_and_gloos_bandwidth():
    earlier = [cpu_record(throughput=100.0), gloo()]
    fields = predicted_fields(cpu_record(world=2, threads=1), earlier)
    # one process at 2 threads did 100/s: 0.02 s a sample at 1 thread; 32 a step -> 0.64 s;
    # 4.8 MB over 0.5 GB/s at 2 ranks: 9.6 ms plus 2 hops of 50 us, none hidden (gloo)
    step = 0.64 + 4.8e6 / 0.5e9 + 2 * 50e-6
    assert fields["predicted_throughput"] == pytest.approx(64 / step)
    assert fields["predicted_basis"] == "measured"
    assert fields["predicted_low"] < fields["predicted_throughput"] < fields["predicted_high"]


def test_a_slower_gloo_link_predicts_less():
    fast = predicted_fields(cpu_record(world=2, threads=1), [cpu_record(throughput=100.0), gloo(5.0)])
    slow = predicted_fields(cpu_record(world=2, threads=1), [cpu_record(throughput=100.0), gloo(0.05)])
    assert slow["predicted_throughput"] < fast["predicted_throughput"]


def test_another_hosts_records_or_no_link_are_no_basis():
    other = predicted_fields(cpu_record(world=2), [cpu_record(throughput=100.0, host="elsewhere"), gloo()])
    assert other == {"predicted_throughput": None, "predicted_basis": "no basis"}
    no_link = predicted_fields(cpu_record(world=2), [cpu_record(throughput=100.0)])
    assert no_link["predicted_basis"] == "no basis"


def test_a_bandwidth_test_or_a_script_timed_whole_is_not_predicted():
    assert predicted_fields(gloo(), []) == {}
    assert predicted_fields({**cpu_record(), "throughput_unit": "runs/s"}, []) == {}


def test_the_store_adds_the_prediction_from_the_records_before_and_keeps_odd_ones(tmp_path):
    inner = ResultsStore.for_writing(tmp_path)
    inner.append("old", gloo())
    store = WithPredictions(inner)
    store.append("r", cpu_record(throughput=100.0))              # nothing before it at 1 process
    store.append("r", cpu_record(world=2, threads=1, throughput=90.0))   # predicted from the one above
    store.append("r", {"workload": "mnist-ddp", "gpu_count": "two", "device": "cpu"})   # odd: kept as is
    first, second, odd = [r for r in inner.load().records if r.get("workload") == "mnist-ddp"]
    assert first["predicted_basis"] == "no basis"
    assert second["predicted_throughput"] == pytest.approx(64 / (0.64 + 4.8e6 / 0.5e9 + 1e-4))
    assert "predicted_throughput" not in odd


def test_with_kept_predictions_a_record_keeps_the_one_made_before_renting(tmp_path):
    """A bench across candidates: each record keeps the figure made before anything was
    rented, never one from a sibling's record written meanwhile (here a 1-process run
    that would otherwise predict the 2-process one)."""
    inner = ResultsStore.for_writing(tmp_path)
    inner.append("old", gloo())
    kept = {("mnist-ddp", 1, 1): {"predicted_throughput": 5000.0, "predicted_basis": "modelled"},
            ("mnist-ddp", 2, 1): {"predicted_throughput": 9000.0, "predicted_basis": "modelled"}}
    WithPredictions(inner).append("sibling", cpu_record(throughput=101.0))
    store = WithPredictions(inner, kept=kept)
    store.append("r", cpu_record(throughput=100.0))
    store.append("r", cpu_record(world=2, threads=1, throughput=90.0))
    store.append("r", cpu_record(world=4, threads=1, throughput=80.0))   # not planned: nothing kept
    ours = sorted((r for r in inner.load().records if r.get("throughput") in (100.0, 90.0, 80.0)),
                  key=lambda r: -r["throughput"])
    assert [r.get("predicted_throughput") for r in ours] == [5000.0, 9000.0, None]
    assert [r.get("predicted_basis") for r in ours[:2]] == ["modelled", "modelled"]
