"""Every lifecycle wait polls until a deadline: one poll interval, one way to sleep."""

from __future__ import annotations

import os
import time


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
