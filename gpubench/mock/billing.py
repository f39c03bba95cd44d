"""What the mock bills: one charge per instance, from its creation until it was terminated
(or until now, while it lives), at its hourly price. The providers' billing endpoints
(RunPod /v2/billing/pods, Vast.ai /api/v0/charges/) answer from these.

A terminated instance leaves the store, so its charge is written down when its provider
module terminates it: a JSON file beside the state, so that a restarted mock still
reports what it billed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpubench.mock.state import MockInstance

FILE = "billing.json"


@dataclass
class Charge:
    provider: str
    instance_id: str
    label: str
    start: float              # unix seconds
    end: float                # terminated at, or now for a live instance
    price_per_hour: float     # whole machine, USD
    gpu_count: int

    @property
    def amount(self) -> float:
        return self.price_per_hour * max(self.end - self.start, 0.0) / 3600.0

    def within(self, start: float, end: float) -> "Charge | None":
        """The part of this charge inside [start, end), or None."""
        lo, hi = max(self.start, start), min(self.end, end)
        if hi <= lo:
            return None
        return Charge(self.provider, self.instance_id, self.label, lo, hi, self.price_per_hour, self.gpu_count)


def _path(engine) -> Path:
    return Path(engine.state_dir) / FILE


def _read(engine) -> list[dict]:
    try:
        return json.loads(_path(engine).read_text())
    except (OSError, ValueError):
        return []


def charge_of(inst: MockInstance, end: float | None = None) -> Charge:
    return Charge(inst.provider, inst.id, inst.name, inst.created_at, time.time() if end is None else end,
                  inst.price_per_hour, inst.gpu_count)


def record_termination(engine, inst: MockInstance) -> None:
    """Write down what `inst` cost, as its provider module terminates it."""
    with engine.lock:
        rows = [r for r in _read(engine) if (r["provider"], r["instance_id"]) != (inst.provider, inst.id)]
        rows.append(asdict(charge_of(inst)))
        _path(engine).write_text(json.dumps(rows))


def terminate(engine, inst: MockInstance) -> bool:
    """engine.terminate, recording the charge when the instance really goes (a
    terminate-lies fault keeps it, and it keeps billing)."""
    with engine.lock:
        gone = engine.terminate(inst)
        if gone:
            record_termination(engine, inst)
    return gone


def charges(engine, provider: str) -> list[Charge]:
    """Every charge of the provider: terminated instances, then live ones up to now."""
    done = [Charge(**r) for r in _read(engine) if r["provider"] == provider]
    known = {c.instance_id for c in done}
    live = [charge_of(i) for i in engine.store.instances(provider) if i.id not in known]
    return done + live
