"""The step in parts as the prediction expected it, kept in a record above one GPU
(issue 58): the share the count adds to the predicted one-GPU step is the exposed
all-reduce the model expects, the rest the part the one-GPU prediction was bound by."""

from __future__ import annotations

import pytest

from gpubench.store.results import ResultsStore
from gpubench.sweep.predicted import WithPredictions, at_one_gpu, predicted_shares
from tests.predict.test_for_records import cpu_record, gloo


def test_the_share_beyond_the_one_gpu_step_is_the_exposed_all_reduce():
    shares = predicted_shares({"predicted_throughput": 150.0}, {"predicted_throughput": 100.0,
                                                               "predicted_bound_by": "compute"}, 2)
    assert shares == {"data": 0.0, "compute": 0.75, "exposed_comm": 0.25, "other": 0.0}
    floor = predicted_shares({"predicted_throughput": 200.0},
                             {"predicted_throughput": 100.0, "predicted_bound_by": "overhead"}, 2)
    assert floor == {"data": 0.0, "compute": 0.0, "exposed_comm": 0.0, "other": 1.0}


@pytest.mark.parametrize("at, one, gpus", [({"predicted_throughput": 150.0}, {}, 2),
                                           ({"predicted_throughput": None}, {"predicted_throughput": 1.0}, 2),
                                           ({"predicted_throughput": 100.0}, {"predicted_throughput": 100.0}, 1)])
def test_without_both_predictions_or_at_one_gpu_there_are_none(at, one, gpus):
    assert predicted_shares(at, one, gpus) is None


def test_a_record_at_one_gpu_keeps_its_work_per_process():
    one = at_one_gpu(cpu_record(world=4, threads=1))
    assert (one["gpu_count"], one["world_size"], one["nodes"], one["samples"]) == (1, 1, 1, 320)


def test_the_store_keeps_the_predicted_parts_beside_the_prediction(tmp_path):
    inner = ResultsStore.for_writing(tmp_path)
    inner.append("old", gloo())
    store = WithPredictions(inner)
    store.append("r", cpu_record(throughput=100.0))
    store.append("r", cpu_record(world=2, threads=1, throughput=90.0))
    first, second = [r for r in inner.load().records if r.get("workload") == "mnist-ddp"]
    assert first.get("predicted_step_shares") is None
    # 0.64 s of compute a step, 4.8 MB over gloo at 0.5 GB/s plus two hops, none hidden
    comm = 4.8e6 / 0.5e9 + 1e-4
    assert second["predicted_step_shares"]["exposed_comm"] == pytest.approx(comm / (0.64 + comm), abs=1e-4)
    assert sum(second["predicted_step_shares"].values()) == pytest.approx(1.0, abs=1e-3)


def test_kept_predictions_give_the_parts_from_the_kept_one_gpu_figure(tmp_path):
    inner = ResultsStore.for_writing(tmp_path)
    kept = {("mnist-ddp", 1, 1): {"predicted_throughput": 5000.0, "predicted_bound_by": "compute"},
            ("mnist-ddp", 2, 1): {"predicted_throughput": 9000.0}}
    store = WithPredictions(inner, kept=kept)
    store.append("r", cpu_record(world=2, threads=1, throughput=90.0))
    record = inner.load().records[0]
    assert record["predicted_step_shares"] == {"data": 0.0, "compute": 0.9, "exposed_comm": 0.1,
                                               "other": 0.0}
