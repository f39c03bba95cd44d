"""Put a standard-library script on a machine and run it, in one shell line.

The exec channel has no stdin to stream a file through, so the script travels
base64-encoded as an argument and is written atomically (a `.new` file, then a
rename) before it runs; the preflight probe and the watchdog go this way."""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

_WRITE = ("import base64,os,sys; p=os.path.expanduser(sys.argv[1]); "
          "os.makedirs(os.path.dirname(p), 0o700, exist_ok=True); "
          "open(p + '.new', 'wb').write(base64.b64decode(sys.argv[2])); os.replace(p + '.new', p)")


def write_command(python: str, remote_path: str, data: bytes) -> str:
    """`python -c WRITE remote_path B64`: the bytes written there, atomically."""
    encoded = base64.b64encode(data).decode()
    return f"{python} -c {shlex.quote(_WRITE)} {shlex.quote(remote_path)} {encoded}"


def ship_and_run(python: str, script: Path, remote_path: str, args: str = "") -> str:
    """`python -c WRITE remote_path B64 && python remote_path ARGS`; `args` is shell text
    the caller has quoted."""
    return (f"{write_command(python, remote_path, script.read_bytes())} && "
            f"{python} {remote_path}{' ' + args if args else ''}")
