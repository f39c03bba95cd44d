"""A project's requirements installed on the machine once, with the python that
imports torch, torch and its CUDA stack held exactly as the machine has them.

- Held: a constraints file pins torch, torchvision, torchaudio, triton and every
  nvidia-* distribution at the versions that python imports (onhost/python_env.py),
  so a requirement that wants another torch fails to resolve instead of pulling a
  second one; a requirement that names a held package at a version the machine does
  not have is refused before anything is installed, in one line.
- Installer: `uv pip install --python PY` where uv sees that python's torch (fast);
  `PY -m pip install` otherwise (uv does not see a torch from --system-site-packages
  or Debian's dist-packages). Never `uv run`: it would build an environment of its own
  with a second torch.
- A PEP 668 "externally managed" python (Debian's, Lambda Stack's), or one whose
  site-packages this user cannot write, gets a virtual environment with
  --system-site-packages under the state directory; the runs then use its python.
- Once per machine and requirement set: a marker named by the set's hash (its lines,
  the python) holds the python the runs use; the second sweep installs nothing. The
  installer's whole output is kept in a log beside the marker and handed back for
  the sweep's logs.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench.errors import GpubenchError
from gpubench.onhost import python_env
from gpubench.project import Requirements, held_conflicts
from gpubench.remote.connection import SshConnection
from gpubench.remote.ship import write_command

PROBE = Path(python_env.__file__).read_text()
INSTALL_TIMEOUT_S = 1800.0
VENV = "venv"  # under the state directory: for a python pip may not write to


class DependencyError(GpubenchError):
    """The project's requirements cannot be installed on the machine; nothing was run."""


@dataclass(frozen=True)
class PythonFacts:
    """What onhost/python_env.py said of a python on the machine."""

    executable: str
    held: dict
    externally_managed: bool
    in_venv: bool
    site_writable: bool
    uv: str | None
    uv_sees_torch: bool
    pip: bool

    @property
    def needs_venv(self) -> bool:
        return not self.in_venv and (self.externally_managed or not self.site_writable)

    def constraints(self) -> str:
        return "".join(f"{name}=={version}\n" for name, version in sorted(self.held.items()))


@dataclass(frozen=True)
class Installed:
    """The requirement set on the machine: the python the runs use, and what was done now
    (installer None: it was there already)."""

    python: str
    installer: str | None = None
    seconds: float = 0.0
    log: tuple[str, ...] = ()


def marker_digest(requirements: Requirements, python: str) -> str:
    return hashlib.sha256(f"{requirements.digest()}\0{python}".encode()).hexdigest()[:20]


def ensure(conn: SshConnection, python: str, state_dir: str, requirements: Requirements,
           project_dir: str, echo: Callable[[str], None],
           timeout: float = INSTALL_TIMEOUT_S) -> Installed:
    """The requirement set installed for `python`, once: the marker's python when the set
    is there already, else probe, check, install (in `project_dir`, where its relative
    paths point) and mark. DependencyError (one line) when it cannot be."""
    q = shlex.quote
    digest = marker_digest(requirements, python)
    marker = f"{state_dir}/deps/{digest}.done"
    _, found = conn.capture(f"cat {q(marker)} 2>/dev/null", 60)
    kept = _json(found)
    if kept.get("python"):
        return Installed(kept["python"])
    facts = probe(conn, python)
    run_python = python
    log: list[str] = []
    if facts.needs_venv:
        why = ("is externally managed (PEP 668)" if facts.externally_managed
               else "has a site-packages this user cannot write")
        venv = f"{state_dir}/{VENV}"
        echo(f"{conn.target}: {python} {why}: installing into {venv} "
             "(--system-site-packages: it sees the machine's torch)")
        code, out = conn.capture(f"mkdir -p {q(state_dir)} && {python} -m venv --system-site-packages "
                                 f"{q(venv)} 2>&1 && cd {q(venv)} && pwd", 300)
        if code != 0:
            raise DependencyError(f"cannot make a virtual environment on {conn.target}: {_last(out, code)}")
        run_python = f"{out.strip().splitlines()[-1]}/bin/python"
        facts = probe(conn, run_python)
        log.append(f"# {python} {why}; installed into {run_python}")
    conflicts = held_conflicts(requirements, facts.held)
    if conflicts:
        raise DependencyError(f"{conflicts[0]}; nothing was installed or run")
    installer, command = install_command(facts, run_python, requirements,
                                         f"{state_dir}/deps/{digest}")
    count = len([line for line in requirements.lines if not line.startswith("-")])
    echo(f"{conn.target}: installing {count} requirement{'s' if count != 1 else ''} of "
         f"{requirements.source} with {installer}, torch held at "
         f"{facts.held.get('torch', 'none')} (once per machine)")
    writes = [write_command(python, f"{state_dir}/deps/{digest}.constraints.txt",
                            facts.constraints().encode())]
    if requirements.written:
        writes.append(write_command(python, f"{state_dir}/deps/{digest}.requirements.txt",
                                    requirements.written.encode()))
    start = time.perf_counter()
    code, out = conn.capture(" && ".join(writes) + f" && cd {q(project_dir)} && {command} 2>&1", timeout)
    seconds = time.perf_counter() - start
    log += [f"# {command}", *out.splitlines(), f"# exit code {code} after {seconds:.1f}s"]
    if code != 0:
        raise DependencyError(f"installing {requirements.source} on {conn.target} failed "
                              f"({installer}): {_last(out, code)}; no count was run")
    done = json.dumps({"python": run_python, "installer": installer, "seconds": round(seconds, 1)})
    conn.capture(write_command(python, marker, done.encode()), 60)
    echo(f"{conn.target}: installed in {seconds:.1f}s with {installer}")
    return Installed(run_python, installer, seconds, tuple(log))


def probe(conn: SshConnection, python: str) -> PythonFacts:
    code, out = conn.capture(f"{python} -c {shlex.quote(PROBE)}", 120)
    line = next((ln for ln in out.splitlines() if ln.startswith(python_env.MARK)), None)
    if line is None:
        raise DependencyError(f"cannot ask {python} on {conn.target} what it has: {_last(out, code)}")
    info = json.loads(line[len(python_env.MARK):])
    return PythonFacts(info["executable"], dict(info.get("held") or {}),
                       bool(info.get("externally_managed")), bool(info.get("in_venv")),
                       bool(info.get("site_writable")), info.get("uv"),
                       bool(info.get("uv_sees_torch")), bool(info.get("pip")))


def install_command(facts: PythonFacts, python: str, requirements: Requirements,
                    files: str) -> tuple[str, str]:
    """(installer, shell command) installing the set with the constraints file
    `files`.constraints.txt, run in the project directory: uv where it sees torch,
    pip otherwise."""
    q = shlex.quote
    home = '"$HOME"/' if not files.startswith("/") else ""
    sources = [q(requirements.path_in_project)] if requirements.path_in_project is not None else []
    if requirements.written:
        sources.append(f"{home}{q(files + '.requirements.txt')}")
    tail = (" ".join(f"-r {source}" for source in sources) + f" -c {home}{q(files + '.constraints.txt')}"
            + (" ." if requirements.install_project else ""))
    if facts.uv and facts.uv_sees_torch:
        return "uv", f"{q(facts.uv)} pip install --python {q(python)} {tail}"
    if facts.pip:
        return "pip", f"{python} -m pip install --disable-pip-version-check {tail}"
    raise DependencyError(f"{python} has no pip" + (", and uv does not see its torch (it would install "
                                                    "a second one)" if facts.uv else "")
                          + "; install pip there, or pick an image that has it")


def _json(text: str) -> dict:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _last(output: str, code: int) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {code}"
