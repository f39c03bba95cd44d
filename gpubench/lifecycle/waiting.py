"""Every lifecycle wait polls until a deadline: one poll interval, one way to sleep,
and one way to say what a long wait is waiting for."""

from __future__ import annotations

import os
import time
from typing import Callable

# Where the lifecycle says what it is doing (progress and warnings, one line each);
# `silent` when nobody listens.
Say = Callable[[str], None]


def silent(message: str) -> None:
    pass


# A wait says what it waits for once it has lasted this long, then every REMIND_EVERY_S.
REMIND_AFTER_S = 5.0
REMIND_EVERY_S = 15.0


def poll_interval() -> float:
    """Seconds between polls of a provider or an SSH port (GPUBENCH_POLL_INTERVAL, default 2)."""
    try:
        return max(float(os.environ.get("GPUBENCH_POLL_INTERVAL", "2")), 0.01)
    except ValueError:
        return 2.0


def pause(deadline: float, poll_s: float | None = None) -> None:
    """Sleep one poll interval, or less when the deadline (a time.monotonic() value)
    comes first, so that the caller gets one last look just at the deadline."""
    poll = poll_interval() if poll_s is None else poll_s
    time.sleep(min(poll, max(deadline - time.monotonic(), 0.01)))


class Reminder:
    """Say what a wait is waiting for once it has lasted REMIND_AFTER_S, then every
    REMIND_EVERY_S: call it on every poll with the line to say."""

    def __init__(self, say: Callable[[str], None], first_s: float | None = None,
                 every_s: float | None = None) -> None:
        self.say = say
        self.every_s = REMIND_EVERY_S if every_s is None else every_s
        self.started = time.monotonic()
        self._next = self.started + (REMIND_AFTER_S if first_s is None else first_s)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        if now >= self._next:
            self.say(line)
            self._next = now + self.every_s
