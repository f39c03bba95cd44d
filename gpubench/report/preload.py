"""pandas, imported on a thread of its own while a sweep's runs go on, so that the table
at the end does not wait for it (0.3 to 0.4 s on a 2-core machine: a tenth of a short
run's own time, benchmarks/overhead.py command).

Only third-party modules are imported here, none of gpubench's own, which the main
thread may import meanwhile; and the main thread waits for this one (finished()) before
it imports the report itself: two threads importing the same circle of modules (pandas
has some) could each hold what the other waits for. The thread starts as the first run
starts, when gpubench has nothing left to do but wait on it, so it takes no time from
gpubench itself; its CPU counts as gpubench's, not as other work on the machine
(launch.local: machine_load.during).
"""

from __future__ import annotations

import importlib
import threading

MODULES = ("pandas",)  # the report's heavy imports (numpy with it)
WAIT_S = 60.0  # at the most, for an import that hangs (a broken install)

_started: list[threading.Thread] = []


def in_background() -> None:
    """Start importing MODULES on a daemon thread, once per process; a later import
    in the main thread waits for it (the import system's lock), or finds it done."""
    if _started:
        return
    thread = threading.Thread(target=_import_all, name="report-preload", daemon=True)
    _started.append(thread)
    thread.start()


def _import_all() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  the report imports it again and says what is wrong
            return


def finished() -> None:
    """Wait for the thread, if one was started: call before importing the report."""
    if _started:
        _started[0].join(WAIT_S)
