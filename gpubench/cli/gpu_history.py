"""A short history of each GPU's utilisation, memory and power, and how it is drawn: a
sparkline of unicode blocks per figure, then its latest value. `gpubench top` draws a
machine's GPUs with it, and the live displays of run and bench the GPUs of every node a
run is on.

A sample is {"gpus": [{"index", "util", "mem_used", "mem_total", "power"}, ...]} (memory
in MiB, power in W, None where not known), as gpubench/onhost/gpu_top.py gives it.
"""

from __future__ import annotations

from collections import deque

HISTORY = 20                       # samples a sparkline shows
BARS = "▁▂▃▄▅▆▇█"
UNKNOWN_BAR = "·"


class History:
    """The last `length` samples of each GPU, by node ("" on one machine) and index; a
    GPU's buffer is bounded, whatever the run's length."""

    def __init__(self, length: int = HISTORY) -> None:
        self.length = length
        self.gpus: dict[tuple[str, int], deque] = {}

    def add(self, sample: dict, node: str = "") -> None:
        for gpu in sample.get("gpus", []):
            self.gpus.setdefault((node, gpu["index"]), deque(maxlen=self.length)).append(gpu)

    def series(self, index: int, key: str, node: str = "") -> list:
        return [g.get(key) for g in self.gpus.get((node, index), ())]

    def latest(self) -> list[tuple[str, dict]]:
        """Each GPU's latest sample with its node, by node then index."""
        return [(node, self.gpus[(node, index)][-1]) for node, index in sorted(self.gpus)]


def sparkline(values: list, top: float | None = None, width: int | None = None) -> str:
    """One bar per value, scaled to `top` (else the largest value); '·' where unknown.
    With `width`, the last `width` values, padded on the left to that width."""
    if width is not None:
        values = list(values)[-width:]
    known = [v for v in values if v is not None]
    scale = top if top else max(known, default=0.0)
    bars = []
    for v in values:
        if v is None:
            bars.append(UNKNOWN_BAR)
        else:
            level = round(v / scale * (len(BARS) - 1)) if scale > 0 else 0
            bars.append(BARS[min(len(BARS) - 1, max(0, level))])
    line = "".join(bars)
    return line.rjust(width) if width is not None else line


def gib(mib: float | None) -> str:
    return "n/a" if mib is None else f"{mib / 1024:.1f}"


def util_text(gpu: dict) -> str:
    return "n/a" if gpu.get("util") is None else f"{gpu['util']:.0f}%"


def memory_text(gpu: dict) -> str:
    used, total = gpu.get("mem_used"), gpu.get("mem_total")
    if used is None:
        return f"n/a of {gib(total)} GiB" if total is not None else "n/a"
    return f"{gib(used)}/{gib(total)} GiB" if total is not None else f"{gib(used)} GiB"


def power_text(gpu: dict) -> str:
    return "n/a" if gpu.get("power") is None else f"{gpu['power']:.0f} W"


# Each figure: its key in a sample, what its sparkline is scaled to, its latest value's text.
FIGURES = (("util", lambda gpu: 100.0, util_text),
           ("mem_used", lambda gpu: gpu.get("mem_total"), memory_text),
           ("power", lambda gpu: None, power_text))


def figures(history: History, gpu: dict, node: str = "", width: int | None = None) -> list[str]:
    """The GPU's utilisation, memory and power, each as its sparkline and latest value
    (the value alone until there are two samples, or with `width`, a fixed-width line)."""
    drawn = []
    for key, top, text in FIGURES:
        series = history.series(gpu["index"], key, node)
        if width is not None or len(series) > 1:
            drawn.append(f"{sparkline(series, top(gpu), width)} {text(gpu)}")
        else:
            drawn.append(text(gpu))
    return drawn
