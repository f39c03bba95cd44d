"""The results store, adding to each record the prediction made for its configuration
from the records written before it (gpubench/predict/for_records.py). The records are
read once when the sweep starts; those it writes are added as it goes, so the 2-GPU
run is predicted from the 1-GPU run just before it."""

from __future__ import annotations

from gpubench.predict.for_records import predicted_fields
from gpubench.predict.records import records_for_prediction
from gpubench.providers.common import Offer


class WithPredictions:
    def __init__(self, store, offer: Offer | None = None) -> None:
        self._store = store
        self._offer = offer
        self._earlier: list[dict] | None = None

    def append(self, run_id: str, record: dict):
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

    def __getattr__(self, name: str):
        return getattr(self._store, name)
