"""`gpubench provision`: rent the cheapest matching machine and wait until SSH works."""

from __future__ import annotations

import time
from typing import Optional

import typer

from gpubench.cli.confirm import confirm_or_stop
from gpubench.cli.render import err, out


def provision(
    provider: str = typer.Argument(..., help="lambda, vast or runpod."),
    gpus: int = typer.Option(..., "--gpus", help="GPUs on the machine."),
    gpu_type: Optional[str] = typer.Option(None, "--gpu-type", help="e.g. H100, A100, 'RTX 4090'."),
    disk: int = typer.Option(100, "--disk", help="Disk in GB (fixed at creation on Vast.ai)."),
    image: Optional[str] = typer.Option(None, "--image", help="Container image (Vast.ai, RunPod)."),
    region: Optional[str] = typer.Option(None, "--region", help="Region or data center."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name [default: PROVIDER-xxxxxx]."),
    max_price: Optional[float] = typer.Option(None, "--max-price", help="Highest $/h for the machine."),
    interruptible: bool = typer.Option(False, "--interruptible", help="Spot/bid machine (Vast.ai)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be rented; rent nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before spending money."),
    attempts: int = typer.Option(3, "--attempts", help="Launches to try before giving up."),
    boot_timeout: float = typer.Option(900.0, "--boot-timeout", help="Seconds to reach running."),
    ssh_timeout: float = typer.Option(300.0, "--ssh-timeout", help="Seconds for SSH to answer."),
) -> None:
    """Rent a machine with GPUS GPUs, wait until SSH answers, and print how to reach it."""
    from gpubench.lifecycle.ledger import Ledger
    from gpubench.lifecycle.provision import (DEFAULT_IMAGE, Deadlines, ProvisionRequest,
                                              connect_and_plan, provision as run)
    from gpubench.lifecycle.sshconfig import include_hint

    req = ProvisionRequest(provider, gpus, gpu_type, disk, image or DEFAULT_IMAGE, region, name,
                           max_price, interruptible, attempts,
                           Deadlines(running_s=boot_timeout, ssh_s=ssh_timeout))
    prov, offers = connect_and_plan(req)
    best = offers[0]
    where = f" in {best.region}" if best.region else ""
    out(f"cheapest match: {best.gpu_count}x {best.gpu_name} on {provider}{where} "
        f"({best.instance_type or best.offer_id}) at ${best.price_per_hour:.2f}/h, disk {disk} GB")
    if dry_run:
        for alt in offers[1:attempts]:
            out(f"  then: {alt.gpu_count}x {alt.gpu_name} ({alt.instance_type or alt.offer_id}) "
                f"at ${alt.price_per_hour:.2f}/h")
        out("dry run: nothing rented")
        return
    confirm_or_stop(f"Rent it for ${best.price_per_hour:.2f}/h?",
                    "not rented: pass --yes to rent without a terminal to confirm on",
                    said_on_no="nothing rented", yes=yes)
    with Ledger() as ledger, _Progress() as progress:
        outcome = run(prov, req, offers, ledger, progress)
    e = outcome.entry
    out(f"ready in {outcome.seconds_to_ready:.1f} s: {e.name} ({provider} {e.instance_id}), "
        f"{e.gpu_count}x {e.gpu_name} at ${e.price_per_hour:.2f}/h")
    out(f"  ssh:  gpubench ssh {e.name}    or    ssh {e.ssh_alias}  (add '{include_hint()}' "
        f"to ~/.ssh/config)")
    out(f"  stop paying: gpubench down {e.name}")


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

    def __call__(self, phase: str, detail: str) -> None:
        line = f"[{time.monotonic() - self.start:6.1f}s] {phase:<8} {detail}"
        if self.status is None:
            err(line)
        else:
            self.console.print(line, markup=False)
            self.status.update(f"{phase}: {detail}")


def register(app: typer.Typer) -> None:
    app.command("provision")(provision)
