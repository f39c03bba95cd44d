"""`gpubench mock serve`: the mock cloud in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

mock_app = typer.Typer(help="Run the built-in mock cloud (Lambda, Vast.ai, RunPod on one local server).",
                       no_args_is_help=True)


@mock_app.command("serve")
def serve(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0: any free port).")] = 0,
    state: Annotated[Optional[Path], typer.Option(
        "--state", help="Directory for the mock's sqlite state and instance homes "
                        "(default: <gpubench state dir>/mock).")] = None,
    boot_delay: Annotated[float, typer.Option(
        "--boot-delay", help="Seconds an instance takes to boot.")] = 0.0,
    faults: Annotated[str, typer.Option(
        "--faults", help="Faults to inject: comma-separated [PROVIDER:]FAULT[=VALUE][@N], e.g. "
                         "'vast:429,lambda:no-capacity,runpod:503@2'. Faults: bad-key, 429, 500, "
                         "503, slow, no-capacity, never-boots, ssh-refuses, dies, terminate-lies.")] = "",
) -> None:
    """Serve the three provider APIs; print `export` lines that point gpubench at them."""
    from gpubench.mock import MockCloud   # heavy imports only when the command runs
    from gpubench.paths import state_dir

    state = state if state is not None else state_dir() / "mock"

    cloud = MockCloud.start(state_dir=state, boot_delay=boot_delay, faults=faults, port=port)
    done = threading.Event()

    def _stop(signum, frame) -> None:
        done.set()

    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        for name, value in cloud.env().items():
            print(f"export {name}={value}")
        print(f"# mock cloud on {cloud.base_url}; state in {Path(state).expanduser()}; "
              f"Ctrl-C stops it and every instance's sshd", file=sys.stderr)
        sys.stdout.flush()
        while not done.wait(0.5):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        cloud.stop()


def register(app: typer.Typer) -> None:
    app.add_typer(mock_app, name="mock")
