"""The results store, adding to each record the prediction made for its configuration
from the records written before it (gpubench/predict/for_records.py). The records are
read once when the sweep starts; those it writes are added as it goes, so the 2-GPU
run is predicted from the 1-GPU run just before it.

Given `kept` (a bench across candidates), each record gets instead the prediction made
for its configuration before anything was rented, the figure the user agreed on: never
one made from a sibling candidate's records written meanwhile.

Above one GPU a record also gets the step in parts as the prediction expected it
(predicted_step_shares), from the prediction at its count and the one at one GPU made
from the same records: the model keeps each GPU's work per step whatever the count, so
the share of the predicted step beyond the one-GPU step (1 - the predicted efficiency) is
the all-reduce it expects exposed, and the rest is the one-GPU step, under the part that
prediction was bound by."""

from __future__ import annotations

from gpubench.predict.for_records import predicted_fields
from gpubench.predict.records import records_for_prediction
from gpubench.providers.common import Offer
from gpubench.workloads import step_parts

SHARES = "predicted_step_shares"
# The part of the step a one-GPU prediction's bound names: waiting for input is data, the
# assumed step floor is host work around the model; compute, host launches and memory
# traffic are the model's compute.
BOUND_PART = {"input": step_parts.DATA, "overhead": step_parts.OTHER}


def predicted_shares(at: dict, one: dict, gpus: int) -> dict | None:
    """The predicted step's parts at `gpus` GPUs from the predicted_* fields there (`at`)
    and at one GPU (`one`), shares adding up to 1; None at one GPU or without both."""
    n, single = at.get("predicted_throughput"), one.get("predicted_throughput")
    if gpus <= 1 or not n or not single or n <= 0 or single <= 0:
        return None
    efficiency = min(n / gpus / single, 1.0)     # the one-GPU step over this one
    shares = dict.fromkeys(step_parts.PARTS, 0.0)
    shares[step_parts.COMM] = 1.0 - efficiency
    shares[BOUND_PART.get(one.get("predicted_bound_by"), step_parts.COMPUTE)] += efficiency
    return step_parts.rounded(shares, 4)


def at_one_gpu(record: dict) -> dict:
    """`record` as its configuration would run on one GPU: the same work per process."""
    world = record.get("world_size") or record.get("gpu_count") or 1
    samples = record.get("samples")
    return {**record, "gpu_count": 1, "world_size": 1, "nodes": 1,
            "samples": samples / world if isinstance(samples, (int, float)) else samples}


class WithPredictions:
    def __init__(self, store, offer: Offer | None = None, kept: dict | None = None) -> None:
        self._store = store
        self._offer = offer
        self._kept = kept          # (workload, gpus, nodes) -> predicted_* fields, made before renting
        self._earlier: list[dict] | None = None

    def append(self, run_id: str, record: dict):
        if self._kept is not None:
            return self._store.append(run_id, self._with_kept(record))
        if self._earlier is None:
            self._earlier = records_for_prediction(self._store.directory)[0]
        try:
            fields = predicted_fields(record, self._earlier, self._offer)
            if fields and record["gpu_count"] > 1:
                one = predicted_fields(at_one_gpu(record), self._earlier, self._offer)
                fields[SHARES] = predicted_shares(fields, one, record["gpu_count"])
        except (ArithmeticError, KeyError, TypeError, ValueError):
            fields = {}     # odd old records: the run's record matters more than its forecast
        for key, value in fields.items():
            if record.get(key) is None:     # the sweep writes every field, null where unknown
                record[key] = value
        path = self._store.append(run_id, record)
        self._earlier.append(record)
        return path

    def _with_kept(self, record: dict) -> dict:
        workload, gpus = record.get("workload"), record.get("gpu_count")
        kept = dict(self._kept.get((workload, gpus, record.get("nodes") or 1), {}))
        if kept and isinstance(gpus, int):
            kept[SHARES] = predicted_shares(kept, self._kept.get((workload, 1, 1), {}), gpus)
        for field, value in kept.items():
            if record.get(field) is None:
                record[field] = value
        return record

    def __getattr__(self, name: str):
        return getattr(self._store, name)
