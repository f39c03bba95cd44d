"""A project's setup command (`--setup "python prepare_data.py"`), run once per machine
after its requirements and before the first count.

It runs in the synced project (the directory the runs start in), with the
environment the runs get: `python` and `python3` are the python the runs use (a
directory of wrappers put first on PATH), and the machine's GPUs visible. What it
writes into the project stays across sweeps where the project ignores it (a data/ in
its .gitignore), since each sweep's sync mirrors the project and removes the rest. A marker named
by the command, the directory and the python keeps it from running again on that
machine; its output is streamed as it comes and kept for the sweep's logs.
"""

from __future__ import annotations

import hashlib
import shlex
import time
from dataclasses import dataclass
from typing import Callable

from gpubench.errors import GpubenchError
from gpubench.remote.connection import SshConnection
from gpubench.remote.errors import ConnectionLostError

SETUP_TIMEOUT_S = 4 * 3600.0  # a data set's download; bounded all the same
BIN = "bin"  # under the state directory: python and python3, the runs' python


class SetupError(GpubenchError):
    """The setup command failed on the machine; no count was run."""


@dataclass(frozen=True)
class SetupDone:
    ran: bool                 # False: its marker said it had run on this machine before
    seconds: float = 0.0
    log: tuple[str, ...] = ()


def marker_digest(command: str, cwd: str, python: str) -> str:
    return hashlib.sha256(f"{command}\0{cwd}\0{python}".encode()).hexdigest()[:20]


def ensure_setup(conn: SshConnection, command: str, python: str, state_dir: str, cwd: str,
                 env: dict[str, str], echo: Callable[[str], None],
                 timeout: float = SETUP_TIMEOUT_S, per: str = "machine") -> SetupDone:
    """Run `command` in `cwd` unless its marker is there; SetupError when it fails. The
    marker lives under `state_dir`: the machine's state, or its volume's (`per`), so that
    a data set a setup downloads to the volume serves every machine rented with it."""
    q = shlex.quote
    marker = f"{state_dir}/setup/{marker_digest(command, cwd, python)}.done"
    code, _ = conn.capture(f"test -e {q(marker)}", 60)
    if code == 0:
        echo(f"{conn.target}: setup already done on this {per}: {command}")
        return SetupDone(False)
    echo(f"{conn.target}: setup (once per {per}): {command}")
    bin_dir = f"{state_dir}/{BIN}"
    # wrappers, not links: a link to a virtual environment's python elsewhere loses the
    # environment (python finds its pyvenv.cfg beside the path it was started by)
    wrapper = '#!/bin/sh\\nexec "%s" "$@"\\n'  # printf's format: %s is the python's path
    links = (f"mkdir -p {q(bin_dir)} {q(state_dir)}/setup && P=$(command -v {python}) && "
             f"for n in python python3; do printf {q(wrapper)} \"$P\" > {q(bin_dir)}/$n && "
             f"chmod +x {q(bin_dir)}/$n; done && S=$(cd {q(bin_dir)} && pwd)")
    assignments = " ".join(f"{k}={q(v)}" for k, v in env.items())
    line = (f"{links} && cd {q(cwd)} && env PATH=\"$S:$PATH\" {assignments} "
            f"bash -c {q(command)} < /dev/null")
    lines: list[str] = [f"# setup: {command}"]

    def heard(text: str) -> None:
        lines.append(text)
        echo(f"[setup] {text}")

    start = time.perf_counter()
    try:
        result = conn.stream(line, heard, timeout)
    except ConnectionLostError as e:
        raise SetupError(f"setup '{command}' on {conn.target}: {e}; no count was run") from None
    seconds = time.perf_counter() - start
    lines.append(f"# exit code {result.exit_code} after {seconds:.1f}s")
    if result.timed_out or result.exit_code != 0:
        why = (f"did not finish in {timeout:.0f}s" if result.timed_out
               else f"exit code {result.exit_code}")
        last = next((ln.strip() for ln in reversed(lines[1:-1]) if ln.strip()), "no output")
        raise SetupError(f"setup '{command}' failed on {conn.target} ({why}): {last}; no count was run")
    conn.capture(f"touch {q(marker)}", 60)
    echo(f"{conn.target}: setup done in {seconds:.1f}s")
    return SetupDone(True, seconds, tuple(lines))
