"""`gpubench offers`: one price table across providers, sorted, filtered and cut to a
screenful."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.options import (FormatOpt, MachineGpusFilterOpt, MaxPriceOpt, OffersGpuOpt,
                                  ProvidersArg, RegionOpt)
from gpubench.cli.render import check_format, err, out, render_rows

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
) -> None:
    """List GPU offers from every provider, cheapest first; offers whose host fails a
    check on what the provider publishes (reliability, CUDA, PCIe, network, ports, RAM,
    cores) are left out, each with why on stderr."""
    from gpubench.errors import UsageError
    from gpubench.offer_checks import left_out_line, split_offers
    from gpubench.offers import (OfferQuery, explain_empty, gather, limit_offers, offer_display_row,
                                 offer_row)

    check_format(fmt, ("table", "csv", "json", "markdown"))
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
        out(render_rows(rows, _columns(query, shown) if people else _all_columns(), fmt))
    if cut:
        err(cut)
    if any(o.interruptible for o in shown):
        err("spot: the price is the lowest bid the host takes; a higher bid from someone else "
            "stops the machine")
    if not found and not got.chosen and got.asked:
        err(explain_empty(query, got))
    if got.warnings and not rows:
        raise typer.Exit(1)


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
