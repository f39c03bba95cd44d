"""`gpubench offers`: one price table across providers, sorted, filtered and cut to a
screenful."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.options import (ColumnsOpt, FormatOpt, MachineGpusFilterOpt, MaxPriceOpt, OffersGpuOpt,
                                  ProvidersArg, RegionOpt, WideOpt, table_fit)
from gpubench.cli.render import check_format, err, out, render_rows
from gpubench.cli.settings import flags_or_defaults

DEFAULT_LIMIT = 20      # rows in a table or markdown; json and csv give all unless --limit
COLUMNS = [("provider", "provider"), ("gpu", "gpu"), ("count", "gpus"), ("vram_gb", "GB/gpu"),
           ("price_per_hour", "$/h"), ("price_per_gpu_hour", "$/gpu/h"), ("region", "region"),
           ("available", "avail"), ("instance_type", "type")]
SPOT_COLUMN = ("interruptible", "spot")             # shown where spot and on-demand mix
RELIABILITY_COLUMN = ("reliability", "reliab")      # shown when sorted by it


def _sort_help() -> str:
    from gpubench.offers import SORTS

    return "Order: " + "; ".join(f"{name}: {words}" for name, (words, _) in SORTS.items()) + "."


SortOpt = Annotated[str, typer.Option("--sort", help=_sort_help())]
LimitOpt = Annotated[Optional[int], typer.Option(
    "--limit", min=0, help=f"Rows to show; 0 for all [default: {DEFAULT_LIMIT} in a table or "
                           f"markdown, all in json and csv].")]
MinVramOpt = Annotated[Optional[float], typer.Option(
    "--min-vram", help="Least GPU memory per GPU, in GB (offers whose memory is unknown are left out).")]
KindOpt = Annotated[str, typer.Option(
    "--kind", help="on-demand machines, spot (interruptible: Vast.ai bids, priced at the "
                   "lowest bid the host takes; Lambda and RunPod have none), or all.")]
SpotOpt = Annotated[bool, typer.Option("--spot", "--interruptible", help="Same as --kind spot.")]


def offers(
    providers: ProvidersArg = None,
    gpu: OffersGpuOpt = None,
    gpus: MachineGpusFilterOpt = None,
    max_price: MaxPriceOpt = None,
    region: RegionOpt = None,
    min_vram: MinVramOpt = None,
    kind: KindOpt = "on-demand",
    spot: SpotOpt = False,
    sort: SortOpt = "price",
    limit: LimitOpt = None,
    fmt: FormatOpt = "table",
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
) -> None:
    """List GPU offers from every provider, cheapest first; offers whose host fails a
    check on what the provider publishes (reliability, CUDA, PCIe, network, ports, RAM,
    cores) are left out, each with why on stderr. --gpu, --max-price and --region
    default to [defaults] gpu_type, max_price and region in config.toml."""
    from gpubench.errors import UsageError
    from gpubench.offer_checks import left_out_line, split_offers
    from gpubench.offers import (OfferQuery, explain_empty, gather, limit_offers, offer_display_row,
                                 offer_row)

    check_format(fmt, ("table", "csv", "json", "markdown"))
    fit = table_fit(wide, columns)
    gpu, max_price, region = _or_defaults(gpu, max_price, region)
    if spot and kind not in ("on-demand", "spot"):
        raise UsageError(f"--spot and --kind {kind} disagree: give one")
    query = OfferQuery(list(providers or []), gpus, gpu, max_price, "spot" if spot else kind,
                       region, min_vram, sort).validate()
    got = gather(query)
    found, left_out = split_offers(got.chosen)
    for line in got.warnings:
        err(line)
    for offer, problems in left_out:
        err(left_out_line(offer, problems))
    people = fmt in ("table", "markdown")
    shown, cut = limit_offers(found, DEFAULT_LIMIT if limit is None and people else limit)
    rows = [(offer_display_row if people else offer_row)(o) for o in shown]
    if rows or not people:
        out(render_rows(rows, _chosen(query, shown, people, fit), fmt, fit=fit))
    if cut:
        err(cut)
    if any(o.interruptible for o in shown):
        err("spot: the price is the lowest bid the host takes; a higher bid from someone else "
            "stops the machine")
    if not found and not got.chosen and got.asked:
        err(explain_empty(query, got))
    if got.warnings and not rows:
        raise typer.Exit(1)


def _or_defaults(gpu, max_price, region) -> tuple:
    """The flags given, else [defaults]: offers spells gpu_type --gpu."""
    gpu_type, max_price, region = flags_or_defaults(gpu_type=gpu, max_price=max_price, region=region)
    return gpu_type, max_price, region


def _chosen(query, shown, people: bool, fit) -> list[tuple[str, str]]:
    """The columns to render: the table's (every field, for programs), or those
    --columns names, in its order (by key or by the table's heading, any format)."""
    from gpubench.table_fit import picked_columns

    if not fit.columns:
        return _columns(query, shown) if people else _all_columns()
    if people:
        return picked_columns([*COLUMNS, SPOT_COLUMN, RELIABILITY_COLUMN], fit)
    headings = dict([*COLUMNS, SPOT_COLUMN, RELIABILITY_COLUMN])
    return picked_columns([(key, headings.get(key, key)) for key, _ in _all_columns()], fit)


def _columns(query, shown) -> list[tuple[str, str]]:
    columns = list(COLUMNS)
    if len({o.interruptible for o in shown}) > 1:
        columns.insert(columns.index(("available", "avail")), SPOT_COLUMN)
    if query.sort == "reliability":
        columns.insert(columns.index(("available", "avail")), RELIABILITY_COLUMN)
    return columns


def _all_columns() -> list[tuple[str, str]]:
    from gpubench.offers import offer_row
    from gpubench.providers.common import Offer

    return [(key, key) for key in offer_row(Offer("", "", "", 1, 0.0))]


def register(app: typer.Typer) -> None:
    app.command("offers")(offers)
