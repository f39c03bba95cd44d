"""`gpubench offers`: one price table across providers, sorted, filtered and cut to a
screenful."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.options import (ROWS_SHOWN, ColumnsOpt, FormatOpt, MachineGpusFilterOpt, MaxPriceOpt,
                                  OffersGpuOpt, ProvidersArg, RegionOpt, RowsOpt, VolumeOpt, WideOpt,
                                  table_fit)
from gpubench.cli.render import check_format, err, out, render_rows
from gpubench.cli.settings import flags_or_defaults
from gpubench.errors import UsageError

DEFAULT_LIMIT = ROWS_SHOWN   # rows in a table or markdown; json and csv give all unless --limit
COLUMNS = [("provider", "provider"), ("gpu", "gpu"), ("count", "gpus"), ("vram_gb", "GB/gpu"),
           ("price_per_hour", "$/h"), ("price_per_gpu_hour", "$/gpu/h"), ("region", "region"),
           ("available", "avail"), ("instance_type", "type")]
SPOT_COLUMN = ("interruptible", "spot")             # shown where spot and on-demand mix
RELIABILITY_COLUMN = ("reliability", "reliab")      # shown when sorted by it


# With --workload: the offers in the order of the predicted cost or time of an epoch.
PREDICTED_SORTS = {"cost-per-epoch": ("cheapest epoch first (needs --workload)", "cost"),
                   "time-per-epoch": ("fastest epoch first (needs --workload)", "time")}
PREDICTED_COLUMNS = [("predicted", "predicted"), ("epoch_time", "time/epoch"),
                     ("epoch_cost", "$/epoch"), ("basis", "basis")]
# With --workload the offers are read for what an epoch takes on each: in a narrow
# terminal the machine, its price and the predicted columns stay, the host's details go.
PREDICTED_KEEP = ["provider", "gpu", "count", "price_per_hour", "epoch_time", "epoch_cost", "basis",
                  "predicted", "vram_gb", "region"]


def _sort_help() -> str:
    from gpubench.offers import SORTS

    orders = {**{name: words for name, (words, _) in SORTS.items()},
              **{name: words for name, (words, _) in PREDICTED_SORTS.items()}}
    return "Order: " + "; ".join(f"{name}: {words}" for name, words in orders.items()) + "."


SortOpt = Annotated[str, typer.Option("--sort", help=_sort_help())]
MinVramOpt = Annotated[Optional[float], typer.Option(
    "--min-vram", help="Least GPU memory per GPU, in GB (offers whose memory is unknown are left out).")]
KindOpt = Annotated[str, typer.Option(
    "--kind", help="on-demand machines, spot (interruptible: Vast.ai bids, priced at the "
                   "lowest bid the host takes; Lambda and RunPod have none), or all.")]
SpotOpt = Annotated[bool, typer.Option("--spot", "--interruptible", help="Same as --kind spot.")]
WorkloadOpt = Annotated[Optional[str], typer.Option(
    "--workload", help="A suite workload: add its predicted throughput, time and cost of an epoch "
                       "on each offer (see 'gpubench advise').")]


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
    limit: RowsOpt = None,
    fmt: FormatOpt = "table",
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    workload: WorkloadOpt = None,
    volume: VolumeOpt = None,
) -> None:
    """List GPU offers from every provider, cheapest first; offers whose host fails a
    check on what the provider publishes (reliability, CUDA, PCIe, network, ports, RAM,
    cores) are left out, each with why on stderr. --gpu, --max-price and --region
    default to [defaults] gpu_type, max_price and region in config.toml."""
    from gpubench.offer_checks import left_out_line, split_offers
    from gpubench.offers import (OfferQuery, explain_empty, gather, limit_offers, offer_display_row,
                                 offer_row)

    check_format(fmt, ("table", "csv", "json", "markdown"))
    fit = table_fit(wide, columns)
    gpu, max_price, region = _or_defaults(gpu, max_price, region)
    if spot and kind not in ("on-demand", "spot"):
        raise UsageError(f"--spot and --kind {kind} disagree: give one")
    by_prediction = PREDICTED_SORTS.get(sort, (None, None))[1]
    if by_prediction and not workload:
        raise UsageError(f"--sort {sort} needs --workload W: a prediction for that workload")
    ref = _suite_workload(workload) if workload else None   # before the providers are asked
    pin = _pin(volume, providers, gpu, gpus) if volume else None
    query = OfferQuery([pin[0]] if pin else list(providers or []), gpus, gpu, max_price,
                       "spot" if spot else kind, region, min_vram, "price" if by_prediction else sort).validate()
    got = gather(query)
    found, left_out = split_offers(got.chosen)
    if pin is not None:
        found = [o for o in found if pin[1].allows(o)]
        if not found:
            err(pin[1].why_none)
    predicted = _predicted(ref, found, by_prediction) if ref else None
    if predicted is not None:
        found = list(predicted)
    for line in got.warnings:
        err(line)
    for offer, problems in left_out:
        err(left_out_line(offer, problems))
    people = fmt in ("table", "markdown")
    shown, cut = limit_offers(found, DEFAULT_LIMIT if limit is None and people else limit)
    rows = [(offer_display_row if people else offer_row)(o) for o in shown]
    if predicted is not None:
        for row, o in zip(rows, shown):
            row.update(_predicted_cells(predicted[o], people))
    chosen = _chosen(query, shown, people, fit)
    if predicted is not None and not fit.columns:
        chosen = chosen + (PREDICTED_COLUMNS if people else [(k, k) for k, _ in PREDICTED_COLUMNS])
    if rows or not people:
        out(render_rows(rows, chosen, fmt, fit=fit, keep=PREDICTED_KEEP if predicted is not None else ()))
    if cut:
        err(cut)
    if any(o.interruptible for o in shown):
        err("spot: the price is the lowest bid the host takes; a higher bid from someone else "
            "stops the machine")
    if not found and not got.chosen and got.asked:
        err(explain_empty(query, got))
    if got.warnings and not rows:
        raise typer.Exit(1)


def _pin(volume: str, providers, gpu, gpus):
    """(its provider, the Pin) of --volume: only that provider's offers where it is."""
    from gpubench.lifecycle.volumes import pin_for
    from gpubench.store.volumes import VolumesLedger

    with VolumesLedger() as ledger:
        provider = ledger.find(volume).provider
    if providers and list(providers) != [provider]:
        raise UsageError(f"--volume {volume} is a {provider} volume; its offers are {provider}'s")
    return provider, pin_for(volume, provider, gpu, gpus or 1)


def _suite_workload(workload: str):
    """The suite workload --workload names; a script is refused (predicting for one
    means a calibration run, which is advise's to do)."""
    from gpubench import suite

    ref = suite.resolve(workload)
    if not ref.in_suite:
        raise UsageError(f"--workload: '{workload}' is a script; 'gpubench advise {workload}' predicts "
                         f"for a script of your own")
    return ref


def _predicted(ref, offers: list, by: str | None) -> dict:
    """Offer -> its prediction for one epoch of the workload, in the order --sort asks."""
    from gpubench.predict.advise import for_offers, ranked
    from gpubench.predict.records import records_for_prediction
    from gpubench.predict.subject import suite_subject, work_for

    records = records_for_prediction(None)[0]
    subject = suite_subject(ref.name, (), records)
    predictions = for_offers(subject, offers, records, work_for(subject, None, None))
    if by:
        predictions = ranked(predictions, by)
    return {p.config.offer: p for p in predictions}


def _predicted_cells(p, people: bool) -> dict:
    from gpubench.format import format_dollars
    from gpubench.predict.words import say_duration

    if not p.has_figure:
        return {"predicted": None, "epoch_time": None, "epoch_cost": None, "basis": p.basis}
    if not people:
        return {"predicted": p.throughput, "epoch_time": p.seconds, "epoch_cost": p.dollars,
                "basis": p.basis}
    return {"predicted": f"{p.throughput:,.0f}/s", "epoch_time": say_duration(p.seconds),
            "epoch_cost": format_dollars(p.dollars), "basis": p.basis}


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
