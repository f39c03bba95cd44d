"""`gpubench down`: terminate, confirm at the provider, say what it cost."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from gpubench.cli.render import err, format_dollars, out


def down(
    name: Optional[str] = typer.Argument(None, help="Instance name (see 'gpubench ls')."),
    all_: bool = typer.Option(False, "--all", help="Every instance in the ledger."),
    orphans: bool = typer.Option(False, "--orphans", help="gpubench-* instances the ledger lacks."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask first."),
    timeout: float = typer.Option(180.0, "--timeout", help="Seconds to wait for each to be gone."),
) -> None:
    """Terminate NAME (or --all, or --orphans) and confirm the provider no longer has it."""
    from gpubench.lifecycle import fleet
    from gpubench.errors import GpubenchError, UsageError
    from gpubench.lifecycle.ledger import Ledger
    from gpubench.providers import registry
    from gpubench.lifecycle.provision import sync_ssh_config

    if sum(bool(x) for x in (name, all_, orphans)) != 1:
        raise UsageError("give exactly one of NAME, --all or --orphans")
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    with Ledger() as ledger:
        if orphans:
            providers = fleet.connect_all(registry.names(), quiet_missing_key=True)
            rows = [r for r in fleet.reconcile(ledger, providers, warn=err) if r.entry is None]
            targets = [(r.name, r.provider, r.instance_id, r) for r in rows]
        else:
            entries = [ledger.find(name)] if name else ledger.entries()
            if name and not entries[0].active:
                out(f"{name} is already {entries[0].status}")
                return
            providers = fleet.connect_all(sorted({e.provider for e in entries}), err)
            targets = [(e.name, e.provider, e.instance_id, e) for e in entries]
        if not targets:
            out("nothing to take down")
            return
        names = ", ".join(f"{n} ({p} {i or 'id unknown'})" for n, p, i, _ in targets)
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError(f"would terminate {names}: pass --yes to confirm")
            if not typer.confirm(f"Terminate {names}?", default=False):
                raise typer.Exit(1)
        results = []
        for n, p, _, target in targets:
            prov = providers.get(p)
            if prov is None:
                err(f"error: {n}: cannot reach {p} (no API key)")
                continue
            if isinstance(target, fleet.FleetRow):
                result = fleet.down_orphan(target.instance, prov, timeout, err)
            else:
                result = fleet.down_entry(ledger, target, prov, timeout, err)
            results.append(result)
            cost = f", cost {format_dollars(result.cost)} in total" if result.cost is not None else ""
            if result.gone:
                out(f"{result.name}: {result.message} ({p} {result.instance_id or '-'}){cost}")
            else:
                err(f"error: {result.name}: NOT confirmed gone: {result.message}{cost}")
        sync_ssh_config(ledger)
    total = sum(r.cost or 0.0 for r in results)
    if len(results) > 1:
        out(f"total cost {format_dollars(total)}")
    if len(results) < len(targets) or not all(r.gone for r in results):
        raise GpubenchError("some instances may still be running: see 'gpubench ls'")


def register(app: typer.Typer) -> None:
    app.command("down")(down)
