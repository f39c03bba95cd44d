"""Scripts that run on the rented (or the user's own) machine, not in gpubench.

Each is standard library only and self-contained: it is shipped as text (over SSH,
base64 in one command line, or `python -c SOURCE`) to a machine that has Python,
and torch, but no gpubench. Nothing here imports anything of gpubench's, and the
controller reads their source with `script_path` rather than calling into them,
except where the same code also runs on this machine (the local launcher's file
guard and load watch, the tests).

- watchdog.py         stops a machine at its --max-hours deadline (lifecycle/watchdog.py)
- preflight_probe.py  the preflight gate's measurements (lifecycle/preflight.py)
- cluster_probe.py    a member's route to the head and its interconnect (launch/cluster.py)
- stop_tagged.py      stops a run's processes by the tag in their environment
- leases.py           a sweep's lease on a machine, which the watchdog respects
- machine_load.py     how busy the machine was around a run
- workdir_guard.py    what a user's script left or changed in its working directory
- python_env.py       the machine's python: its torch stack held, PEP 668, uv (remote/deps.py)
- gpu_top.py          each GPU's use and the processes on it, ghosts found (cli/top_cmd.py)
"""

from __future__ import annotations

from pathlib import Path


def script_path(name: str) -> Path:
    """The file of the on-host script `name` ("watchdog"), to ship or run."""
    path = Path(__file__).with_name(f"{name}.py")
    if not path.is_file():
        raise FileNotFoundError(path)
    return path
