"""`gpubench ls`: the ledger, checked against each provider's own list."""

from __future__ import annotations

from typing import Annotated

import typer

from gpubench.cli.options import ColumnsOpt, FormatOpt, WideOpt, table_fit
from gpubench.cli.render import check_format, err, format_dollars, out, render_rows
from gpubench.table_fit import check_column_names

COLUMNS = [("name", "name"), ("provider", "provider"), ("instance_id", "id"), ("status", "status"),
           ("provider_status", "provider says"), ("gpus", "gpus"), ("price_per_hour", "$/h"), ("uptime", "uptime"), ("cost", "cost $"),
           ("ssh", "ssh"), ("stops", "stops"), ("outputs", "outputs"), ("note", "note")]
# What programs get besides: the deadline as a time stamp, how the machine stops then,
# and the cluster it is a member of with its place there (0 = the head).
MACHINE_COLUMNS = [("deadline_at", "deadline_at"), ("watchdog", "watchdog"), ("cluster", "cluster"),
                   ("node_index", "node_index")]
# Kept longest when the terminal is narrow: what it is, its state, and what it costs.
KEEP = ("member", "name", "status", "gpus", "price_per_hour", "cost", "provider", "uptime")
# Shown to people when some machine is a cluster's member: 'train:0 (head)', 'train:1'.
MEMBER_COLUMN = ("member", "cluster")


def ls(
    fmt: FormatOpt = "table",
    show_all: Annotated[bool, typer.Option("--all", help="Include terminated instances.")] = False,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
) -> None:
    """List gpubench's instances; instances a provider has that the ledger lacks are marked."""
    from gpubench.lifecycle import fleet, keep_outputs
    from gpubench.store.ledger import Ledger

    check_format(fmt, ("table", "csv", "json", "markdown"))
    fit = table_fit(wide, columns)
    check_column_names(fit.columns, _offered(fmt))     # before any provider is asked
    with Ledger() as ledger:
        providers = fleet.providers_for_ledger(ledger, err)
        fleet.settle_deadlines(ledger, providers, err)
        rows = fleet.grouped(fleet.reconcile(ledger, providers, include_done=show_all, warn=err))
    if not rows and fmt == "table":
        out("no instances")
        return
    unpulled = keep_outputs.pending_counts([r.entry for r in rows if r.entry is not None])
    out(render_rows([_in_one_vocabulary(r, unpulled.get(r.name)) for r in rows], _chosen(rows, fmt, fit),
                    fmt, keep=KEEP, fit=fit))
    if fmt == "table":
        priced = [r for r in rows if r.cost is not None]
        out(f"spent so far: {format_dollars(fleet.total_cost(rows))} in all "
            f"({len(priced)} machine{'s' if len(priced) != 1 else ''} with a price on record)")


def _offered(fmt: str) -> list[tuple[str, str]]:
    """Every column this format can show: --columns picks from these."""
    return [MEMBER_COLUMN, *COLUMNS] if fmt in ("table", "markdown") else COLUMNS + MACHINE_COLUMNS


def _chosen(rows, fmt: str, fit) -> list[tuple[str, str]]:
    """The columns to render: those --columns names, in its order; else the table's
    (the cluster column where some machine is a member), or every one for programs."""
    from gpubench.table_fit import picked_columns

    if fit.columns or fmt not in ("table", "markdown"):
        return picked_columns(_offered(fmt), fit)
    return [MEMBER_COLUMN, *COLUMNS] if any(r.cluster for r in rows) else COLUMNS


def _in_one_vocabulary(row, unpulled: int | None = None) -> dict:
    """The ledger's status words for every provider, the provider's own beside them; the
    counts whose files are still only on the machine (gpubench pull NAME)."""
    from gpubench.store.status import listing_words

    status, said = listing_words(row.entry, row.instance)
    return {**row.as_row(), "status": status.value, "provider_status": said,
            "outputs": f"{unpulled} unpulled" if unpulled else None}


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
