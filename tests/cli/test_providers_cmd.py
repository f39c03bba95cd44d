"""`gpubench providers stats` on the user's ledger: a table under 80 columns with the
checks that failed, and --format json with every figure."""

from __future__ import annotations

import json
import time

from gpubench.store.ledger import Ledger


def _machine(ledger: Ledger, name: str, provider: str, ready_after: float | None,
             gate: dict | None = None, billed: float | None = None) -> None:
    asked = time.time() - 7200
    row = ledger.begin(name, provider, f"gpubench-{name}", gpu_name="H100 SXM", gpu_count=8,
                       price_per_hour=20.0)
    ledger.update(row.row_id, instance_id=f"id-{name}", requested_at=asked, created_at=asked,
                  status="launched")
    if ready_after is not None:
        ledger.update(row.row_id, status="running", running_at=asked + 1)
        ledger.update(row.row_id, status="ready", ssh_ready_at=asked + ready_after)
    ledger.update(row.row_id, status="terminating", terminate_requested_at=asked + 600)
    ledger.update(row.row_id, status="terminated", terminated_confirmed_at=asked + 720,
                  gate=json.dumps(gate) if gate else None, billed_cost=billed)


def _ledger():
    with Ledger() as ledger:
        _machine(ledger, "a", "vast", 90.0, {"passed": True, "failed": []})
        _machine(ledger, "b", "vast", 110.0, {"passed": False, "failed": [
            {"check": "pcie", "measured": "GPU 0: Gen4 x4 under load", "floor": "Gen4 x16"}]},
            billed=3.9)
        _machine(ledger, "c", "vast", None)
        _machine(ledger, "d", "runpod", 40.0)


def test_the_table_fits_80_columns_and_names_the_checks(cli):
    _ledger()
    code, out, err = cli("providers", "stats")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80, out
    vast_line = next(ln for ln in out.splitlines() if "vast H100 SXM" in ln)
    assert "100/108" in vast_line and "33%" in vast_line and "50%" in vast_line
    assert "8.00 (3.90)" in vast_line          # two machines thrown away, 12 min at $20/h
    assert "vast H100 SXM: gate failures: pcie 1" in out
    assert "runpod H100 SXM" in out


def test_json_has_every_figure_and_filters_apply(cli):
    _ledger()
    code, out, err = cli("providers", "stats", "--format", "json", "--provider", "vast")
    assert code == 0, err
    [vast] = json.loads(out)
    assert (vast["launches"], vast["median_ready_s"], vast["never_ready"], vast["gate_failed"]) == \
        (3, 100.0, 1, 1)
    assert vast["failed_checks"] == {"pcie": 1} and vast["thrown_away_billed"] == 3.9
    code, out, err = cli("providers", "stats", "--gpu-type", "A100")
    assert code == 0 and out.startswith("no machines in the ledger matching")
    code, out, err = cli("providers", "stats", "--format", "yaml")
    assert code == 2 and err.strip().startswith("error: --format")
