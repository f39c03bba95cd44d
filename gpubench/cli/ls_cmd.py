"""`gpubench ls`: the ledger, checked against each provider's own list."""

from __future__ import annotations

import typer

from gpubench.cli.render import check_format, err, out, render_rows

COLUMNS = [("name", "name"), ("provider", "provider"), ("instance_id", "id"), ("status", "status"),
           ("gpus", "gpus"), ("price_per_hour", "$/h"), ("uptime", "uptime"), ("cost", "cost $"),
           ("ssh", "ssh"), ("note", "note")]


def ls(
    fmt: str = typer.Option("table", "--format", help="table, csv or json."),
    show_all: bool = typer.Option(False, "--all", help="Include terminated instances."),
) -> None:
    """List gpubench's instances; instances a provider has that the ledger lacks are marked."""
    from gpubench.lifecycle import fleet
    from gpubench.lifecycle.ledger import Ledger
    from gpubench.providers import registry

    check_format(fmt, ("table", "csv", "json", "markdown"))
    with Ledger() as ledger:
        wanted = {e.provider for e in ledger.entries()}
        # Providers with ledger rows must be asked (a missing key is worth a warning);
        # the others only if a key is there, to find orphans.
        providers = fleet.connect_all(sorted(wanted), err)
        providers.update(fleet.connect_all([n for n in registry.names() if n not in wanted],
                                           quiet_missing_key=True))
        rows = fleet.reconcile(ledger, providers, include_done=show_all, warn=err)
    if not rows and fmt == "table":
        out("no instances")
        return
    out(render_rows([r.as_row() for r in rows], COLUMNS, fmt))


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
