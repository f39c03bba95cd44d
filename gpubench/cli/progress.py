"""Live progress of a command's long waits: the runs of a sweep (run k of n, step i
of N, samples/s, elapsed, ETA, money spent on a rented machine, and under it every GPU
of every node the run is on, its use, memory and power as a short history, or "no GPU" on
a CPU), and anything else that takes a while (booting, SSH, rsync): the last thing said,
with a clock.

One object, `Progress`, is the command's echo: it takes every line the library
says. Lines that are sweep events (gpubench.sweep.events) feed the display; the rest
are printed as they come. On a terminal the display is a rich Live status line
under the printed lines; elsewhere, or with --quiet, it degrades to plain lines:
a step line at most every PLAIN_EVERY_S (none with --quiet).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from gpubench.cli.gpu_history import History, figures
from gpubench.sweep.events import GpuSample, RunEnded, RunStarted, RunStep

PLAIN_EVERY_S = 10.0  # a plain step line per run at most this often
REFRESH_PER_S = 4
GPU_WIDTH = 8         # samples a GPU's sparklines show live: its line fits 80 columns
RANK0 = "rank 0's"    # the GPU a progress line samples, until the nodes' own samples come
NO_GPU = "no GPU: this run is on the CPU"


@dataclass
class RunState:
    """What the display knows of the run going on."""

    started: RunStarted
    since: float                       # clock() at its start
    step: RunStep | None = None
    step_at: float = 0.0               # clock() when `step` came
    gpus: History = field(default_factory=lambda: History(GPU_WIDTH))
    nodes_sampled: bool = False        # the nodes' own GPU samples came (GpuSample)

    def watch(self, line) -> None:
        """Note what a GpuSample, or a progress line's figures (rank 0's GPU, until the
        nodes' own samples come), say of the run's GPUs."""
        if isinstance(line, GpuSample):
            if not self.nodes_sampled:
                self.gpus, self.nodes_sampled = History(GPU_WIDTH), True
            self.gpus.add({"gpus": [line.gpu]}, line.node)
        elif isinstance(line, RunStep) and not self.nodes_sampled and (
                line.gpu_util is not None or line.gpu_mem is not None):
            memory = None if line.gpu_mem is None else line.gpu_mem / (1 << 20)
            self.gpus.add({"gpus": [{"index": 0, "util": line.gpu_util, "mem_used": memory}]}, RANK0)


def gpu_lines(run: RunState) -> list[str]:
    """A line per GPU of every node the run is on, with its use, memory and power as a
    short history; "no GPU" on a CPU; none before a GPU is sampled."""
    if run.started.accelerator == "cpu":
        return [NO_GPU]
    lines = []
    for node, gpu in run.gpus.latest():
        use, memory, power = figures(run.gpus, gpu, node, GPU_WIDTH)
        name = f"{node} GPU" if node == RANK0 else f"{node} GPU {gpu['index']}".strip()
        lines.append(f"{name}  use {use}  mem {memory}" + ("" if node == RANK0 else f"  power {power}"))
    return lines


def clock_text(seconds: float | None) -> str:
    """'0:07', '12:03', '1:02:03'; '-' when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def eta_seconds(step: RunStep | None, since_step: float = 0.0) -> float | None:
    """Seconds left in the step's phase, from its pace so far (elapsed over steps),
    less the time since the step was reported."""
    if step is None or not step.elapsed or step.step < 1 or step.total < step.step:
        return None
    return max(step.elapsed / step.step * (step.total - step.step) - since_step, 0.0)


def spent_dollars(price_per_hour: float | None, seconds: float) -> float | None:
    """A rented machine's money so far: its price times the time; None when free or unknown."""
    if not price_per_hour:
        return None
    return price_per_hour * seconds / 3600.0


def status_line(run: RunState, now: float, spent_s: float, named: bool = True) -> str:
    """One line for a run: 'run 2 of 6 · mnist-ddp · 2 gpus · step 20/50 · 812.4 samples/s
    · 0:05 elapsed · ETA 0:07 · $0.01 spent · GPU 87% 1.2 GB'; from 'step' on when not
    `named` (a plain line, whose prefix names the run)."""
    return " · ".join(text for _, text in status_parts(run, now, spent_s, named))


# What a narrow line gives up first (highest first): the time elapsed (a board shows it
# in its own column), the GPU's load, then what names the run; the step, its rate, the
# ETA and the money spent stay longest.
DROP_ORDER = {"elapsed": 6, "gpu": 5, "workload": 4, "run": 3, "where": 2}


def status_parts(run: RunState, now: float, spent_s: float, named: bool = True) -> list[tuple[str, str]]:
    """status_line's parts in order, each as (what it is, its text)."""
    started, step = run.started, run.step
    parts = [("run", f"run {started.index} of {started.total}"), ("workload", started.workload),
             ("where", started.where)] if named else []
    if step is None:
        parts.append(("step", "starting"))
    else:
        warm = "warm-up " if step.phase == "warmup" else ""
        parts.append(("step", f"{warm}step {step.step}/{step.total}"))
        if step.rate is not None:
            parts.append(("rate", f"{step.rate:,.1f} {step.unit}"))
    parts.append(("elapsed", f"{clock_text(now - run.since)} elapsed"))
    if step is not None and step.phase == "measure":
        parts.append(("eta", f"ETA {clock_text(eta_seconds(step, now - run.step_at))}"))
    spent = spent_dollars(started.price_per_hour, spent_s)
    if spent is not None:
        parts.append(("spent", f"${spent:,.2f} spent"))
    if step is not None and (step.gpu_util is not None or step.gpu_mem is not None):
        gpu = "GPU"
        if step.gpu_util is not None:
            gpu += f" {step.gpu_util:.0f}%"
        if step.gpu_mem is not None:
            gpu += f" {step.gpu_mem / 1e9:.1f} GB"
        parts.append(("gpu", gpu))
    return parts


def fitted_status(parts: list[tuple[str, str]], width: int) -> str:
    """The parts joined, giving up those DROP_ORDER names (first the highest) until the
    line fits `width`."""
    kept = list(parts)
    for kind in sorted(DROP_ORDER, key=DROP_ORDER.get, reverse=True):
        if len(" · ".join(t for _, t in kept)) <= width:
            break
        kept = [p for p in kept if p[0] != kind]
    return " · ".join(t for _, t in kept)


class LiveDisplay:
    """What every live display does (the sweep's progress, the bench's board): stops
    for a question and comes back, ends with its `with`, and is an echo (a callable of
    one line). A subclass says what a line does (`say`) and what is shown (`__rich__`)."""

    def __init__(self, console: Console | None, quiet: bool, live: bool | None,
                 clock: Callable[[], float], plain_every_s: float) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.live = (self.console.is_terminal and not quiet) if live is None else live
        self.clock = clock
        self.plain_every_s = plain_every_s
        self.started_at = clock()
        self._lock = threading.RLock()
        self._live: Live | None = None

    def __enter__(self):
        if self.live:
            self._live = Live(self, console=self.console, refresh_per_second=REFRESH_PER_S,
                              transient=True, redirect_stdout=True, redirect_stderr=False)
            self._live.start()
        return self

    def say(self, line: str) -> None:
        raise NotImplementedError

    def __call__(self, line: str) -> None:
        self.say(line)

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        live, self._live = self._live, None
        if live is not None:  # outside any lock of ours: stopping renders once more
            live.stop()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The display stopped while the user is asked something, then resumed."""
        live = self._live
        if live is None:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            live.start()


class Progress(LiveDisplay):
    """The command's echo, with a live display of its long waits (see the module).

    Use it as a context manager around the work; call it (or `say`) with each line.
    Safe to call from the threads that read a run's output."""

    def __init__(self, console: Console | None = None, quiet: bool = False,
                 live: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 plain_every_s: float = PLAIN_EVERY_S,
                 on_run_start: Callable[[], None] | None = None) -> None:
        super().__init__(console, quiet, live, clock, plain_every_s)
        self.run: RunState | None = None
        self._on_run_start = on_run_start  # called as each run starts, outside the lock
        self._said = ("", self.started_at)       # the last plain line, and when
        self._plain_step_at = float("-inf")

    # ------------------------------------------------------------------ input
    def say(self, line: str) -> None:
        # The state changes under the lock; the printing comes after it, since rich's
        # Live holds its own lock while it asks for __rich__ (which takes ours).
        with self._lock:
            shown = self._take(line, self.clock())
        if isinstance(line, RunStarted) and self._on_run_start is not None:
            self._on_run_start()
        if shown is not None:
            self.console.print(shown, markup=False, highlight=False)

    def _take(self, line: str, now: float) -> str | None:
        """Note what `line` says; returns what to print, or None."""
        if isinstance(line, RunStarted):
            self.run = RunState(line, now)
            self._plain_step_at = now
            return f"{line} (run {line.index} of {line.total})"
        if isinstance(line, RunStep):
            return self._on_step(line, now)
        if isinstance(line, GpuSample):   # drawn under the run, never printed
            if self.run is not None:
                self.run.watch(line)
            return None
        if isinstance(line, RunEnded):
            self.run = None
            self._said = (str(line), now)  # what the wait before the next run follows
            return str(line)
        self._said = (str(line), now)
        return str(line)

    def _on_step(self, step: RunStep, now: float) -> str | None:
        if self.run is None:
            return None
        self.run.step, self.run.step_at = step, now
        self.run.watch(step)
        if self.live or self.quiet or now - self._plain_step_at < self.plain_every_s:
            return None
        self._plain_step_at = now
        return f"[{self.run.started.where}] {status_line(self.run, now, now - self.started_at, named=False)}"

    # ------------------------------------------------------------------ live rendering
    def __rich__(self):
        """What the live region shows now (rich calls this on every refresh)."""
        with self._lock:
            now = self.clock()
            if self.run is not None:
                return self._run_view(self.run, now)
            said, at = self._said
            if not said:
                return Text("")
            return _spinning(Text(f"{said} · {clock_text(now - at)}"))

    def _run_view(self, run: RunState, now: float):
        text = Text(status_line(run, now, now - self.started_at))
        step = run.step
        gpus = [Text(line, no_wrap=True, overflow="ellipsis") for line in gpu_lines(run)]
        if step is None or step.total < 1:
            return Group(_spinning(text), *gpus)
        bar = Table.grid()   # a row of its own: the bar alone ends no line
        bar.add_row(ProgressBar(total=step.total, completed=step.step, width=40))
        return Group(text, bar, *gpus)


def _spinning(text: Text) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_row(Spinner("dots"), text)
    return grid



def progress_for(as_json: bool, quiet: bool, on_run_start: Callable[[], None] | None = None) -> Progress:
    """The display for a command: on stdout for people, on stderr when stdout carries
    one JSON document for a program. `on_run_start`: called as each run starts (the
    command's own work done, its wait on the run begun)."""
    return Progress(Console(stderr=as_json, highlight=False, soft_wrap=True), quiet=quiet,
                    on_run_start=on_run_start)
