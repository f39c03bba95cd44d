"""Figures per workload, drawn with matplotlib's Agg canvas (no display, no pyplot state):

- throughput against GPU count, each machine type with its ideal linear line
  (and the range of its runs, where it ran more than once);
- scaling efficiency against GPU count, a suspect speedup (above the process
  count) marked as such;
- for a bandwidth test, bus bandwidth at the peak and at the largest message
  size against GPU count, in place of the three others;
- the median step in parts at each GPU count (data, compute, exposed all-reduce, other),
  one stacked bar per count, in milliseconds of the step where the records give its
  time (else shares of it), each part's share written on it where it has room;
- cost against time to finish a fixed amount of work (an epoch when the
  records know its size, one run of a script timed as a whole, else a million
  samples or tokens), time in s, min or h by magnitude, every point labelled
  where it overlaps no other label, the fastest and the cheapest paid one marked
  in the colours of the page's key, and the Pareto front: the configurations no
  other one beats on both time and cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gpubench.errors import ResultsError, UsageError
from gpubench.report.checks import is_bandwidth
from gpubench.report.compute import PART_WORDS, Report, pareto_front
from gpubench.format import format_dollars
from gpubench.report.story import human_seconds
from gpubench.report.tables import short_gpu

KINDS = ("throughput", "efficiency", "breakdown", "cost-time", "bandwidth")
PLOT_FORMATS = ("png", "svg", "both")  # what --plot-format takes
# How to install matplotlib into this checkout's environment: the distribution is
# gpubench-ddp ("gpubench" on PyPI is another project), installed from the checkout.
PLOTS_INSTALL = "bash scripts/setup.sh (or pip install -e '.[plots]' in the checkout)"


@dataclass
class Plot:
    workload: str
    kind: str  # one of KINDS
    figure: object  # matplotlib.figure.Figure
    caption: list[str] = field(default_factory=list)  # each point in words (the page's hover text)

    @property
    def stem(self) -> str:
        return f"{slug(self.workload)}-{self.kind}"


def slug(name: str) -> str:
    """A file-name-safe form of a workload name (which may be a script path)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).stem if name.endswith(".py") else name).strip("_") or "workload"


MACHINE = ["workload_args", "provider", "instance_type", "gpu_name", "precision"]


def _label(row, with_args: bool) -> str:
    label = f"{row['provider']} {short_gpu(row['gpu_name'])} {row['precision']}"
    return f"{label} [{row['workload_args']}]" if with_args else label


def _new_figure(title: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _gpu_axis(axes, counts) -> None:
    axes.set_xscale("log", base=2)
    ticks = sorted(set(int(c) for c in counts))
    axes.set_xticks(ticks, [str(t) for t in ticks])
    axes.minorticks_off()
    axes.set_xlabel("GPUs")


def throughput_plot(workload: str, rows: pd.DataFrame) -> Plot:
    unit = rows["throughput_unit"].iloc[0]
    figure, axes = _new_figure(f"{workload}: throughput")
    with_args = rows["workload_args"].nunique() > 1
    for _, group in rows.groupby(MACHINE, sort=True):
        group = group.sort_values("gpu_count")
        line, = axes.plot(group["gpu_count"], group["throughput"], marker="o",
                          label=_label(group.iloc[0], with_args))
        ranged = group[group["repeats"] > 1]
        if not ranged.empty:  # the runs' range around their median
            axes.errorbar(ranged["gpu_count"], ranged["throughput"],
                          yerr=[ranged["throughput"] - ranged["throughput_min"],
                                ranged["throughput_max"] - ranged["throughput"]],
                          fmt="none", ecolor=line.get_color(), capsize=3)
        ideal = (group["throughput"] / group["efficiency"]).dropna()  # baseline x GPUs / baseline GPUs
        if not ideal.empty:
            axes.plot(group.loc[ideal.index, "gpu_count"], ideal, linestyle="--",
                      color=line.get_color(), alpha=0.6)
    axes.plot([], [], linestyle="--", color="grey", label="ideal linear scaling")
    _gpu_axis(axes, rows["gpu_count"])
    axes.set_ylabel(unit)
    _wide_axis(axes.set_yscale, rows["throughput"])
    axes.legend(fontsize="small")
    return Plot(workload, "throughput", figure)


def efficiency_plot(workload: str, rows: pd.DataFrame, baseline: str) -> Plot:
    figure, axes = _new_figure(f"{workload}: scaling efficiency")
    with_args = rows["workload_args"].nunique() > 1
    for _, group in rows.groupby(MACHINE, sort=True):
        group = group.sort_values("gpu_count")
        axes.plot(group["gpu_count"], group["efficiency"] * 100, marker="o",
                  label=_label(group.iloc[0], with_args))
    suspect = rows[rows["suspect"].notna()]
    if not suspect.empty:
        axes.scatter(suspect["gpu_count"], suspect["efficiency"] * 100, marker="x", s=90,
                     color="tab:red", zorder=3, label="suspect: above the process count")
        for _, row in suspect.iterrows():
            axes.annotate("suspect", (row["gpu_count"], row["efficiency"] * 100),
                          fontsize="x-small", color="tab:red", xytext=(4, 4),
                          textcoords="offset points")
    axes.axhline(100, linestyle="--", color="grey", label="ideal")
    _gpu_axis(axes, rows["gpu_count"])
    axes.set_ylabel(f"efficiency % (vs {baseline})")
    highest = (rows["efficiency"] * 100).max()
    axes.set_ylim(0, max(110.0, highest * 1.1) if highest == highest else 110.0)  # 100 % not on the edge
    axes.legend(fontsize="small", loc="lower left")
    return Plot(workload, "efficiency", figure)


FASTEST_COLOUR = "#e6a800"  # gold: the fastest, in the figure, its legend and the page's key
CHEAPEST_COLOUR = "tab:green"  # the cheapest paid configuration
FREE_COLOUR = "tab:blue"  # a machine that costs nothing


def time_unit(seconds) -> tuple[str, float]:
    """The unit for a time axis by the magnitude of its typical (median) value, so
    that most ticks read as plain numbers: (name, seconds in it)."""
    values = pd.Series(seconds, dtype=float).dropna()
    typical = float(values.median()) if not values.empty else 0.0
    if typical < 120:
        return "s", 1.0
    if typical < 2 * 3600:
        return "min", 60.0
    return "h", 3600.0


def work_amount(rows: pd.DataFrame) -> tuple[str, pd.Series, pd.Series]:
    """What the cost figure prices, with the seconds and dollars of it per row: one
    run of a script timed as a whole, an epoch where its size is known, else a
    million units of work."""
    work_unit = rows["work_unit"].iloc[0]
    if rows["epoch_seconds"].notna().all():
        what = "one run" if work_unit == "runs" else "one epoch"
        return what, rows["epoch_seconds"], rows["cost_per_epoch"]
    return f"1M {work_unit}", 1e6 / rows["throughput"], rows["cost_per_million_samples"]


def point_label(row) -> str:
    return f"{row['provider']} {row['gpu_count']}x {short_gpu(row['gpu_name'])}"


def cost_time_plot(workload: str, rows: pd.DataFrame) -> Plot | None:
    priced = rows[rows["price_per_hour"].notna()]
    if priced.empty:
        return None
    work, seconds, dollars = work_amount(priced)
    unit, per = time_unit(seconds)
    times = seconds / per
    front = pareto_front(times, dollars)
    figure, axes = _new_figure(f"{workload}: cost against time for {work}")
    if (~front).any():
        axes.scatter(times[~front], dollars[~front], color="tab:grey", zorder=2,
                     label="configuration")
    order = times[front].sort_values().index
    axes.plot(times[order], dollars[order], color="tab:red", marker="o", drawstyle="steps-post",
              zorder=3, label="Pareto front: none is both faster and cheaper")
    for column, colour, marker, name in (("fastest", FASTEST_COLOUR, "*", "fastest"),
                                         ("cheapest", CHEAPEST_COLOUR, "D", "cheapest paid")):
        marked = priced[priced[column].fillna(False).astype(bool)]
        if not marked.empty:
            axes.scatter(times[marked.index], dollars[marked.index], s=170, marker=marker,
                         facecolor="none", edgecolor=colour, linewidths=2, zorder=4, label=name)
    free = priced[priced["price_per_hour"] == 0]
    if not free.empty:
        axes.scatter(times[free.index], dollars[free.index], marker="s", color=FREE_COLOUR,
                     zorder=4, label="free (not cheapest)")
    _wide_axis(axes.set_xscale, times)
    _wide_axis(axes.set_yscale, dollars)
    axes.margins(x=0.12, y=0.15)
    axes.set_xlabel(f"time for {work} ({unit})")
    axes.set_ylabel(f"$ for {work}")
    # below the axes, so that it covers no point and no label
    figure.legend(fontsize="x-small", loc="outside lower center", ncols=3)
    labels = [(point_label(row), times[i], dollars[i]) for i, row in priced.iterrows()]
    place_labels(figure, axes, labels)
    caption = [f"{text}: {human_seconds(times[i] * per)}, {format_dollars(dollars[i])}"
               for (text, _, _), i in zip(labels, priced.index)]
    return Plot(workload, "cost-time", figure, caption)


def place_labels(figure, axes, labels) -> None:
    """Label every point where its text overlaps no label placed before it and stays
    inside the axes (tried in a few directions), so that nothing is clipped or buried."""
    figure.canvas.draw()  # the layout, so that text extents are final
    renderer = figure.canvas.get_renderer()
    box = axes.get_window_extent(renderer)
    taken = []
    offsets = [(5, 4), (5, -11), (-5, 4), (-5, -11), (5, 14), (-5, 14), (5, -21), (-5, -21)]
    for text, x, y in labels:
        placed = None
        for dx, dy in offsets:
            note = axes.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                                 fontsize="x-small", ha="left" if dx > 0 else "right",
                                 annotation_clip=False)
            extent = note.get_window_extent(renderer)
            inside = (extent.x0 >= box.x0 and extent.x1 <= box.x1
                      and extent.y0 >= box.y0 and extent.y1 <= box.y1)
            if inside and not any(extent.overlaps(other) for other in taken):
                placed = extent
                break
            note.remove()
        if placed is None:  # crowded: the first place, inside the axes at least
            note = axes.annotate(text, (x, y), xytext=(5, 4), textcoords="offset points",
                                 fontsize="x-small", annotation_clip=False)
            placed = note.get_window_extent(renderer)
        taken.append(placed)


# A colour per part of the step, in step_parts.PARTS order: the same in every figure.
PART_COLOURS = ("tab:orange", "tab:blue", "tab:red", "tab:grey")
ROOM = 0.08   # a part this share of its bar or more has its share written on it


def breakdown_plot(workload: str, rows: pd.DataFrame) -> Plot | None:
    """One stacked bar per GPU count (machine types side by side, each its own group): the
    median step in parts. None where no row has its parts."""
    rows = rows[rows["breakdown"].map(lambda b: isinstance(b, dict))]
    if rows.empty:
        return None
    timed = bool(rows["median_step_s"].gt(0).all())
    scale, unit = (1e3, "ms") if timed and rows["median_step_s"].max() < 1 else (1.0, "s")
    figure, axes = _new_figure(f"{workload}: the step in parts")
    groups = [group.sort_values("gpu_count") for _, group in rows.groupby(MACHINE, sort=True)]
    with_args = rows["workload_args"].nunique() > 1
    positions, ticks, caption = [], [], []
    for g, group in enumerate(groups):
        for _, row in group.iterrows():
            positions.append(len(positions) + g)    # a gap between machine types
            count = str(int(row["gpu_count"]))
            ticks.append(count if len(groups) == 1 else f"{count}\n{_label(row, with_args)}")
            step = row["median_step_s"] * scale if timed else 100.0
            _stack(axes, positions[-1], row["breakdown"], step, labelled=len(positions) == 1)
            shares = ", ".join(f"{PART_WORDS[p]} {row['breakdown'][p]:.0%}" for p in PART_WORDS)
            caption.append(f"{point_label(row)}: " + (f"{step:.3g} {unit} a step: " if timed else "")
                           + shares)
    axes.set_xticks(positions, ticks, fontsize="small" if len(groups) > 1 else None)
    axes.set_xlabel("GPUs")
    axes.set_ylabel(f"{unit} of the median step" if timed else "% of the median step")
    axes.grid(False, axis="x")
    figure.legend(fontsize="small", loc="outside lower center", ncols=4)   # over no bar
    return Plot(workload, "breakdown", figure, caption)


def _stack(axes, x: float, shares: dict, step: float, labelled: bool) -> None:
    """One bar of `step`: each part in its colour (named in the legend once, by the first
    bar), its share written on it where it has room."""
    bottom = 0.0
    for part, colour in zip(PART_WORDS, PART_COLOURS):
        share = shares.get(part) or 0.0
        axes.bar(x, share * step, bottom=bottom, width=0.7, color=colour, edgecolor="white",
                 label=PART_WORDS[part] if labelled else None)
        if share >= ROOM:
            axes.text(x, bottom + share * step / 2, f"{share:.0%}", ha="center", va="center",
                      fontsize="x-small", color="white")
        bottom += share * step


def bandwidth_plot(workload: str, rows: pd.DataFrame) -> Plot:
    figure, axes = _new_figure(f"{workload}: bus bandwidth")
    for _, group in rows.groupby(MACHINE, sort=True):
        group = group.sort_values("gpu_count")
        label = _label(group.iloc[0], False)
        line, = axes.plot(group["gpu_count"], group["peak_busbw"], marker="o",
                          label=f"{label}: peak")
        axes.plot(group["gpu_count"], group["largest_size_busbw"], marker="s", linestyle=":",
                  color=line.get_color(), label=f"{label}: largest size")
    _gpu_axis(axes, rows["gpu_count"])
    axes.set_ylabel("busbw GB/s (nccl-tests)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return Plot(workload, "bandwidth", figure)


def _wide_axis(set_scale, values: pd.Series) -> None:
    """Logarithmic where values span more than 50x (a CPU next to GPUs); symlog keeps a 0."""
    values = values.dropna()
    positive = values[values > 0]
    if positive.empty or positive.max() / positive.min() <= 50:
        return
    if (values == 0).any():
        set_scale("symlog", linthresh=float(positive.min()))
    else:
        set_scale("log")


def report_plots(report: Report) -> list[Plot]:
    plots = []
    rows = report.rows
    for workload in dict.fromkeys(rows["workload"]):
        mine = rows[rows["workload"] == workload]
        if is_bandwidth(mine).all():
            plots.append(bandwidth_plot(workload, mine))
            continue
        plots.append(throughput_plot(workload, mine))
        plots.append(efficiency_plot(workload, mine, report.baseline.describe()))
        parts = breakdown_plot(workload, mine)
        if parts is not None:
            plots.append(parts)
        cost = cost_time_plot(workload, mine)
        if cost is not None:
            plots.append(cost)
    return plots


def write_plots(report: Report, directory: Path, formats=("png",)) -> list[Path]:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(f"--plot: cannot create {directory}: {e.strerror}") from None
    written = []
    for plot in report_plots(report):
        for fmt in formats:
            path = directory / f"{plot.stem}.{fmt}"
            plot.figure.savefig(path, format=fmt)
            written.append(path)
    return written


def plot_file_formats(choice: str) -> tuple[str, ...]:
    """--plot-format png, svg or both -> the file formats to write."""
    if choice not in PLOT_FORMATS:
        raise UsageError(f"--plot-format: '{choice}' is not one of {', '.join(PLOT_FORMATS)}")
    return ("png", "svg") if choice == "both" else (choice,)


def require_matplotlib(flag: str) -> None:
    """A usage error naming `flag` (--plot, --html) when matplotlib is not installed,
    before any work is done."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"{flag} needs matplotlib, which is not installed: {PLOTS_INSTALL}") from None
