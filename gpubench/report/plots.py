"""Figures per workload, drawn with matplotlib's Agg canvas (no display, no pyplot state):

- throughput against GPU count, each machine type with its ideal linear line
  (and the range of its runs, where it ran more than once);
- scaling efficiency against GPU count, a suspect speedup (above the process
  count) marked as such;
- for a bandwidth test, bus bandwidth at the peak and at the largest message
  size against GPU count, in place of the three others;
- cost against time to finish a fixed amount of work (an epoch when the
  records know its size, else a million samples or tokens), the Pareto front
  marked: the configurations no other one beats on both time and cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gpubench.errors import ResultsError, UsageError
from gpubench.report.checks import is_bandwidth
from gpubench.report.compute import Report, pareto_front
from gpubench.report.tables import short_gpu

KINDS = ("throughput", "efficiency", "cost-time", "bandwidth")
PLOT_FORMATS = ("png", "svg", "both")  # what --plot-format takes
# How to install matplotlib into this checkout's environment: the distribution is
# gpubench-ddp ("gpubench" on PyPI is another project), installed from the checkout.
PLOTS_INSTALL = "bash scripts/setup.sh (or pip install -e '.[plots]' in the checkout)"


@dataclass
class Plot:
    workload: str
    kind: str  # one of KINDS
    figure: object  # matplotlib.figure.Figure

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
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return Plot(workload, "efficiency", figure)


def cost_time_plot(workload: str, rows: pd.DataFrame) -> Plot | None:
    priced = rows[rows["price_per_hour"].notna()]
    if priced.empty:
        return None
    work_unit = priced["work_unit"].iloc[0]
    if priced["epoch_seconds"].notna().all():
        seconds, dollars, work = priced["epoch_seconds"], priced["cost_per_epoch"], "one epoch"
    else:
        seconds = 1e6 / priced["throughput"]
        dollars, work = priced["cost_per_million_samples"], f"1M {work_unit}"
    hours = seconds / 3600.0
    front = pareto_front(hours, dollars)
    figure, axes = _new_figure(f"{workload}: cost against time for {work}")
    axes.scatter(hours[~front], dollars[~front], color="tab:grey", label="configuration")
    order = hours[front].sort_values().index
    axes.plot(hours[order], dollars[order], color="tab:red", marker="o", drawstyle="steps-post",
              label="Pareto front")
    for i, row in priced[front].iterrows():  # labelling every point would bury the plot
        axes.annotate(f"{row['provider']} {row['gpu_count']}x{_short(row['gpu_name'])}",
                      (hours[i], dollars[i]), fontsize="x-small", xytext=(4, 3),
                      textcoords="offset points")
    _wide_axis(axes.set_xscale, hours)
    _wide_axis(axes.set_yscale, dollars)
    axes.set_xlabel(f"hours for {work}")
    axes.set_ylabel(f"$ for {work}")
    axes.legend(fontsize="small")
    return Plot(workload, "cost-time", figure)


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


def _short(gpu: str) -> str:
    return short_gpu(gpu).split(" ")[0]


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
