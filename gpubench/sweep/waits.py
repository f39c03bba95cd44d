"""A run's long waits, said as they happen: a run that has printed nothing for a
while says so (once per interval, the run going on), and a run that hit --timeout
does not silently spend the same limit at every larger count after it.

Both speak through the sweep's echo, as its other notes do; neither asks anything
itself: the question after a timeout is put to whoever the sweep was given (the
command line asks at a terminal), and with no one to ask the larger counts are
skipped in one line.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from gpubench.format import spoken
from gpubench.launch.base import SweepPoint

QUIET_AFTER_S = 300.0  # "no output for 5 min", then 10 min, ...
TIMEOUT_KIND = "timeout"  # Failure.kind of a run stopped at --timeout (launch.failures)


def duration_text(seconds: float) -> str:
    """'0.5 s', '45 s', '5 min', '1 h', '1 h 30 min': a limit or a silence as people say it."""
    if seconds < 120:
        return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def clock_at(epoch: float, now: float | None = None) -> str:
    """'12:41' in local time; with the date where it is not today's."""
    at, today = time.localtime(epoch), time.localtime(time.time() if now is None else now)
    same_day = (at.tm_year, at.tm_yday) == (today.tm_year, today.tm_yday)
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", at)


def quiet_notice(label: str, silent_s: float, timeout_s: float, stops_at: float) -> str:
    """'mnist-ddp at 2 gpus: no output for 5 min (the run goes on; --timeout 30 min stops
    it at 12:41)'; `stops_at` is the wall-clock time (epoch seconds) of the deadline."""
    return (f"{label}: no output for {duration_text(silent_s)} (the run goes on; "
            f"--timeout {duration_text(timeout_s)} stops it at {clock_at(stops_at)})")


class QuietWatch:
    """Says `label`'s run has been quiet after every `quiet_after` seconds without a line
    (`heard` takes each line): one notice per interval, none while lines come. A thread
    that sleeps on an event until the next notice is due (a bounded wait, never a
    poll); use it as a context manager around the run. quiet_after <= 0: silent."""

    def __init__(self, echo: Callable[[str], None], label: str, quiet_after: float,
                 timeout: float) -> None:
        self._echo, self._label = echo, label
        self._quiet_after, self._timeout = quiet_after, timeout
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._said = 0  # notices since the last line
        self._stop = threading.Event()
        self._stops_at = time.time() + timeout
        self._thread = threading.Thread(target=self._watch, name="run-quiet", daemon=True)

    def __enter__(self) -> "QuietWatch":
        if self._quiet_after > 0:
            self._last, self._stops_at = time.monotonic(), time.time() + self._timeout
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def heard(self) -> None:
        """A line came: the silence starts again."""
        with self._lock:
            self._last, self._said = time.monotonic(), 0

    def _due(self) -> float:
        """When the next notice is due (monotonic)."""
        with self._lock:
            return self._last + self._quiet_after * (self._said + 1)

    def _watch(self) -> None:
        while True:
            due = self._due()
            if self._stop.wait(max(due - time.monotonic(), 0.0)):
                return
            with self._lock:  # a line may have come while it slept: due again, later
                silent = self._quiet_after * (self._said + 1)
                if time.monotonic() < self._last + silent:
                    continue
                self._said += 1
            self._echo(quiet_notice(self._label, silent, self._timeout, self._stops_at))


@dataclass(frozen=True)
class TimedOut:
    """A run that hit --timeout at `point`, and the larger counts still to run after it."""

    workload: str
    point: SweepPoint
    timeout: float
    ahead: tuple[SweepPoint, ...]

    def counts(self) -> str:
        """'4 and 8 gpus' (each larger than one); across nodes each point in full."""
        if all(p.nodes == 1 for p in self.ahead):
            return f"{spoken([str(p.procs_per_node) for p in self.ahead], 'and')} gpus"
        return spoken([p.describe() for p in self.ahead], "and")

    def question(self) -> str:
        return (f"{self.workload} at {self.point.describe()} hit --timeout "
                f"({duration_text(self.timeout)}); run {self.counts()} with the same limit?")

    def stop_line(self) -> str:
        return (f"stopped: {self.point.describe()} hit --timeout {duration_text(self.timeout)}; "
                f"{self.counts()} not run (a larger count rarely runs faster per step; "
                "raise --timeout to try)")

    def skipped(self, point: SweepPoint) -> str:
        """Why `point` was not run, as the sweep keeps it (SweepResult.dropped)."""
        return (f"skipping {point.describe()}: {self.point.describe()} hit --timeout "
                f"{duration_text(self.timeout)}")


def larger_ahead(point: SweepPoint, later: list[SweepPoint], out: set[SweepPoint]) -> tuple[SweepPoint, ...]:
    """The counts larger than `point` among those still to run (`later`, in order, with
    repeats), less those already out of the sweep (`out`: failed, dropped)."""
    ahead: list[SweepPoint] = []
    for p in later:
        if p.world_size > point.world_size and p not in out and p not in ahead:
            ahead.append(p)
    return tuple(ahead)


def goes_on(timed_out: TimedOut, ask: Callable[[str], bool] | None) -> bool:
    """Whether the larger counts run with the same limit: only when someone was asked
    and said yes (`ask`: None under --yes or without a terminal)."""
    return bool(timed_out.ahead) and ask is not None and ask(timed_out.question())
