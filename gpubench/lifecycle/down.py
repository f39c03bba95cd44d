"""`gpubench down` as two calls: `plan_down` picks what to take down (one name, the
whole ledger, or the orphans the providers list) and connects the providers it
needs; `take_down` takes each down until confirmed, then rewrites ssh_config.
Asking the user in between is the caller's business.

A cluster joined by an overlay network (Vast.ai) loses it after its members: only
once every member is confirmed gone is the overlay deleted, and it is written off
only once the provider's list no longer has it. An overlay left over (a failed delete)
is deleted by the next `down` of its cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gpubench.errors import UsageError
from gpubench.lifecycle import fleet
from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.lifecycle.overlay import OverlayError, remove_left_overlays
from gpubench.lifecycle.sshconfig import sync_ssh_config
from gpubench.lifecycle.terminate import DownResult, take_down_entry, take_down_instance
from gpubench.lifecycle.waiting import Say, silent
from gpubench.providers import registry
from gpubench.providers.common import Instance, NotFoundError, Provider, ProviderError, native_clusters
from gpubench.providers.overlays import overlay_networks

@dataclass
class DownRequest:
    name: str | None = None      # one instance by name
    everything: bool = False     # every live row of the ledger
    orphans: bool = False        # gpubench-* instances the ledger lacks
    deadline_s: float = 180.0    # per instance, to be confirmed gone

    def validate(self) -> "DownRequest":
        if sum(bool(x) for x in (self.name, self.everything, self.orphans)) != 1:
            raise UsageError("give exactly one of NAME, --all or --orphans")
        if self.deadline_s <= 0:
            raise UsageError("--timeout must be positive")
        return self


@dataclass
class DownTarget:
    """One instance to take down: a ledger row, or an orphan the provider listed."""

    name: str
    provider: str
    instance_id: str | None
    entry: LedgerEntry | None = None
    instance: Instance | None = None

    def describe(self) -> str:
        unsure = ", terminated by the ledger's word only" if self.entry and not self.entry.active else ""
        return f"{self.name} ({self.provider} {self.instance_id or 'id unknown'}{unsure})"


@dataclass
class DownPlan:
    request: DownRequest
    targets: list[DownTarget]
    providers: dict[str, Provider]
    note: str = ""               # why there is nothing to do, when targets is empty

    def describe(self) -> str:
        return ", ".join(t.describe() for t in self.targets)


@dataclass
class DownReport:
    results: list[DownResult] = field(default_factory=list)

    @property
    def reached(self) -> list[DownResult]:
        """The instances whose provider was asked."""
        return [r for r in self.results if r.reached]

    @property
    def total_cost(self) -> float:
        return sum(r.cost or 0.0 for r in self.reached)

    @property
    def total_billed(self) -> float | None:
        """What the providers billed for the instances taken down, where every one of
        them reported it; None otherwise (the estimate, total_cost, is what is known)."""
        billed = [r.billed for r in self.reached if r.gone]
        return sum(billed) if billed and all(b is not None for b in billed) else None

    @property
    def all_gone(self) -> bool:
        return all(r.gone and r.reached for r in self.results)


def plan_down(ledger: Ledger, request: DownRequest, warn: Say = silent) -> DownPlan:
    """What `request` names, with the providers to ask connected. An unknown name is an
    UnknownInstanceError; a name whose termination its account confirmed is a plan with
    nothing to do. Any other row, terminated by an older gpubench's reckoning included,
    is a target: its provider is asked before anything is said of it."""
    request.validate()
    if request.orphans:
        providers = fleet.connect_all(registry.names(), quiet_missing_key=True)
        rows = [r for r in fleet.reconcile(ledger, providers, warn=warn) if r.entry is None]
        targets = [DownTarget(r.name, r.provider, r.instance_id, instance=r.instance) for r in rows]
        return DownPlan(request, targets, providers, "nothing to take down")
    if request.name and ledger.cluster_members(request.name, include_done=True):
        # A cluster: every member not confirmed gone. One that cannot be confirmed keeps
        # its row live, so the cluster stays listed.
        entries = [m for m in ledger.cluster_members(request.name, include_done=True)
                   if not m.termination_confirmed]
        if not entries:
            return DownPlan(request, [], {}, f"cluster {request.name} is already terminated"
                            + _left_overlays(ledger, request.name, warn))
    elif request.name:
        entry = ledger.find(request.name)
        if entry.termination_confirmed:
            return DownPlan(request, [], {}, f"{request.name} is already {entry.status}")
        entries = [entry]
        if entry.provider_cluster_id and entry.cluster:
            # A member of a provider's own cluster goes only with the whole cluster.
            entries = [m for m in ledger.cluster_members(entry.cluster, include_done=True)
                       if not m.termination_confirmed] or entries
            warn(f"{request.name} is a member of {entry.provider} cluster {entry.cluster}, which "
                 f"{entry.provider} takes down only as a whole: taking down every member "
                 f"({', '.join(m.name for m in entries)})")
    else:
        entries = ledger.entries()
    providers = fleet.connect_all(sorted({e.provider for e in entries}), warn)
    targets = [DownTarget(e.name, e.provider, e.instance_id, entry=e) for e in entries]
    return DownPlan(request, targets, providers, "nothing to take down")


def take_down(ledger: Ledger, plan: DownPlan, say: Say = silent,
              on_result: Callable[[DownResult], None] = lambda result: None) -> DownReport:
    """Take each target down in turn (`on_result` hears of each as it ends), then
    rewrite ssh_config. A target whose provider is not connected is reported, not tried."""
    report = DownReport()
    for provider_name, provider in plan.providers.items():
        delete_native_clusters(provider, [t.entry for t in plan.targets
                                          if t.entry is not None and t.provider == provider_name], say)
    for target in plan.targets:
        provider = plan.providers.get(target.provider)
        if provider is None:
            result = DownResult(target.name, target.provider, target.instance_id, False, None,
                                f"cannot reach {target.provider} (no API key)", reached=False)
        elif target.entry is None:
            result = take_down_instance(target.instance, provider, plan.request.deadline_s, say)
        else:
            result = take_down_entry(ledger, target.entry, provider, plan.request.deadline_s, say)
        report.results.append(result)
        on_result(result)
    clusters = {t.entry.cluster for t in plan.targets if t.entry is not None and t.entry.overlay_id}
    for provider_name, provider in plan.providers.items():
        for cluster in sorted(c for c in clusters if c):
            for line in remove_left_overlays(ledger, provider, overlay_networks(provider), cluster, say):
                result = DownResult(f"{cluster} overlay", provider_name, None, False, None, line)
                report.results.append(result)
                on_result(result)
    sync_ssh_config(ledger)
    return report


def _left_overlays(ledger: Ledger, cluster: str, say: Say) -> str:
    """Delete the overlay a terminated cluster left (its delete failed before); what
    became of it, as the end of the plan's note. An OverlayError when it is not
    confirmed gone."""
    left = ledger.overlays_left(cluster)
    if not left:
        return ""
    lines = []
    for name in sorted({p for p, _ in left}):
        provider = fleet.connect_all([name], say).get(name)
        if provider is None:
            raise OverlayError(f"cluster {cluster}: cannot reach {name} to delete its overlay")
        lines += remove_left_overlays(ledger, provider, overlay_networks(provider), cluster, say)
    if lines:
        raise OverlayError(f"cluster {cluster}: {'; '.join(lines)}")
    return "; its overlay network was deleted and confirmed gone"


def delete_native_clusters(provider: Provider, entries: list[LedgerEntry], say: Say = silent) -> None:
    """Ask the provider to delete each of its own clusters (provider_cluster_id) that
    `entries` belong to, once per cluster. Each member is still confirmed gone one by
    one afterwards (take_down_entry): the delete's answer proves nothing. A delete that
    fails is said, and the members' own terminates follow (RunPod's delete the cluster
    again)."""
    clusters = native_clusters(provider)
    if clusters is None:
        return
    for cluster_id in dict.fromkeys(e.provider_cluster_id for e in entries if e.provider_cluster_id):
        say(f"deleting {provider.name} cluster {cluster_id} (every member goes with it)")
        try:
            clusters.delete_cluster(cluster_id)
        except NotFoundError:
            pass                 # already gone; the members are confirmed below
        except ProviderError as e:
            if e.final:
                raise
            say(f"warning: deleting {provider.name} cluster {cluster_id} failed ({e}); "
                f"terminating its members one by one")
