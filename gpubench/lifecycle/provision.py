"""Rent one machine: pick the cheapest matching offer, launch it, and wait until SSH
answers, with the ledger written before every launch call.

Phases, each with its own deadline: launch call answered (created), provider says
running with an SSH address (running), an SSH login succeeds (ssh_ready). An
instance that misses a deadline or fails is terminated (and that confirmed), and the
next offer is tried, at most `attempts` launches in all. With a preflight gate
(preflight.py), a machine that fails it once SSH answers is replaced the same way.
Offers whose published host figures fail offer_checks are never tried.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from gpubench.errors import GpubenchError, UsageError
from gpubench.lifecycle import accounts, watchdog
from gpubench.lifecycle.boot import Gate, NotReady, Progress, run_gate, wait_ssh, wait_running
from gpubench.lifecycle.consent import Consent
from gpubench.lifecycle.keys import ensure_keypair
from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.lifecycle.sshconfig import sync_ssh_config
from gpubench.store.status import LedgerStatus
from gpubench.lifecycle.terminate import terminate_and_confirm
from gpubench.offer_checks import left_out_line, split_offers
from gpubench.offers import OfferFilter, explain_none, matching_offers
from gpubench.providers import registry
from gpubench.providers.common import Instance, LaunchSpec, Offer, Provider, ProviderError, Volume, provider_name

DEFAULT_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel"
# Launches refused for capacity cost nothing and do not count as attempts, but the walk
# down the offer list stops here (RunPod has no server-side fallback: this is ours).
MAX_CANDIDATES = 12
if TYPE_CHECKING:
    from gpubench.lifecycle.preflight import GateReport

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


class NoOfferError(GpubenchError):
    pass


class ProvisionError(GpubenchError):
    pass


@dataclass
class Deadlines:
    running_s: float = 900.0     # launch answered -> provider says running with an address
    ssh_s: float = 300.0         # running -> an SSH login works
    terminate_s: float = 120.0   # terminate -> the provider no longer lists it


@dataclass(frozen=True)
class Pin:
    """A volume a machine is rented with: only offers where it is will do (a region, a
    data centre, one machine), and it is mounted at VOLUME_MOUNT (gpubench.lifecycle.volumes
    makes one)."""

    name: str                          # the ledger's volume
    volume: Volume
    allows: Callable[[Offer], bool]    # the offer can mount it
    why_none: str                      # said when no offer that fits the rest is where it is


@dataclass
class ProvisionRequest:
    provider: str
    gpus: int
    gpu_type: str | None = None
    disk_gb: int = 100
    image: str = DEFAULT_IMAGE
    region: str | None = None
    name: str | None = None
    max_price: float | None = None
    interruptible: bool = False
    attempts: int = 3
    deadlines: Deadlines = field(default_factory=Deadlines)
    max_hours: float | None = None   # the machine stops itself this long after it is asked for
    # A member of a cluster (cluster_provision.py): its row carries the cluster's name, its
    # place in it and the overlay network joining the members (where one does: made before
    # the first member, so written with each row, never after it), and the launch exposes
    # the ports the members talk to each other on.
    cluster: str | None = None
    node_index: int | None = None
    overlay_id: str | None = None
    ports: tuple[int, ...] = ()
    pin: Pin | None = None           # --volume: rented where the volume is, and mounting it

    def validate(self) -> "ProvisionRequest":
        watchdog.check_max_hours(self.max_hours)
        if self.deadlines.running_s <= 0 or self.deadlines.ssh_s <= 0:
            raise UsageError("--boot-timeout and --ssh-timeout must be positive")
        if self.gpus < 1:
            raise UsageError(f"--gpus must be at least 1 (got {self.gpus})")
        if self.disk_gb < 1:
            raise UsageError(f"--disk must be a positive number of GB (got {self.disk_gb})")
        if self.max_price is not None and self.max_price <= 0:
            raise UsageError(f"--max-price must be positive (got {self.max_price})")
        if self.attempts < 1:
            raise UsageError(f"--attempts must be at least 1 (got {self.attempts})")
        if self.name is not None and not NAME_RE.match(self.name):
            raise UsageError(f"--name '{self.name}': use lower-case letters, digits and '-' "
                             f"(at most 41, starting with a letter or digit)")
        return self


def default_name(provider: str) -> str:
    return f"{provider}-{secrets.token_hex(3)}"


# -- choosing ----------------------------------------------------------------

def why_none(offers: list[Offer], req: ProvisionRequest,
             wider: Callable[[], list[Offer]] | None = None) -> str:
    """One line saying which filter left nothing (the same explanation `offers` gives)."""
    return explain_none([req.provider], offers, OfferFilter(
        req.gpus, req.gpu_type, req.region, None, req.max_price, only_available=True,
        interruptible=req.interruptible), wider)


def plan(provider: Provider, req: ProvisionRequest) -> list[Offer]:
    offers = provider.offers(gpus=req.gpus, gpu_type=req.gpu_type, interruptible=req.interruptible)
    chosen = matching_offers(offers, req.gpus, req.gpu_type, req.max_price, req.region)
    if not chosen:
        raise NoOfferError(why_none(offers, req, wider=lambda: provider.offers(
            gpu_type=req.gpu_type, interruptible=req.interruptible)))
    if req.pin is not None:
        chosen = [o for o in chosen if req.pin.allows(o)]
        if not chosen:
            raise NoOfferError(req.pin.why_none)
    kept, left_out = split_offers(chosen)
    if not kept:
        raise NoOfferError(f"every matching {req.provider} offer fails a check on its host: "
                           + left_out_line(*left_out[0])
                           + (f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else ""))
    return kept


def connect_and_plan(req: ProvisionRequest, provider: Provider | None = None
                     ) -> tuple[Provider, list[Offer]]:
    """Check the request, connect to its provider (unless one is given) and list the
    offers to try, cheapest first. Raises NoOfferError when none fits."""
    if provider is None:
        registry.check(req.provider)
    req.validate()
    provider = provider or registry.get(req.provider)
    return provider, plan(provider, req)


# -- launching and waiting ---------------------------------------------------



def _quiet(phase: str, detail: str) -> None:
    pass


@dataclass
class Outcome:
    entry: LedgerEntry
    offer: Offer
    attempts: list[str]                  # one line per failed attempt
    seconds_to_ready: float
    gate: "GateReport | None" = None     # the preflight report of the machine kept


def provision(provider: Provider, req: ProvisionRequest, offers: list[Offer], ledger: Ledger,
              progress: Progress = _quiet, gate: Gate | None = None,
              consent: Consent | None = None) -> Outcome:
    """Launch offers in order until one answers SSH (and passes `gate`, when given);
    returns the ready ledger entry. With `consent`, an offer other than the one the
    user agreed to (another GPU type, a higher price) is asked about first."""
    started = time.monotonic()
    name = req.name or default_name(req.provider)
    keypair = ensure_keypair()
    progress("key", f"registering {keypair.private}.pub with {req.provider}")
    key_ref = provider.ensure_ssh_key(keypair.public_key, "gpubench")
    account = accounts.identified(provider)    # every row records whose machine it is
    failures: list[str] = []
    launches = 0
    for offer in offers[:MAX_CANDIDATES]:
        if launches >= req.attempts:
            break
        if consent is not None:
            consent.check(offer)         # ConsentRefused: nothing more is rented
        spec = LaunchSpec(gpus=req.gpus, disk_gb=req.disk_gb, image=req.image, region=req.region,
                          name=name, interruptible=req.interruptible, ssh_key=key_ref, ports=req.ports,
                          volume=req.pin.volume if req.pin else None)
        entry = ledger.begin(name, req.provider, provider_name(name), account, offer_id=offer.offer_id,
                             instance_type=offer.instance_type, region=offer.region,
                             gpu_name=offer.gpu_name, gpu_count=offer.gpu_count,
                             price_per_hour=offer.price_per_hour, disk_gb=req.disk_gb,
                             image=req.image, key_path=str(keypair.private),
                             deadline_at=watchdog.deadline_after(req.max_hours),
                             cluster=req.cluster, node_index=req.node_index, overlay_id=req.overlay_id,
                             volume=req.pin.name if req.pin else None)
        progress("launch", f"{offer.gpu_count}x {offer.gpu_name} at ${offer.price_per_hour:.2f}/h "
                           f"({offer.instance_type or offer.offer_id}{', ' + offer.region if offer.region else ''})")
        try:
            inst = provider.launch(offer, spec)
        except ProviderError as e:
            if not e.launch_refused:
                # A lost or garbled answer, a 5xx: the launch may have happened. Keep the row;
                # 'ls' resolves it by name.
                ledger.update(entry.row_id, note=f"launch answer unclear: {e.message}",
                              launch_ended_at=time.time())
                raise ProvisionError(f"{e} -- the launch may have happened; run 'gpubench ls' to "
                                     f"check and 'gpubench down {name}' to remove it") from None
            ledger.discard(entry.row_id)          # a definite no: nothing was created
            if not e.offer_unavailable:
                raise
            failures.append(f"{offer.offer_id}: {e.message}")
            progress("skip", f"no capacity: {e.message}")
            continue
        launches += 1
        entry = ledger.mark(entry.row_id, LedgerStatus.LAUNCHED, "created_at", instance_id=inst.instance_id,
                            price_per_hour=inst.price_per_hour or offer.price_per_hour)
        progress("created", f"{req.provider} instance {inst.instance_id}")
        try:
            ready = wait_running(provider, inst.instance_id, req.deadlines.running_s, progress)
            entry = ledger.mark(entry.row_id, LedgerStatus.RUNNING, "running_at", ssh_host=ready.ssh_host,
                                ssh_port=ready.ssh_port, ssh_user=ready.ssh_user,
                                **network_columns(ready))
            progress("running", f"{ready.ssh_user}@{ready.ssh_host}:{ready.ssh_port}")
            wait_ssh(ready, keypair.private, req.deadlines.ssh_s, progress)
        except KeyboardInterrupt:
            progress("stopped", f"{inst.instance_id} is left running and in the ledger; "
                                f"'gpubench down {name}' removes it")
            raise
        except NotReady as e:
            failures.append(f"{inst.instance_id}: {e}")
            progress("replace", f"{e}; terminating {inst.instance_id}")
            entry = ledger.update(entry.row_id, note=str(e))
            if not _discard_instance(provider, ledger, entry, req.deadlines.terminate_s, str(e), progress):
                # Renting more while one may still bill would be worse than stopping here.
                raise ProvisionError(f"{inst.instance_id} never became ready ({e}) and its terminate "
                                     f"is not confirmed: run 'gpubench ls', then 'gpubench down {name}'")
            continue
        except Exception as e:
            # Anything else (an error the poll cannot ride out, a bug): the machine bills
            # until terminated, so terminate it before the error goes up.
            _discard_after(provider, ledger, entry, req.deadlines.terminate_s, e, progress)
            raise
        entry = ledger.mark(entry.row_id, LedgerStatus.READY, "ssh_ready_at")
        sync_ssh_config(ledger)
        report = None
        if gate is not None:
            try:
                report, why = run_gate(gate, entry, offer, progress)
            except BaseException as e:
                # Not the host's fault (a python the user named is missing, Ctrl-C, a bug),
                # but the machine bills until terminated.
                _discard_after(provider, ledger, entry, req.deadlines.terminate_s, e, progress)
                raise
            entry = ledger.update(entry.row_id, note=(why or report.summary())[:500])
            if why:
                failures.append(f"{inst.instance_id}: {why}")
                progress("replace", f"{why}; terminating {inst.instance_id}")
                if not _discard_instance(provider, ledger, entry, req.deadlines.terminate_s, why, progress):
                    raise ProvisionError(f"{inst.instance_id} failed the preflight check and its "
                                         f"terminate is not confirmed: run 'gpubench ls', then "
                                         f"'gpubench down {name}'")
                continue
        if entry.deadline_at is not None:
            entry = _start_watchdog(provider, ledger, entry, progress)
        progress("ready", f"ssh {entry.ssh_alias}")
        return Outcome(entry, offer, failures, time.monotonic() - started, report)
    detail = "; ".join(failures[-3:]) or "no offer tried"
    raise ProvisionError(f"could not provision on {req.provider} ({launches} launched, "
                         f"{len(failures) - launches} refused): {detail}")


def network_columns(inst: Instance) -> dict:
    """The ledger columns for how other machines reach `inst`: its private address and
    its port mapping (JSON), where the provider gives them."""
    ports = json.dumps({str(k): v for k, v in sorted(inst.port_map.items())}) if inst.port_map else None
    return {"private_ip": inst.private_ip, "port_map": ports}


def _start_watchdog(provider: Provider, ledger: Ledger, entry: LedgerEntry,
                    progress: Progress) -> LedgerEntry:
    """Have the machine stop itself at the row's deadline. A watchdog that cannot be
    started costs the machine nothing: the ledger's deadline still holds, acted on by
    the next gpubench command."""
    account = accounts.connected(provider)
    when = time.strftime("%H:%M", time.localtime(entry.deadline_at))
    try:
        how = watchdog.install(entry, entry.deadline_at, account.endpoint if account else "")
    except watchdog.WatchdogError as e:
        progress("watchdog", f"not started ({e}); the ledger's deadline ({when}) still holds: "
                             f"any gpubench command after it terminates {entry.name}")
        return ledger.update(entry.row_id, watchdog=f"not started: {e}"[:160])
    progress("watchdog", f"{entry.name} stops itself ({how}) at {when} unless a gpubench run "
                         f"is active on it then")
    return ledger.update(entry.row_id, watchdog=how)


def _discard_after(provider: Provider, ledger: Ledger, entry: LedgerEntry, deadline_s: float,
                   error: BaseException, progress: Progress) -> None:
    """Terminate the instance before `error` goes up; says so when that is not confirmed."""
    if isinstance(error, KeyboardInterrupt):
        progress("stopped", f"{entry.instance_id} is left running and in the ledger; "
                            f"'gpubench down {entry.name}' removes it")
        return
    progress("stopped", f"{error}; terminating {entry.instance_id}")
    try:
        gone = _discard_instance(provider, ledger, entry, deadline_s, f"{error}"[:200], progress)
    except Exception:
        gone = False      # the row stays live: unconfirmed, with why, once terminate was sent
    if not gone:
        progress("stopped", f"{entry.instance_id} is not confirmed terminated: run "
                            f"'gpubench ls', then 'gpubench down {entry.name}'")


def _discard_instance(provider: Provider, ledger: Ledger, entry: LedgerEntry, deadline_s: float,
                      why: str, progress: Progress) -> bool:
    """Terminate an instance that will not be used; True once the provider confirms it
    gone. What the wait is waiting for goes to `progress`."""
    return terminate_and_confirm(ledger, entry, provider, deadline_s,
                                 lambda line: progress("terminate", line), note=why).gone
