"""How each provider's machines of each GPU type have behaved, from the ledger alone:
the phase stamps every row keeps (ledger.PHASES) and the preflight gate's findings
(its `gate` column, preflight.gate_findings).

Per (provider, GPU type):
    launches        rows with an instance id: the provider created a machine
    ready           seconds from asking (requested_at) to an SSH login (ssh_ready_at):
                    median and 90th percentile
    never ready     launched, and gone (or past BOOT_GIVE_UP_S) without an SSH login
    gate failed     of the machines the gate ran on, those that failed, by check
    thrown away     machines gpubench gave back unused (never ready, or failed the gate):
                    their estimated cost, and what the provider billed where it says

A machine still on its way (live, asked for less than BOOT_GIVE_UP_S ago, not yet
ready) is counted as launched and left out of the shares: it may yet come up.
The clock is passed in, so the figures of a ledger with known stamps are known.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Iterable

from gpubench.store.ledger import LedgerEntry

# As provision's default --boot-timeout plus its --ssh-timeout: a machine not ready by
# then never will be.
BOOT_GIVE_UP_S = 1200.0


@dataclass
class ProviderStats:
    provider: str
    gpu_name: str
    launches: int = 0
    booting: int = 0                     # still on the way: not in the shares
    never_ready: int = 0
    ready_s: list[float] = field(default_factory=list)
    gated: int = 0                       # machines the gate ran on
    gate_failed: int = 0
    failed_checks: Counter = field(default_factory=Counter)   # check -> machines failing it
    thrown_away: int = 0
    thrown_away_cost: float = 0.0        # estimated: price x time up
    thrown_away_billed: float | None = None   # what the provider billed, summed where it says
    billed_known: int = 0                # thrown-away machines with a billed amount

    @property
    def settled(self) -> int:
        """Launches that either became ready or never will."""
        return self.launches - self.booting

    @property
    def never_ready_share(self) -> float | None:
        return self.never_ready / self.settled if self.settled else None

    @property
    def gate_failed_share(self) -> float | None:
        return self.gate_failed / self.gated if self.gated else None

    @property
    def median_ready_s(self) -> float | None:
        return percentile(self.ready_s, 50)

    @property
    def p90_ready_s(self) -> float | None:
        return percentile(self.ready_s, 90)

    def failed_checks_text(self) -> str:
        """'pcie 2, throttle 1': each check and the machines that failed it, most first."""
        return ", ".join(f"{name} {n}" for name, n in
                         sorted(self.failed_checks.items(), key=lambda kv: (-kv[1], kv[0])))

    def as_dict(self) -> dict:
        """Every figure, for --format json."""
        out = {k: v for k, v in asdict(self).items() if k not in ("ready_s", "failed_checks")}
        out.update(failed_checks=dict(self.failed_checks), ready=len(self.ready_s),
                   median_ready_s=self.median_ready_s, p90_ready_s=self.p90_ready_s,
                   never_ready_share=self.never_ready_share,
                   gate_failed_share=self.gate_failed_share)
        return out


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile, interpolated between the two nearest ranks (numpy's
    default); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def gate_of(entry: LedgerEntry) -> dict | None:
    """The gate's findings kept in the row, or None where the gate did not run (or left
    something unreadable)."""
    found = entry.gate_facts
    return found if isinstance(found.get("passed"), bool) else None


def provider_stats(entries: Iterable[LedgerEntry], now: float) -> list[ProviderStats]:
    """One ProviderStats per (provider, GPU type) in the ledger rows, sorted by both."""
    groups: dict[tuple[str, str], ProviderStats] = {}
    for entry in entries:
        if not entry.instance_id:
            continue    # refused, or a launch whose answer never came: nothing was rented
        key = (entry.provider, entry.gpu_name or "?")
        stats = groups.setdefault(key, ProviderStats(*key))
        _count(stats, entry, now)
    return [groups[k] for k in sorted(groups)]


def _count(stats: ProviderStats, entry: LedgerEntry, now: float) -> None:
    stats.launches += 1
    ready = entry.ssh_ready_at is not None
    if ready and entry.requested_at is not None:
        stats.ready_s.append(max(entry.ssh_ready_at - entry.requested_at, 0.0))
    asked = entry.requested_at if entry.requested_at is not None else now
    never_ready = not ready and (not entry.active or now - asked > BOOT_GIVE_UP_S)
    if not ready and not never_ready:
        stats.booting += 1
    stats.never_ready += never_ready
    gate = gate_of(entry)
    failed_gate = gate is not None and not gate["passed"]
    if gate is not None:
        stats.gated += 1
        stats.gate_failed += failed_gate
        if failed_gate:
            stats.failed_checks.update({f.get("check", "?") for f in gate.get("failed") or []
                                        if isinstance(f, dict)})
    if never_ready or failed_gate:
        stats.thrown_away += 1
        stats.thrown_away_cost += entry.cost(now) or 0.0
        if entry.billed_cost is not None:
            stats.billed_known += 1
            stats.thrown_away_billed = (stats.thrown_away_billed or 0.0) + entry.billed_cost
