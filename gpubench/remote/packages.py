"""Python packages a workload needs beyond torch, installed once per machine.

A workload names them in a comment near its top, e.g.

    # requires: tiktoken, datasets>=2

and the first sweep on a machine pip-installs them with the remote python; a
marker file per requirement in the remote state directory makes later sweeps
skip the install without asking pip again.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Callable

from gpubench.remote.connection import SshConnection
from gpubench.remote.errors import RemoteEnvError

_REQUIRES = re.compile(r"^#\s*requires:\s*(?P<names>.+?)\s*$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],]*(?:[<>=!~]=?[A-Za-z0-9.*+!_\-]+)?$")
HEADER_LINES = 40


def requirements(script: Path) -> list[str]:
    """The packages named in `# requires:` comments in the script's first lines."""
    names: list[str] = []
    try:
        with open(script, encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(HEADER_LINES), f):
                m = _REQUIRES.match(line.strip())
                if m:
                    names += [n for n in re.split(r"[,\s]+", m.group("names")) if n]
    except OSError:
        return []
    for name in names:
        if not _REQUIREMENT.match(name):
            raise RemoteEnvError(f"{script.name}: '{name}' in its '# requires:' line "
                                 "is not a package requirement")
    return list(dict.fromkeys(names))


def ensure_installed(conn: SshConnection, python: str, state_dir: str, packages: list[str],
                     echo: Callable[[str], None], timeout: float = 900.0) -> list[str]:
    """Install what has no marker yet; return the packages that were installed now."""
    if not packages:
        return []
    markers = {p: f"{state_dir}/installed/{_slug(p)}" for p in packages}
    q = shlex.quote
    listing = " ".join(q(m) for m in markers.values())
    _, output = conn.capture(f"for m in {listing}; do test -e \"$m\" || echo \"$m\"; done", 60)
    absent = set(output.split())
    todo = [p for p, m in markers.items() if m in absent]
    for package in todo:
        echo(f"installing {package} on {conn.target} (once per machine)")
        code, out = conn.capture(
            f"{python} -m pip install --quiet --disable-pip-version-check {q(package)} 2>&1 && "
            f"mkdir -p {q(state_dir)}/installed && touch {q(markers[package])}", timeout)
        if code != 0:
            last = (out.strip().splitlines() or [f"exit code {code}"])[-1]
            raise RemoteEnvError(f"cannot install {package} on {conn.target}: {last}")
    return todo


def _slug(requirement: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", requirement)
