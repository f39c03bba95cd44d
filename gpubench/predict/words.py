"""Predictions as rows of a table and as the sentence of advice at its end."""

from __future__ import annotations

from gpubench.format import format_dollars, say_duration
from gpubench.predict.advise import Advice, Prediction, Work

# (key, heading) of the table for people; programs get every key of prediction_row.
COLUMNS = [("rank", "#"), ("provider", "provider"), ("gpu", "gpu"), ("gpus", "gpus"),
           ("nodes", "nodes"), ("price_per_hour", "$/h"), ("throughput_text", "predicted"),
           ("time_text", "time"), ("cost_text", "cost"), ("speedup", "speedup"),
           ("efficiency", "eff"), ("basis", "basis"), ("pareto_mark", "front")]
STRATEGY_COLUMN = ("strategy", "strategy")     # shown where the table mixes DDP and FSDP rows
# What advise is for, kept longest in a narrow terminal: the configuration, what it takes
# (time, cost), how sure that is (basis), whether it is worth it (the front); then where
# and at what price, and last the scaling figures.
ADVISE_KEEP = ["gpu", "gpus", "time_text", "cost_text", "basis", "pareto_mark", "nodes", "strategy",
               "provider", "price_per_hour", "throughput_text", "rank", "speedup", "efficiency"]


def table_columns(predictions: list[Prediction], mixed_strategies: bool) -> list[tuple[str, str]]:
    """The advise table's columns: nodes only where a row spans more than one machine,
    the strategy only where DDP and FSDP rows mix."""
    columns = [c for c in COLUMNS if c[0] != "nodes" or any(p.config.nodes > 1 for p in predictions)]
    if mixed_strategies:
        at = [k for k, _ in columns].index("price_per_hour")
        columns = columns[:at] + [STRATEGY_COLUMN] + columns[at:]
    return columns


def prediction_row(p: Prediction, rank: int | None = None) -> dict:
    """Every figure of one prediction; *_text keys are for people."""
    c = p.config
    row = {"rank": rank, "provider": c.offer.provider, "offer_id": c.offer.offer_id,
           "gpu": c.offer.gpu_name, "gpus": c.gpus, "nodes": c.nodes,
           "price_per_hour": round(c.price_per_hour, 4), "region": c.offer.region,
           "throughput": p.throughput, "uncertainty": round(p.uncertainty, 3),
           "seconds": p.seconds, "dollars": p.dollars, "speedup": _round(p.speedup),
           "efficiency": _round(p.efficiency), "basis": p.basis, "bound_by": p.bound_by or None,
           "pareto": p.pareto, "sources": list(p.sources), "left_out": p.left_out,
           "strategy": p.strategy}
    if p.has_figure:
        # The time is inversely proportional to throughput: its range is 1/(1±u).
        u = p.uncertainty
        row["throughput_text"] = f"{p.throughput:,.0f}/s ±{u:.0%}"
        row["time_text"] = (f"{say_duration(p.seconds)} "
                            f"({say_range(p.seconds / (1 + u), p.seconds / max(1 - u, 0.05))})")
        row["cost_text"] = format_dollars(p.dollars)
        row["pareto_mark"] = "*" if p.pareto else ""
    else:
        row.update(throughput_text="-", time_text="-", cost_text="-", pareto_mark="")
    return row


def say_range(low: float, high: float) -> str:
    """'18-37 min' where both ends read in one unit, else '44.3 h-3.8 days'."""
    a, b = say_duration(low), say_duration(high)
    a_num, _, a_unit = a.partition(" ")
    b_num, _, b_unit = b.partition(" ")
    if a_unit == b_unit and not a_num.startswith("<"):
        return f"{a_num}-{b}"
    return f"{a}-{b}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _one(p: Prediction, work: Work) -> str:
    under = " under FSDP" if p.strategy == "FSDP" else ""
    return (f"{p.config.label}{under} at {format_dollars(p.config.price_per_hour)}/h: about "
            f"{say_duration(p.seconds)} and {format_dollars(p.dollars)} for {work.what} ({p.basis})")


def advice_sentence(a: Advice, work: Work) -> str:
    """The cheapest, the fastest and the cheapest that meets the deadline, in one sentence."""
    if a.cheapest is None:
        within = f" within the budget of {format_dollars(a.budget)}" if a.budget is not None else ""
        return f"No configuration can be predicted{within}."
    ties = a.tied_cheapest
    tied = f" (tied at {format_dollars(a.cheapest.dollars)} with {ties} other{'s' if ties > 1 else ''})" \
        if ties else ""
    parts = [f"Cheapest{tied}: {_one(a.cheapest, work)}"]
    if a.fastest is not None and a.fastest is not a.cheapest:
        times = a.cheapest.seconds / a.fastest.seconds
        parts.append(f"fastest: {_one(a.fastest, work)}, {times:.1f}x sooner")
    if a.deadline_s is not None:
        if a.within_deadline is None:
            parts.append(f"nothing is predicted to finish within {say_duration(a.deadline_s)}")
        elif a.within_deadline is not a.cheapest:
            parts.append(f"cheapest within {say_duration(a.deadline_s)}: {_one(a.within_deadline, work)}")
        else:
            parts.append(f"it also finishes within {say_duration(a.deadline_s)}")
    return "; ".join(parts) + "."
