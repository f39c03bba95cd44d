"""`gpubench advise`: predicted time and cost of a workload (or your own script) on every
live offer, at each GPU and node count, ranked, before anything is rented."""

from __future__ import annotations

import json
import re
from typing import Annotated, Optional

import typer

from gpubench.cli.completion import workload_names
from gpubench.cli.options import (ROWS_SHOWN, FormatOpt, MachineSizesOpt, MaxPriceOpt, OffersGpuOpt,
                                  ResultsOpt, RowsOpt, WideOpt, WorkBudgetOpt, WorkloadArgsArg, table_fit)
from gpubench.cli.render import check_format, err, format_dollars, out, render_rows
from gpubench.errors import UsageError

WorkloadArg = Annotated[str, typer.Argument(
    help="A suite workload (see 'gpubench workloads') or a .py script.", autocompletion=workload_names)]
ProviderOpt = Annotated[Optional[str], typer.Option(
    "--provider", help="Providers to ask, comma-separated [default: all with a key].")]
NodesOpt = Annotated[str, typer.Option("--nodes", help="Machines to consider, e.g. 1,2.")]
EpochsOpt = Annotated[Optional[float], typer.Option("--epochs", help="Epochs of work [default: 1].")]
SamplesOpt = Annotated[Optional[float], typer.Option(
    "--samples", help="Units of work (samples, images, tokens) instead of epochs.")]
DeadlineOpt = Annotated[Optional[str], typer.Option(
    "--deadline", help="The longest the work may take, e.g. 90m, 2h, 3600s: the advice names the "
                       "cheapest configuration that meets it.")]
SortOpt = Annotated[str, typer.Option("--sort", help="cost-per-epoch (cheapest first) or time-per-epoch.")]
SORTS = {"cost-per-epoch": "cost", "time-per-epoch": "time"}


def parse_duration(text: str, flag: str = "--deadline") -> float:
    """'90m', '2h', '1.5h', '3600s', '3600' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{flag}: '{text}' is not a duration (e.g. 90m, 2h, 3600s)")
    return float(m.group(1)) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}[m.group(2) or "s"]


def advise(workload: WorkloadArg, workload_args: WorkloadArgsArg = None, gpus: MachineSizesOpt = None,
           nodes: NodesOpt = "1", epochs: EpochsOpt = None, samples: SamplesOpt = None,
           gpu: OffersGpuOpt = None, max_price: MaxPriceOpt = None, provider: ProviderOpt = None,
           deadline: DeadlineOpt = None, budget: WorkBudgetOpt = None, sort: SortOpt = "cost-per-epoch",
           results: ResultsOpt = None, limit: RowsOpt = None, fmt: FormatOpt = "table",
           wide: WideOpt = False) -> None:
    """Predict the time and cost of WORKLOAD (one epoch, or --epochs/--samples) on every
    live offer at each GPU and node count, from measured records first, then published
    figures, then datasheets; rank them, mark the time-versus-cost Pareto front (*),
    and say which is cheapest, fastest, and cheapest within --deadline."""
    from gpubench.launch.points import parse_counts
    from gpubench.lifecycle.budget import check_budget
    from gpubench.predict.advise import (advice, cheapest_of_each, configs, fsdp_where_ddp_cannot_fit,
                                         mark_pareto, predict, ranked, within_budget)
    from gpubench.predict.records import records_for_prediction
    from gpubench.predict.subject import check_work, sharded_subject, suite_subject, work_for
    from gpubench.predict.words import ADVISE_KEEP, advice_sentence, prediction_row, table_columns

    check_format(fmt, ("table", "csv", "json", "markdown"))
    if sort not in SORTS:
        raise UsageError(f"--sort: '{sort}' is not one of {', '.join(SORTS)}")
    if epochs is not None and samples is not None:
        raise UsageError("--epochs and --samples both say how much work: give one")
    counts = parse_counts(gpus) if gpus else None
    node_counts = parse_counts(nodes, "--nodes")
    deadline_s = parse_duration(deadline) if deadline else None
    budget = check_budget(budget)
    records, warnings = records_for_prediction(results)
    for line in warnings:
        err(line)
    script = _users_script(workload)
    if script is None:
        subject = subject_of(workload, tuple(workload_args or ()), records, suite_subject)
        work = work_for(subject, epochs, samples)
    else:
        check_work(epochs, samples)
    offers = _offers(provider, gpu)
    chosen, folded = cheapest_of_each([c for c in configs(offers, counts, node_counts)
                                       if max_price is None or c.price_per_hour <= max_price])
    if not chosen:
        raise UsageError("no offer fits: " + _none_fit(counts, node_counts, max_price))
    if script is None:
        predictions = [predict(subject, c, records, work) for c in chosen]
    else:   # counted as rank 0 of each world ranked: it may divide its work by the world
        subject, work, predictions = _script_predictions(script, tuple(workload_args or ()), chosen, records,
                                                         epochs, samples)
    twin = sharded_subject(subject, records)
    sharded = fsdp_where_ddp_cannot_fit(predictions, twin, records, work)
    predictions = ranked(mark_pareto(predictions + sharded), SORTS[sort])
    if not any(p.has_figure for p in predictions):
        _nothing_predicted(subject, predictions)
    priced, dearer = within_budget(predictions, budget)
    if not any(p.has_figure for p in priced):
        cheapest = min((p for p in predictions if p.has_figure), key=lambda p: p.dollars)
        raise UsageError(f"no configuration is predicted within the budget of {format_dollars(budget)}: "
                         f"the cheapest, {cheapest.config.label}, about {format_dollars(cheapest.dollars)} "
                         f"for {work.what}")
    people = fmt in ("table", "markdown")
    listed = [p for p in priced if p.has_figure] if people else priced
    a = advice(priced, deadline_s, budget)
    rows = [prediction_row(p, i + 1) for i, p in enumerate(listed)]
    cap = ROWS_SHOWN if limit is None and people else limit   # as ROWS_HELP says
    shown = rows[:cap] if cap else rows
    if fmt == "json":
        out(json.dumps({"workload": subject.workload, "args": list(subject.args),
                        "work": {"units": work.units, "what": work.what, "unit": subject.unit},
                        "predictions": shown, "advice": advice_sentence(a, work)}, indent=2))
        _say_more(rows, shown)
        _say_dearer(dearer, budget)
        return
    columns = table_columns(listed, bool(sharded)) if people else \
        [(k, k) for k in rows[0] if k.endswith("_text") is False]
    out(render_rows(shown, columns, fmt, title=f"{subject.workload}: {work.title}, predicted",
                    keep=ADVISE_KEEP, fit=table_fit(wide, None)))
    _say_more(rows, shown)
    if folded:
        err(f"{folded} dearer offer(s) of a GPU type and size already listed are left out")
    _say_dearer(dearer, budget)
    no_figure = len(priced) - len(listed)
    if no_figure:
        err(f"{no_figure} configuration(s) with no figure are left out of the table:")
    for line in left_out_lines(priced):
        err(line)
    if sharded:
        err(f"strategy FSDP: the same model as {twin.workload}, on the {len(sharded)} configuration(s) "
            f"where DDP cannot hold it")
    out(advice_sentence(a, work))


def _users_script(workload: str):
    """The WorkloadRef of a user's script; None for a suite workload."""
    from gpubench import suite

    ref = suite.resolve(workload, None)
    return None if ref.in_suite else ref


def _script_predictions(ref, args: tuple, chosen: list, records: list[dict], epochs, samples):
    """(subject, work, predictions) of a user's script: each configuration predicted from
    the script counted as rank 0 of its world (gpubench.predict.worlds); one whose world the
    script cannot be counted at is left out with the reason."""
    from gpubench.predict.advise import Prediction, predict
    from gpubench.predict.subject import work_for
    from gpubench.predict.worlds import script_worlds

    worlds = script_worlds(ref, args, [(c.gpus, c.nodes) for c in chosen], err)
    subject = worlds.first
    if subject is None:
        for world, why in sorted(worlds.refused.items()):
            err(f"at {_world_words(world)}: {why}")
        raise UsageError(f"{ref.name} could not be counted at any GPU count offered (the reasons above)")
    work = work_for(subject, epochs, samples)
    predictions = []
    for c in chosen:
        world = (c.gpus, c.nodes)
        if world in worlds.subjects:
            predictions.append(predict(worlds.subjects[world], c, records, work))
        else:
            predictions.append(Prediction(c, left_out=f"at {_world_words(world)}, {worlds.refused[world]}"))
    return subject, work, predictions


def _world_words(world) -> str:
    gpus, nodes = world
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" + (f" over {nodes} nodes" if nodes > 1 else "")


def _nothing_predicted(subject, predictions) -> None:
    """No configuration has a figure: why, one line per GPU type, then what would fit
    where memory was the reason (UsageError)."""
    from gpubench.predict.fits import what_fits

    for line in left_out_lines(predictions):
        err(line)
    hint = what_fits(subject, predictions)
    if hint:
        asked = " ".join([subject.workload, *subject.args])
        raise UsageError(f"{asked} fits none of the {len(predictions)} configurations offered at the "
                         f"batch asked: {hint}")
    raise UsageError("no configuration can be predicted (the reasons above)")


def _say_dearer(dearer: int, budget: float | None) -> None:
    if dearer:
        err(f"{dearer} configuration(s) dearer than the budget of {format_dollars(budget)} are left out")


def _say_more(rows: list, shown: list) -> None:
    if len(shown) < len(rows):
        err(f"{len(rows) - len(shown)} more configuration(s): --limit 0 shows all")


def left_out_lines(predictions) -> list[str]:
    """Why configurations have no figure: one line per GPU type and reason."""
    from gpubench.predict.advise import NO_FIT

    from gpubench.format import spoken

    seen: dict[tuple, set] = {}
    for p in predictions:
        if not p.has_figure:
            seen.setdefault((p.config.offer.gpu_name, p.left_out), set()).add(
                p.config.gpus if p.basis == NO_FIT else None)
    lines = []
    for (gpu, why), counts in seen.items():
        shown = sorted(c for c in counts if c)
        at = f" at {spoken([str(c) for c in shown], 'and')} GPU{'s' if shown != [1] else ''}" if shown else ""
        lines.append(f"left out: {gpu or 'an unnamed GPU'}{at}: {why}")
    return lines


def subject_of(workload: str, args: tuple, records: list[dict], suite_subject, gpus: int = 1, nodes: int = 1):
    """The workload's Subject; a user's script calibrated as rank 0 of `gpus` GPUs over
    `nodes` machines (the count it is predicted at: it may divide its work by the world)."""
    from gpubench import suite

    ref = suite.resolve(workload, None)
    if not ref.in_suite:
        from gpubench.predict.calibrate import script_subject

        return script_subject(ref, args, records, gpus=gpus, nodes=nodes)
    suite.check_args(ref, list(args))
    from gpubench.predict.subject import NoSubject

    try:
        return suite_subject(ref.name, args, records)
    except NoSubject as refused:
        # arguments the suite has no profile of: counted on this CPU as a script is
        import dataclasses

        from gpubench.predict.calibrate import script_subject

        err(f"note: {refused}; counting it on this machine's CPU instead, as a script is")
        return script_subject(dataclasses.replace(ref, in_suite=False), args, records, gpus=gpus, nodes=nodes)


def _offers(provider: str | None, gpu: str | None) -> list:
    from gpubench.offer_checks import split_offers
    from gpubench.offers import OfferQuery, explain_empty, gather

    names = [p.strip() for p in provider.split(",") if p.strip()] if provider else []
    query = OfferQuery(names, None, gpu).validate()
    got = gather(query)
    for line in got.warnings:
        err(line)
    found, _ = split_offers(got.chosen)
    if not found and got.asked and not got.chosen:   # the filters left nothing: say which, as offers does
        raise UsageError(explain_empty(query, got))
    if not found:
        raise UsageError("no live offers to predict for" + (f" ({got.warnings[0]})" if got.warnings else ""))
    return found


def _none_fit(counts, nodes, max_price) -> str:
    parts = []
    if counts:
        parts.append(f"--gpus {','.join(map(str, counts))}")
    if max_price is not None:
        parts.append(f"--max-price {max_price:g}")
    return " and ".join(parts) + " leave nothing" if parts else "nothing offered"


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)
