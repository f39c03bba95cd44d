"""The results store, adding to each record the prediction made for its configuration
from the records written before it (gpubench/predict/for_records.py). The records are
read once when the sweep starts; those it writes are added as it goes, so the 2-GPU
run is predicted from the 1-GPU run just before it.

Given `kept` (a bench across candidates), each record gets instead the prediction made
for its configuration before anything was rented, the figure the user agreed on: never
one made from a sibling candidate's records written meanwhile."""

from __future__ import annotations

from gpubench.predict.for_records import predicted_fields
from gpubench.predict.records import records_for_prediction
from gpubench.providers.common import Offer


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
        except (ArithmeticError, KeyError, TypeError, ValueError):
            fields = {}     # odd old records: the run's record matters more than its forecast
        for key, value in fields.items():
            if record.get(key) is None:     # the sweep writes every field, null where unknown
                record[key] = value
        path = self._store.append(run_id, record)
        self._earlier.append(record)
        return path

    def _with_kept(self, record: dict) -> dict:
        key = (record.get("workload"), record.get("gpu_count"), record.get("nodes") or 1)
        for field, value in self._kept.get(key, {}).items():
            if record.get(field) is None:
                record[field] = value
        return record

    def __getattr__(self, name: str):
        return getattr(self._store, name)
