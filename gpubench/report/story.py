"""The cost story of a table of figures, in words: its fastest configuration, the
cheapest one that costs money (a free machine is free, not cheapest), and one
plain sentence comparing them, "2x A100 on Lambda is 7.1x the cost of 2x RTX
3090 on Vast.ai for 1.07x the speed", with a second one for a free machine.

It reads the marks compute.py set (fastest, cheapest among the paid) from the
rows of one table, so the words and the table's "best" column always agree.
Costs compare the same amount of work: an epoch where the size is known, else
a million units (samples, tokens), or one run of a script timed as a whole; and
only rows that did the same work (compute.SAME_WORK: the same arguments, the same
script) are compared, each group of them in sentences of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.format import format_cell, format_dollars
from gpubench.report.compute import SAME_WORK
from gpubench.report.selectors import short_gpu

RUNS = "runs"  # the unit of work of a script timed as a whole (tables.RUNS)


@dataclass
class CostStory:
    fastest: dict | None  # the row marked fastest
    cheapest: dict | None  # the row marked cheapest: the least money of the paid rows
    free: list[dict] = field(default_factory=list)  # rows on a machine that costs nothing
    sentences: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def cost_story(rows: list[dict]) -> CostStory | None:
    """The story of one table's rows (report rows as dicts, before display); None
    for a table without the marks (a bandwidth test, failed runs). Rows run with
    other arguments (or another version of a script) did other work: each such
    group has sentences of its own, its rows named with their arguments, and the
    story's fastest and cheapest are the first group's."""
    name = _namer(rows)
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(str(row.get(k)) for k in SAME_WORK), []).append(row)
    stories = [s for s in (_group_story(group, name) for group in groups.values()) if s]
    if not stories:
        return None
    first = stories[0]
    return CostStory(first.fastest, first.cheapest, first.free,
                     [sentence for story in stories for sentence in story.sentences])


def _group_story(rows: list[dict], name) -> CostStory | None:
    """The story of rows that did the same work (compute.SAME_WORK: the marks are
    theirs); None where none is marked fastest."""
    fastest = next((r for r in rows if r.get("fastest")), None)
    if fastest is None:
        return None
    cheapest = next((r for r in rows if r.get("cheapest")), None)
    free = [r for r in rows if r.get("price_per_hour") == 0]
    story = CostStory(fastest, cheapest, free)
    if cheapest is None:
        story.sentences.append(f"{name(fastest)} is the fastest; no configuration here has a "
                               "price above zero on record, so none is cheapest.")
    elif cheapest is fastest:
        story.sentences.append(f"{name(fastest)} is both the fastest and the cheapest paid "
                               f"configuration ({_figures(fastest)}).")
    elif _paid(fastest):
        cost = fastest["cost_per_million_samples"] / cheapest["cost_per_million_samples"]
        speed = fastest["throughput"] / cheapest["throughput"]
        story.sentences.append(
            f"{name(fastest)} is {_ratio(cost)} the cost of {name(cheapest)} for "
            f"{speed:.2f}x the speed ({_figures(fastest)}, against {_figures(cheapest)}).")
    else:
        price = "free" if fastest.get("price_per_hour") == 0 else "at an unknown price"
        story.sentences.append(
            f"{name(fastest)} is the fastest, {price}; the cheapest paid is {name(cheapest)} "
            f"at {cheapest['throughput'] / fastest['throughput']:.2f}x its speed "
            f"({_figures(cheapest)}).")
    others = [r for r in free if r is not fastest]
    if others:
        best_free = max(others, key=lambda r: r["throughput"])
        story.sentences.append(
            f"{name(best_free)} is free (not counted as cheapest), at "
            f"{best_free['throughput'] / fastest['throughput']:.2g}x the speed of the fastest.")
    return story


def _paid(row: dict) -> bool:
    return bool(row.get("price_per_hour")) and row.get("cost_per_million_samples") is not None


def _ratio(value: float) -> str:
    """7.4x, 1.03x, 12x: two figures that matter."""
    if value >= 10:
        return f"{value:.0f}x"
    return f"{value:.2f}x" if value < 2 else f"{value:.1f}x"


def _figures(row: dict) -> str:
    """Time and money for the same amount of work: an epoch, a run, or a million units."""
    unit = row.get("work_unit") or "samples"
    if row.get("epoch_seconds") is not None and row.get("cost_per_epoch") is not None:
        what = "a run" if unit == RUNS else "an epoch"
        return (f"{what} in {human_seconds(row['epoch_seconds'])} for "
                f"{format_dollars(row['cost_per_epoch'])}")
    return (f"{format_cell(row['throughput'])} {unit}/s, "
            f"{format_dollars(row['cost_per_million_samples'])} per million {unit}")


def human_seconds(seconds: float) -> str:
    """12.3 s, 4.5 min, 2.1 h: the unit by magnitude."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def provider_name(name: str) -> str:
    """How a provider writes itself (Vast.ai); local, ssh, slurm and mock as they are."""
    from gpubench.providers.registry import ENTRIES

    return next((e.display_name for e in ENTRIES if e.name == name), name)


def _namer(rows: list[dict]):
    """Names for the rows of one table: GPUs, GPU and provider, and whatever else
    tells its rows apart (nodes, precision, the workload's arguments, the script's
    version)."""
    precisions = len({r.get("precision") for r in rows}) > 1
    args = len({str(r.get("workload_args")) for r in rows}) > 1
    scripts = len({str(r.get("script_sha256")) for r in rows}) > 1

    def name(row: dict) -> str:
        gpu = short_gpu(row.get("gpu_name") or "")
        count = row["gpu_count"]
        if gpu.lower() == "cpu":
            text = f"{count} CPU process{'es' if count != 1 else ''}"
        else:
            text = f"{count}x {gpu}"
        if (row.get("nodes") or 1) > 1:
            text += f" over {row['nodes']} nodes"
        if precisions:
            text += f" {row['precision']}"
        if args:
            text += f" [{row.get('workload_args') or 'no arguments'}]"
        if scripts and row.get("script_sha256"):
            text += f" (script {str(row['script_sha256'])[:8]})"
        return f"{text} on {provider_name(row['provider'])}"

    return name
