"""What every test folder may use: where the checkout is, the settings each test runs
under, and the real `gpubench` executable run in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpubench.providers import registry

REPO = Path(__file__).resolve().parent.parent
# The console script this test run installed (the editable install in the same venv).
GPUBENCH = str(Path(sys.executable).parent / "gpubench")

# Client settings that keep provider and lifecycle waits short: no client-side rate
# limit, a 10 ms backoff between retries, a 5 s HTTP timeout, a 50 ms poll.
QUICK_CLIENT = {
    "GPUBENCH_RATE_LIMIT_SCALE": "0",
    "GPUBENCH_HTTP_BACKOFF": "0.01",
    "GPUBENCH_HTTP_TIMEOUT": "5",
    "GPUBENCH_POLL_INTERVAL": "0.05",
}


def clear_provider_env(monkeypatch) -> None:
    """No provider's key, endpoint override or setting from the machine the tests run on
    reaches a test: the list is the registry's, so a new provider is covered."""
    for var in registry.env_vars():
        monkeypatch.delenv(var, raising=False)


def _command(args: tuple[str, ...]) -> list[str]:
    return [GPUBENCH, *args]


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """The test's own environment (its isolated directories, no provider variables),
    plus `env`."""
    return {**os.environ, **(env or {})}


def run_gpubench(*args: str, cwd: Path | str = REPO, env: dict[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """`gpubench ARGS` in a child process, run to its end, output captured as text.

    For what only a real process shows: signals sent to it, the process tree it
    starts and stops, the installed entry point. Everything else runs in-process
    through the `cli` fixture."""
    return subprocess.run(_command(args), capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=_environment(env))


def start_gpubench(*args: str, cwd: Path | str = REPO, env: dict[str, str] | None = None,
                   **popen) -> subprocess.Popen:
    """`gpubench ARGS` started and left running, to be read from, signalled or killed;
    stdout and stderr are text pipes unless `popen` says otherwise."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(_command(args), text=True, cwd=cwd, env=_environment(env), **popen)
