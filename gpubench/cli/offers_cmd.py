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
    """List GPU offers from every provider, cheapest first; offers whose host fails a
    check on what the provider publishes (reliability, CUDA, PCIe, network, ports, RAM,
    cores) are left out, each with why on stderr."""
    from gpubench.offer_checks import left_out_line, split_offers
    from gpubench.offers import OfferQuery, gather, offer_row

    check_format(fmt, ("table", "csv", "json", "markdown"))
    query = OfferQuery(list(providers or []), gpus, gpu, max_price, interruptible).validate()
    found, warnings = gather(query)
    found, left_out = split_offers(found)
    for line in warnings:
        err(line)
    for offer, problems in left_out:
        err(left_out_line(offer, problems))
    rows = [offer_row(o) for o in found]
    if rows or fmt != "table":
        out(render_rows(rows, COLUMNS, fmt))
    elif not warnings and not left_out:
        err("no offers match")
    if warnings and not rows:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("offers")(offers)
