"""`gpubench offers`: one price table across providers."""

from __future__ import annotations

from typing import Annotated

import typer

from gpubench.cli.options import (FormatOpt, MachineGpusFilterOpt, MaxPriceOpt, OffersGpuOpt,
                                  ProvidersArg)
from gpubench.cli.render import check_format, err, out, render_rows

COLUMNS = [("provider", "provider"), ("gpu", "gpu"), ("count", "gpus"),
           ("price_per_hour", "$/h"), ("price_per_gpu_hour", "$/gpu/h"), ("region", "region"),
           ("available", "avail"), ("interruptible", "spot"), ("instance_type", "type")]


def offers(
    providers: ProvidersArg = None,
    gpu: OffersGpuOpt = None,
    gpus: MachineGpusFilterOpt = None,
    max_price: MaxPriceOpt = None,
    interruptible: Annotated[bool, typer.Option("--interruptible", help="Spot/bid offers only.")] = False,
    fmt: FormatOpt = "table",
) -> None:
    """List GPU offers from every provider, cheapest first."""
    from gpubench.offers import OfferQuery, gather, offer_row

    check_format(fmt, ("table", "csv", "json", "markdown"))
    query = OfferQuery(list(providers or []), gpus, gpu, max_price, interruptible).validate()
    found, warnings = gather(query)
    for line in warnings:
        err(line)
    rows = [offer_row(o) for o in found]
    if rows or fmt != "table":
        out(render_rows(rows, COLUMNS, fmt))
    elif not warnings:
        err("no offers match")
    if warnings and not rows:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("offers")(offers)
