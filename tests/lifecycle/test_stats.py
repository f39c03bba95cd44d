"""Provider statistics from ledger rows with known stamps: launches, median and p90
seconds to SSH-ready, the share never ready, the share that failed the gate and on
which check, and what the machines thrown away cost (estimated, billed where known)."""

from __future__ import annotations

import json

import pytest

from gpubench.store.ledger import LedgerEntry
from gpubench.lifecycle.stats import BOOT_GIVE_UP_S, percentile, provider_stats
from gpubench.store.status import LedgerStatus

NOW = 1_000_000.0


def row(n: int, provider: str = "vast", gpu: str = "H100 SXM", ready_after: float | None = 60.0,
        status: str = "terminated", gate: dict | None = None, up_s: float = 360.0,
        price: float = 2.0, billed: float | None = None, instance: bool = True,
        asked: float = NOW - 10_000) -> LedgerEntry:
    """A machine asked for at `asked`, SSH-ready `ready_after` seconds later (None:
    never), up for `up_s` seconds at `price` $/h."""
    return LedgerEntry(
        row_id=n, name=f"m{n}", provider=provider, instance_id=f"i{n}" if instance else None,
        provider_name=f"gpubench-m{n}", status=LedgerStatus(status), gpu_name=gpu, gpu_count=1,
        price_per_hour=price, requested_at=asked, created_at=asked,
        ssh_ready_at=None if ready_after is None else asked + ready_after,
        terminated_confirmed_at=asked + up_s if status == "terminated" else None,
        gate=json.dumps(gate) if gate is not None else None, billed_cost=billed)


def gate(passed: bool, *checks: str) -> dict:
    return {"passed": passed, "failed": [{"check": c, "measured": "x", "floor": "y"} for c in checks]}


def test_percentile_interpolates_between_ranks():
    assert percentile([], 50) is None
    assert percentile([7.0], 90) == 7.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert percentile([float(v) for v in range(1, 11)], 90) == pytest.approx(9.1)


def test_a_providers_figures_from_known_stamps():
    rows = [row(1, ready_after=30.0, gate=gate(True)),
            row(2, ready_after=40.0, gate=gate(True)),
            row(3, ready_after=50.0, gate=gate(False, "pcie")),
            row(4, ready_after=100.0, gate=gate(False, "throttle", "pcie"), billed=0.15),
            row(5, ready_after=None, up_s=900.0),                     # gave up on it
            row(6, ready_after=None, status="launched", asked=NOW - 60),   # still booting
            row(7, instance=False, ready_after=None),               # never created: not a launch
            row(8, provider="lambda", gpu="A100", ready_after=200.0)]
    lam, vast = provider_stats(rows, now=NOW)       # sorted by provider, then GPU
    assert (lam.provider, lam.gpu_name, lam.launches, lam.median_ready_s) == ("lambda", "A100", 1, 200.0)
    assert (vast.provider, vast.gpu_name) == ("vast", "H100 SXM")
    assert vast.launches == 6 and vast.booting == 1 and vast.settled == 5
    assert vast.median_ready_s == 45.0                  # of 30, 40, 50, 100
    assert vast.p90_ready_s == pytest.approx(85.0)      # 50 + 0.7 x 50
    assert vast.never_ready == 1 and vast.never_ready_share == pytest.approx(1 / 5)
    assert (vast.gated, vast.gate_failed, vast.gate_failed_share) == (4, 2, 0.5)
    assert dict(vast.failed_checks) == {"pcie": 2, "throttle": 1}
    assert vast.failed_checks_text() == "pcie 2, throttle 1"
    # thrown away: rows 3, 4 (the gate) and 5 (never ready): 6 + 6 + 15 minutes at $2/h
    assert vast.thrown_away == 3
    assert vast.thrown_away_cost == pytest.approx(2.0 * (360 + 360 + 900) / 3600)
    assert (vast.thrown_away_billed, vast.billed_known) == (0.15, 1)
    as_json = vast.as_dict()
    assert as_json["failed_checks"] == {"pcie": 2, "throttle": 1} and as_json["ready"] == 4
    assert json.dumps(as_json)


def test_a_machine_past_the_boot_limit_without_ssh_never_became_ready():
    [stats] = provider_stats([row(1, ready_after=None, status="running",
                                  asked=NOW - BOOT_GIVE_UP_S - 1)], now=NOW)
    assert (stats.never_ready, stats.booting, stats.thrown_away) == (1, 0, 1)
    # its cost runs until now: it was never terminated
    assert stats.thrown_away_cost == pytest.approx(2.0 * (BOOT_GIVE_UP_S + 1) / 3600)


def test_an_unreadable_gate_column_counts_as_no_gate():
    [stats] = provider_stats([row(1, gate=None), row(2)], now=NOW)
    assert stats.gated == 0 and stats.gate_failed_share is None
    broken = row(3)
    broken.gate = "{not json"
    [stats] = provider_stats([broken], now=NOW)
    assert stats.gated == 0
