"""Rent a cluster: N machines of one offer type in one region, all or nothing.

Each member is rented by provision.py's single-machine path (its ledger row written
before each launch call, its deadlines, its replacement of a machine that never
becomes reachable within `attempts` launches), here with the cluster's name and the
member's place in it (node_index, 0 = the head) on the row. Members are rented in
turn, head first: a failure or Ctrl-C is then always met in this one thread, which
terminates every member rented so far and confirms each gone before the error goes
up. (Renting them concurrently would save boot time, but the single-machine waits
cannot be stopped from another thread, so a failed member would leave the others
launching.)

Where it goes is decided before anything is rented (cluster_placement.py).

A placement on one physical cluster (Vast.ai's cluster_id) is joined by an overlay
network (overlay.py): made before the first member is rented, so a refusal costs
nothing; each member joins it once all are ready, and the members' addresses on it are
their private addresses, which the rendezvous and the collectives then use. Its id is
kept on every member's row; it is deleted after the members are confirmed gone.

A provider with clusters of its own (providers.common.NativeClusters: RunPod's Instant
Clusters, with a private network between the members) rents two or more members in one
create call instead, all or nothing being the provider's: one row per member is written
before the call and filled in after its answer, and the provider's cluster id is kept
on every row (provider_cluster_id). Such a cluster cannot replace one member: a member
that never becomes reachable deletes the whole cluster, every member confirmed gone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, NoReturn

from gpubench.errors import GpubenchError, UsageError
from gpubench.lifecycle import accounts, watchdog
from gpubench.lifecycle.down import delete_native_clusters
from gpubench.lifecycle.keys import ensure_keypair
from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.lifecycle.boot import Gate, Progress, run_gate, wait_running, wait_ssh
from gpubench.lifecycle.cluster_placement import (ClusterRequest, Placement, PlacementError, member_name,
                                                  one_machine_per_offer)
from gpubench.lifecycle.provision import ProvisionRequest, network_columns, provision
from gpubench.lifecycle.sshconfig import sync_ssh_config
from gpubench.store.status import LedgerStatus
from gpubench.lifecycle.terminate import DownResult, take_down_entry
from gpubench.lifecycle.waiting import pause
from gpubench.lifecycle.overlay import OverlayError, join_members, make_overlay, remove_left_overlays, remove_overlay
from gpubench.providers.overlays import Overlay, overlay_networks
from gpubench.providers.common import (Instance, LaunchSpec, NativeClusters, Offer, Provider, ProviderError,
                                       native_clusters, provider_name)
from gpubench.remote.cluster import LOOPBACK, PRIVATE, ClusterHosts, node_from_entry

# The ports members talk to each other on, exposed at launch where the provider maps
# ports (Vast.ai, RunPod): torchrun's c10d rendezvous (its TCPStore) on 29500, and the
# ten above it for the collectives' own listeners (gloo, NCCL's socket transport) where
# the launcher pins them. SSH (22) is always exposed besides.
RENDEZVOUS_PORT = 29500
CLUSTER_PORTS = (RENDEZVOUS_PORT, *range(RENDEZVOUS_PORT + 1, RENDEZVOUS_PORT + 11))
TERMINATE_S = 180.0


class ClusterError(GpubenchError):
    """The cluster could not be completed; every member rented was taken down."""


# -- renting --------------------------------------------------------------------

@dataclass
class ClusterOutcome:
    name: str
    placement: Placement
    members: list[LedgerEntry]       # head first
    replaced: list[str] = field(default_factory=list)   # one line per machine replaced or refused
    seconds_to_ready: float = 0.0
    links: list = field(default_factory=list)          # launch/cluster_link.LinkMeasure, per member
    overlay: Overlay | None = None                      # the overlay network joining them, where one does

    @property
    def hosts(self) -> ClusterHosts:
        return ClusterHosts(self.name, tuple(node_from_entry(m) for m in self.members))

    @property
    def price_per_hour(self) -> float:
        return sum(m.price_per_hour or 0.0 for m in self.members)


def check_name_free(ledger: Ledger, name: str, nodes: int) -> None:
    """A UsageError when `name` or a member's name is in use by a live machine or cluster."""
    if ledger.cluster_members(name):
        raise UsageError(f"--name '{name}': a cluster named '{name}' is already in the ledger "
                         f"(see 'gpubench ls'; pick another --name)")
    for taken in (name, *(member_name(name, i) for i in range(nodes))):
        if ledger.find_active(taken) is not None:
            raise UsageError(f"--name '{name}': an instance named '{taken}' is already in the ledger "
                             f"(see 'gpubench ls'; pick another --name)")


def provision_cluster(provider: Provider, req: ClusterRequest, placement: Placement, ledger: Ledger,
                      progress: Progress, gate: Gate | None = None) -> ClusterOutcome:
    """Rent `req.nodes` machines from `placement`, head first. Anything that stops the
    cluster from being completed (a member that cannot be had within its attempts, a
    mismatched member, Ctrl-C) terminates every member and confirms each gone first."""
    started = time.monotonic()
    name = req.machine.name
    check_name_free(ledger, name, req.nodes)
    outcome = ClusterOutcome(name, placement, [])
    clusters = native_clusters(provider)
    if clusters is not None and req.nodes >= 2:
        _provision_native(provider, clusters, req, outcome, ledger, progress, gate)
        outcome.seconds_to_ready = time.monotonic() - started
        outcome.links = measure_and_keep(ledger, outcome, progress)
        return outcome
    overlays = overlay_networks(provider) if placement.cluster_id and req.nodes >= 2 else None
    if overlays is not None:
        try:
            outcome.overlay = make_overlay(overlays, provider.name, placement.cluster_id, name,
                                           lambda line: progress("overlay", line))
        except OverlayError as e:
            raise ClusterError(f"cluster {name} on {provider.name} not rented: {e}") from None
    try:
        for index in range(req.nodes):
            member = replace(req.machine, name=member_name(name, index), cluster=name, node_index=index,
                             region=placement.region or req.machine.region, ports=CLUSTER_PORTS,
                             overlay_id=outcome.overlay.overlay_id if outcome.overlay is not None else None)
            said = _member_progress(progress, name, index)
            pool = _pool(provider.name, placement, outcome.members, req.machine.attempts)
            result = provision(provider, member, pool, ledger, said, gate)
            outcome.members.append(result.entry)
            outcome.replaced += [f"node {index}: {line}" for line in result.attempts]
        outcome.hosts.check_uniform()
        if outcome.overlay is not None:
            from gpubench import paths

            outcome.members = join_members(overlays, outcome.overlay, outcome.members, ledger,
                                           paths.known_hosts_path(), lambda line: progress("overlay", line))
    except BaseException as e:
        _give_up(ledger, provider, name, e, progress, "terminating every member", overlay=outcome.overlay)
    outcome.seconds_to_ready = time.monotonic() - started
    outcome.links = measure_and_keep(ledger, outcome, progress)
    return outcome


# -- a provider's own cluster (NativeClusters) ---------------------------------

class _MemberFailed(Exception):
    """A member of a provider's cluster never became usable (says which and why)."""


def _provision_native(provider: Provider, clusters: NativeClusters, req: ClusterRequest,
                      outcome: ClusterOutcome, ledger: Ledger, progress: Progress,
                      gate: Gate | None) -> None:
    """Rent the whole cluster in one create call, then wait for every member to run and
    answer SSH (each with the single-machine deadlines). Fills outcome.members; anything
    that stops the cluster deletes it and confirms every member gone first."""
    machine, name, placement = req.machine, req.machine.name, outcome.placement
    offer = placement.offers[0]
    keypair = ensure_keypair()
    progress("key", f"registering {keypair.private}.pub with {provider.name}")
    key_ref = provider.ensure_ssh_key(keypair.public_key, "gpubench")
    account = accounts.identified(provider)
    region = placement.region or machine.region
    rows = [ledger.begin(member_name(name, i), provider.name, provider_name(member_name(name, i)), account,
                         offer_id=offer.offer_id, instance_type=offer.instance_type, region=region,
                         gpu_name=offer.gpu_name, gpu_count=offer.gpu_count, price_per_hour=offer.price_per_hour,
                         disk_gb=machine.disk_gb, image=machine.image, key_path=str(keypair.private),
                         deadline_at=watchdog.deadline_after(machine.max_hours), cluster=name, node_index=i)
            for i in range(req.nodes)]
    spec = LaunchSpec(gpus=machine.gpus, disk_gb=machine.disk_gb, image=machine.image, region=region,
                      name=name, ssh_key=key_ref)
    progress("launch", f"one {provider.name} cluster of {req.nodes} x {offer.gpu_count}x {offer.gpu_name} at "
                       f"${offer.price_per_hour:.2f}/h each ({offer.instance_type or offer.offer_id}"
                       f"{', ' + region if region else ''})")
    try:
        created = clusters.create_cluster(offer, spec, req.nodes)
    except ProviderError as e:
        if not e.launch_refused:     # it may exist: keep the rows, 'ls' resolves them by name
            for row in rows:
                ledger.update(row.row_id, note=f"launch answer unclear: {e.message}"[:300],
                              launch_ended_at=time.time())
            raise ClusterError(f"{e} -- the cluster may have been created; run 'gpubench ls' to check "
                               f"and 'gpubench down {name}' to remove it") from None
        for row in rows:
            ledger.discard(row.row_id)       # a definite no: nothing was created
        if e.offer_unavailable:
            where = f"in {region}" if region else "in one data centre"
            raise PlacementError(f"{provider.name} cannot place {req.nodes} machines of {offer.gpu_count}x "
                                 f"{offer.gpu_name} {where}: {e.message}") from None
        raise
    for row in rows:
        ledger.update(row.row_id, provider_cluster_id=created.cluster_id, launch_ended_at=time.time())
    progress("created", f"{provider.name} cluster {created.cluster_id}")
    try:
        members = _members_placed(provider, clusters, created.cluster_id, created.instances, req, progress)
        for index, (row, inst) in enumerate(zip(rows, members)):
            entry = ledger.mark(row.row_id, LedgerStatus.LAUNCHED, "created_at", instance_id=inst.instance_id,
                                price_per_hour=inst.price_per_hour or offer.price_per_hour)
            _member_progress(progress, name, index)("created", f"{provider.name} instance {inst.instance_id}")
        for index, row in enumerate(rows):
            outcome.members.append(_member_ready(provider, ledger, ledger.get(row.row_id), offer, machine,
                                                 gate, _member_progress(progress, name, index)))
        outcome.hosts.check_uniform()
        sync_ssh_config(ledger)
        for entry in outcome.members:
            if entry.deadline_at is not None:
                # Its watchdog could not remove it: the pod's own key may delete that pod only,
                # and a member goes only with its cluster.
                ledger.update(entry.row_id, watchdog="not started: a cluster member cannot remove "
                                                     "itself; the ledger's deadline holds")
        if machine.max_hours:
            progress("watchdog", f"not started on {provider.name} cluster members (one cannot remove "
                                 f"itself); the ledger's deadline holds: any gpubench command after it "
                                 f"takes the cluster down")
    except BaseException as e:
        _give_up(ledger, provider, name, e, progress,
                 f"{provider.name} cannot replace one member of its cluster: deleting the whole cluster",
                 f"{provider.name} cannot replace one member of its cluster, so the whole cluster was deleted: ")
    outcome.members = ledger.cluster_members(name) or outcome.members


def _members_placed(provider: Provider, clusters: NativeClusters, cluster_id: str, found: list[Instance],
                    req: ClusterRequest, progress: Progress) -> list[Instance]:
    """Every member of the provider's cluster, head first, once the provider lists them
    all (within the boot deadline)."""
    deadline = time.monotonic() + req.machine.deadlines.running_s
    while len(found) < req.nodes:
        if time.monotonic() >= deadline:
            raise _MemberFailed(f"{provider.name} placed {len(found)} of {req.nodes} members of cluster "
                                f"{cluster_id} within {req.machine.deadlines.running_s:g} s")
        pause(deadline)
        try:
            found = clusters.cluster_instances(cluster_id)
        except ProviderError as e:
            if e.final:
                raise
            progress("booting", f"cannot list the members of {cluster_id} yet: {e}")
    return found[:req.nodes]


def _member_ready(provider: Provider, ledger: Ledger, entry: LedgerEntry, offer: Offer,
                  machine: ProvisionRequest, gate: Gate | None, progress: Progress) -> LedgerEntry:
    """Wait for one member to run and answer SSH (and pass `gate`); its row ends ready.
    _MemberFailed says which member failed and why."""
    where = f"node {entry.node_index} ({entry.instance_id})"
    try:
        ready = wait_running(provider, entry.instance_id, machine.deadlines.running_s, progress)
        entry = ledger.mark(entry.row_id, LedgerStatus.RUNNING, "running_at", ssh_host=ready.ssh_host,
                            ssh_port=ready.ssh_port, ssh_user=ready.ssh_user, **network_columns(ready))
        progress("running", f"{ready.ssh_user}@{ready.ssh_host}:{ready.ssh_port}"
                            + (f", private {ready.private_ip}" if ready.private_ip else ""))
        wait_ssh(ready, entry.key_path, machine.deadlines.ssh_s, progress)
    except Exception as e:
        if isinstance(e, ProviderError):
            raise
        raise _MemberFailed(f"{where}: {e}") from None
    entry = ledger.mark(entry.row_id, LedgerStatus.READY, "ssh_ready_at")
    if gate is not None:
        report, why = run_gate(gate, entry, offer, progress)
        entry = ledger.update(entry.row_id, note=(why or report.summary())[:500])
        if why:
            raise _MemberFailed(f"{where}: {why}")
    progress("ready", f"ssh {entry.ssh_alias}")
    return entry


def measure_and_keep(ledger: Ledger, outcome: ClusterOutcome, progress: Progress) -> list:
    """The head -> member links measured over the joining network, each said and kept
    in its member's ledger row. A link that cannot be measured is said, not fatal."""
    from gpubench import paths
    from gpubench.remote import cluster_link

    links = cluster_link.measure_links(outcome.hosts, paths.known_hosts_path())
    by_index = {m.node_index: m for m in outcome.members}
    for link in links:
        progress("link", link.line())
        if link.node in by_index:
            cluster_link.keep(ledger, by_index[link.node], link)
    outcome.members = ledger.cluster_members(outcome.name) or outcome.members
    return links


def _pool(provider: str, placement: Placement, rented: list[LedgerEntry], attempts: int) -> list[Offer]:
    """The offers to rent the next member from, in the order provision() walks them
    (it moves to the next offer after a machine that never became ready): the
    placement's offers once per attempt, so a replacement comes from the same type in
    the same region. Where an offer is one machine, the ones no member holds come first."""
    offers = list(placement.offers)
    if one_machine_per_offer(provider):
        held = {m.offer_id for m in rented}
        offers.sort(key=lambda o: o.offer_id in held)
    return offers * max(attempts, 1)


def _member_progress(progress: Progress, cluster: str, index: int) -> Progress:
    return lambda phase, detail: progress(phase, f"{cluster}:{index} {detail}")


def take_down_cluster(ledger: Ledger, provider: Provider, name: str,
                      say: Callable[[str], None]) -> list[DownResult]:
    """Terminate every live member of cluster `name` and confirm each gone; the results
    of those that are not (their rows stay live: 'ls' shows them)."""
    return [r for r in take_down_members(ledger, provider, name, say) if not r.gone]


def take_down_members(ledger: Ledger, provider: Provider, name: str,
                      say: Callable[[str], None]) -> list[DownResult]:
    """Terminate every live member of cluster `name`, each confirmed gone through the
    provider's API (a member whose link died is still listed there: it is terminated
    like the others); every member's result, head first. A provider's own cluster is
    deleted first, as a whole (down.delete_native_clusters)."""
    results = []
    delete_native_clusters(provider, ledger.cluster_members(name), say)
    for entry in ledger.cluster_members(name):
        try:
            result = take_down_entry(ledger, entry, provider, TERMINATE_S, say)
        except Exception as e:     # one member's failure must not keep the others billing
            result = DownResult(entry.name, entry.provider, entry.instance_id, False, None, str(e))
        results.append(result)
    # The overlay goes after its members, each confirmed gone; one not confirmed gone is
    # a result that is not gone (it costs nothing: 0.0).
    for line in remove_left_overlays(ledger, provider, overlay_networks(provider), name, say):
        results.append(DownResult(f"{name} overlay", provider.name, None, False, 0.0, line, billed=0.0))
    return results


def _give_up(ledger: Ledger, provider: Provider, name: str, error: BaseException, progress: Progress,
             doing: str, said: str = "", overlay: Overlay | None = None) -> NoReturn:
    """A cluster that cannot be completed (or Ctrl-C): take every member down, confirm
    each gone, then its overlay (where one was made), and raise ClusterError saying so
    (KeyboardInterrupt again after Ctrl-C)."""
    why = "interrupted" if isinstance(error, KeyboardInterrupt) else str(error)
    progress("teardown", f"cluster {name} cannot be completed ({why}); {doing}")
    left = take_down_cluster(ledger, provider, name, lambda line: progress("teardown", line))
    overlays = overlay_networks(provider)
    if overlay is not None and overlays is not None and not left and \
            not ledger.overlay_rows(provider.name, overlay.overlay_id):
        # made, but no member row was written (none launched): the ledger cannot name it,
        # so it goes here (a row that names it: take_down_cluster deleted it after its members)
        why_kept = remove_overlay(overlays, provider.name, overlay.overlay_id, None,
                                  lambda line: progress("teardown", line))
        if why_kept:
            left.append(DownResult(f"{name} overlay", provider.name, None, False, 0.0, why_kept))
    sync_ssh_config(ledger)
    if isinstance(error, KeyboardInterrupt):
        progress("teardown", _teardown_line(name, left))
        raise error
    raise ClusterError(f"cluster {name} on {provider.name} not completed: {why}; "
                       f"{said}{_teardown_line(name, left)}") from None


def _teardown_line(name: str, left: list[DownResult]) -> str:
    if not left:
        return "every member was terminated and confirmed gone"
    names = ", ".join(f"{r.name} ({r.message})" for r in left)
    return f"NOT confirmed gone: {names}; run 'gpubench ls', then 'gpubench down {name}'"


# -- saying how the members are joined -------------------------------------------

def network_line(provider: str, hosts: ClusterHosts, overlay: Overlay | None = None) -> str:
    """One line on which network joins the members, plainly."""
    network = hosts.network
    if network == PRIVATE:
        addresses = ", ".join(n.private_ip for n in hosts.nodes)
        if overlay is not None:
            return (f"network: {provider} overlay network {overlay.name} ({overlay.subnet or 'subnet unknown'}) "
                    f"on physical cluster {overlay.cluster_id}: {addresses}")
        return f"network: {provider}'s private network ({addresses})"
    line = (f"network: {provider} gives no private network between these machines: the link "
            f"between nodes is the public internet")
    mapped = hosts.head.port_map.get(RENDEZVOUS_PORT)
    if mapped is not None:
        line += f" (the head's rendezvous port {RENDEZVOUS_PORT} is mapped to {mapped})"
    elif hosts.size > 1:
        line += f" ({provider} mapped no public port for the rendezvous port {RENDEZVOUS_PORT})"
    if network == LOOPBACK:
        line += "; here every member is on this machine's loopback (mock cloud)"
    return line
