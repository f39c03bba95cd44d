"""A machine's python for the project tests: it imports this test run's torch but has
none of a project's packages, and installs go into a directory of its own (a virtual
environment whose path reaches this run's site-packages through a .pth file, as an
image's torch reaches a python that did not install it). And the project's packages
as wheels written here, so nothing is fetched."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path


def machine_python(directory: Path) -> Path:
    """A python that imports this run's torch (and pip), and installs into `directory`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True,
                   timeout=120, stdin=subprocess.DEVNULL)
    python = directory / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(purelib) / "test_run_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    return Path(out)


def wheel(directory: Path, name: str, version: str, source: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module `name` with `source`, written by hand."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}.py": source.encode(),
             f"{dist}/METADATA": ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                  + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
