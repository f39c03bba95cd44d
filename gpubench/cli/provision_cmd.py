"""`gpubench provision`: rent the cheapest matching machine and wait until SSH works."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from gpubench.cli.confirm import ask, confirm_or_stop, rent_question
from gpubench.cli.options import (AnyGpuOpt, AttemptsOpt, BootTimeoutOpt, DiskOpt, DocumentFormatOpt,
                                  GpuTypeOpt, ImageOpt, MachineGpusOpt, MaxHoursOpt, MaxPriceOpt, NameOpt,
                                  PreflightOpt, ProviderArg, PublicNetworkOpt, RegionOpt, SshTimeoutOpt, VolumeOpt,
                                  YesOpt)
from gpubench.cli.output import Output, entry_document, offer_document, output_for
from gpubench.cli.render import err, format_dollars
from gpubench.cli.settings import flags_or_defaults

NODES_HELP = ("Rent a cluster of NODES machines of one offer type in one region, all or "
              "nothing (--attempts then counts launches per member).")

# The options only provision takes, one alias each (the shared ones are in options.py).
InterruptibleOpt = Annotated[bool, typer.Option("--interruptible", help="Spot/bid machine (Vast.ai).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would be rented; rent nothing.")]
NodesOpt = Annotated[Optional[int], typer.Option("--nodes", help=NODES_HELP)]


def provision(
    ctx: typer.Context,
    provider: ProviderArg,
    gpus: MachineGpusOpt,
    gpu_type: GpuTypeOpt = None,
    disk: DiskOpt = 100,
    image: ImageOpt = None,
    region: RegionOpt = None,
    name: NameOpt = None,
    max_price: MaxPriceOpt = None,
    interruptible: InterruptibleOpt = False,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    attempts: AttemptsOpt = 3,
    boot_timeout: BootTimeoutOpt = 900.0,
    ssh_timeout: SshTimeoutOpt = 300.0,
    max_hours: MaxHoursOpt = None,
    preflight: PreflightOpt = False,
    nodes: NodesOpt = None,
    public_network: PublicNetworkOpt = False,
    any_gpu: AnyGpuOpt = False,
    volume: VolumeOpt = None,
    fmt: DocumentFormatOpt = "table",
) -> None:
    """Rent a machine with GPUS GPUs (or a cluster of --nodes machines), wait until SSH
    answers, and print how to reach it."""
    from gpubench.lifecycle import fleet
    from gpubench.lifecycle.consent import Agreed, Consent
    from gpubench.store.ledger import Ledger
    from gpubench.lifecycle.provision import (DEFAULT_IMAGE, Deadlines, ProvisionRequest,
                                              connect_and_plan, provision as run)

    output = output_for(fmt)
    out = output.say
    gpu_type, max_price, region, image, disk = flags_or_defaults(
        ctx, gpu_type=gpu_type, max_price=max_price, region=region, image=image, disk=disk)
    req = ProvisionRequest(provider, gpus, gpu_type, disk, image or DEFAULT_IMAGE, region, name,
                           max_price, interruptible, attempts,
                           Deadlines(running_s=boot_timeout, ssh_s=ssh_timeout), max_hours)
    if volume is not None:   # only offers where it is; a volume of another provider is refused here
        from gpubench.lifecycle.volumes import pin_for

        req.pin = pin_for(volume, provider, gpu_type, gpus, nodes=nodes or 1)
    if nodes is not None:
        _provision_cluster(req, nodes, dry_run, yes, preflight, output, public_network)
        return
    prov, offers = connect_and_plan(req)
    if not dry_run:
        with Ledger() as ledger:
            fleet.settle_deadlines(ledger, say=err)
    best = offers[0]
    where = f" in {best.region}" if best.region else ""
    out(f"cheapest match: {best.gpu_count}x {best.gpu_name} on {provider}{where} "
        f"({best.instance_type or best.offer_id}) at {format_dollars(best.price_per_hour)}/h, "
        f"disk {disk} GB")
    if dry_run:
        _say_dry_run(output, offers, attempts)
        return
    stops = (f", stopping itself after {max_hours:g} h unless a gpubench run is active on it"
             if max_hours else "")
    with output.prompts():
        confirm_or_stop(rent_question(best, provider, stops),
                        "not rented: pass --yes to rent without a terminal to confirm on",
                        said_on_no="nothing rented", yes=yes)
    # A --gpu-type the user named covers every type it matches; --max-price every price up to it.
    agreed = Agreed.offer(best, any_gpu=any_gpu or bool(gpu_type), max_price=max_price)
    with Ledger() as ledger, _Progress() as progress:
        consent = Consent(agreed, ask=None if yes else progress.ask)
        outcome = run(prov, req, offers, ledger, progress, gate=_gate(ledger) if preflight else None,
                      consent=consent)
    _say_ready(output, outcome, provider)


def _say_dry_run(output: Output, offers: list, attempts: int) -> None:
    """The offers after the cheapest that --attempts would try, and nothing rented."""
    for alt in offers[1:attempts]:
        output.say(f"  then: {alt.gpu_count}x {alt.gpu_name} ({alt.instance_type or alt.offer_id}) "
                   f"at {format_dollars(alt.price_per_hour)}/h")
    output.say("dry run: nothing rented")
    output.emit({"dry_run": True, "offers": [offer_document(o) for o in offers[:attempts]]})


def _say_ready(output: Output, outcome, provider: str) -> None:
    """The machine rented and how to reach it, stop it and what its preflight found."""
    from gpubench.lifecycle.sshconfig import include_hint

    out = output.say
    e = outcome.entry
    out(f"ready in {outcome.seconds_to_ready:.1f} s: {e.name} ({provider} {e.instance_id}), "
        f"{e.gpu_count}x {e.gpu_name} at {format_dollars(e.price_per_hour)}/h")
    out(f"  ssh:  gpubench ssh {e.name}    or    ssh {e.ssh_alias}  (add '{include_hint()}' "
        f"to ~/.ssh/config)")
    if e.deadline_at is not None:
        out(f"  stops:  at {time.strftime('%H:%M', time.localtime(e.deadline_at))} "
            f"({e.watchdog or 'ledger only'})")
    out(f"  stop paying: gpubench down {e.name}")
    if outcome.gate is not None:
        out(f"  {outcome.gate.summary()}")
    output.emit({"instance": entry_document(e), "seconds_to_ready": round(outcome.seconds_to_ready, 3),
                 "offer": offer_document(outcome.offer), "failed_attempts": outcome.attempts,
                 "preflight": outcome.gate.summary() if outcome.gate is not None else None})


def _provision_cluster(req, nodes: int, dry_run: bool, yes: bool, preflight: bool,
                       output: Output, public_network: bool = False) -> None:
    from gpubench.lifecycle import fleet
    from gpubench.lifecycle.cluster_placement import ClusterRequest, connect_and_place, member_name
    from gpubench.lifecycle.cluster_provision import check_name_free, network_line, provision_cluster
    from gpubench.store.ledger import Ledger

    out = output.say
    creq = ClusterRequest(req, nodes, private_network=True, public_network=public_network).validate()
    with Ledger() as ledger:
        check_name_free(ledger, req.name, nodes)     # before any offer is looked at
    with output.prompts():
        prov, place = connect_and_place(creq, agree_public=public_agreement(yes, public_network))
    name = req.name
    total = place.price_per_hour * nodes
    out(f"cheapest placement: {nodes} x {place.describe()} on {req.provider} "
        f"({place.offers[0].instance_type or place.offers[0].offer_id}) at "
        f"{format_dollars(place.price_per_hour)}/h each, {format_dollars(total)}/h in all, disk {req.disk_gb} GB")
    if dry_run:
        out(f"dry run: nothing rented (cluster {name}: {', '.join(member_name(name, i) for i in range(nodes))})")
        output.emit({"dry_run": True, "cluster": name, "nodes": nodes,
                     "offers": [offer_document(o) for o in place.offers]})
        return
    with Ledger() as ledger:
        fleet.settle_deadlines(ledger, say=err)
    stops = (f", each stopping itself after {req.max_hours:g} h unless a gpubench run is active on it"
             if req.max_hours else "")
    with output.prompts():
        confirm_or_stop(f"Rent {nodes} machines for {format_dollars(total)}/h in all{stops}?",
                        "not rented: pass --yes to rent without a terminal to confirm on",
                        said_on_no="nothing rented", yes=yes)
    with Ledger() as ledger, _Progress() as progress:
        outcome = provision_cluster(prov, creq, place, ledger, progress,
                                    _gate(ledger) if preflight else None)
    hosts = outcome.hosts
    out(f"cluster {name} ready in {outcome.seconds_to_ready:.1f} s: {nodes} x {place.describe()} on "
        f"{req.provider} at {format_dollars(outcome.price_per_hour)}/h in all")
    for node, entry in zip(hosts.nodes, outcome.members):
        private = f", private {entry.private_ip}" if entry.private_ip else ""
        head = " (head)" if node.index == 0 else ""
        out(f"  node {node.index}{head}: {entry.name} ({req.provider} {entry.instance_id}) "
            f"{entry.ssh_user}@{entry.ssh_host}:{entry.ssh_port}{private}")
    out(f"  {network_line(req.provider, hosts, outcome.overlay)}")
    for link in outcome.links:
        out(f"  {link.line()}")
    if outcome.replaced:
        out(f"  replaced or refused on the way: {'; '.join(outcome.replaced[-3:])}")
    other = f"    gpubench ssh {name}:1  (node 1)" if nodes > 1 else ""
    out(f"  ssh:  gpubench ssh {name}  (the head){other}")
    out(f"  stop paying: gpubench down {name}")
    output.emit({"cluster": name, "network": hosts.network,
                 "overlay": vars(outcome.overlay) if outcome.overlay is not None else None,
                 "seconds_to_ready": round(outcome.seconds_to_ready, 3),
                 "members": [entry_document(m) for m in outcome.members],
                 "links": [link.as_json() for link in outcome.links]})


def public_agreement(yes: bool, public_network: bool):
    """How a cluster with no physical cluster to hold it may still go over the public
    internet: --public-network agrees (said in one line), else asked on a terminal;
    never under --yes alone."""
    def agree(line: str) -> bool:
        if public_network:
            err(f"{line}; --public-network: joining separate machines over the public internet")
            return True
        if yes:
            return False
        # the line goes in the question: without a terminal the refusal says it, once
        confirm_or_stop(f"{line}.\nJoin separate machines over the public internet instead?",
                        f"{line}; pass --public-network to join separate machines over the public internet",
                        said_on_no="nothing rented")
        return True
    return agree


def _gate(ledger):
    from gpubench.lifecycle.preflight import recorded_gate

    return recorded_gate(ledger)


class _Progress:
    """One line per phase on stderr with the seconds since provisioning began, and in
    a terminal a spinner naming the phase being waited on."""

    def __init__(self) -> None:
        from rich.console import Console

        self.start = time.monotonic()
        self.console = Console(stderr=True, highlight=False)
        self.status = self.console.status("starting") if self.console.is_terminal else None

    def __enter__(self) -> "_Progress":
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.status is not None:
            self.status.stop()

    def ask(self, question: str) -> bool:
        """Ask with the spinner stopped, so the question is not drawn over."""
        if self.status is not None:
            self.status.stop()
        try:
            return ask(question)
        finally:
            if self.status is not None:
                self.status.start()

    def __call__(self, phase: str, detail: str) -> None:
        line = f"[{time.monotonic() - self.start:6.1f}s] {phase:<8} {detail}"
        if self.status is None:
            err(line)
        else:
            self.console.print(line, markup=False)
            self.status.update(f"{phase}: {detail}")


def register(app: typer.Typer) -> None:
    app.command("provision")(provision)
