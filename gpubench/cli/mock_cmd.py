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
                         "503, slow, no-capacity, never-boots, ssh-refuses, dies, terminate-lies, "
                         "hide-from-list, bad-host, node-dies (--netns only).")] = "",
    netns: Annotated[Optional[bool], typer.Option(
        "--netns/--loopback", help="Put each instance in a network namespace of its own on a bridge "
                                   "the mock makes (its own address, sshd on port 22; needs root), or "
                                   "serve every instance on a port of 127.0.0.1 (the default; "
                                   "GPUBENCH_MOCK_NETNS=1 makes --netns the default).")] = None,
) -> None:
    """Serve the three provider APIs; print `export` lines that point gpubench at them."""
    from gpubench.mock import NETNS, MockCloud, netns_requested   # heavy imports only when the command runs
    from gpubench.paths import state_dir

    state = state if state is not None else state_dir() / "mock"
    want_netns = netns_requested() if netns is None else netns

    cloud = MockCloud.start(state_dir=state, boot_delay=boot_delay, faults=faults, port=port,
                            netns=want_netns)
    done = threading.Event()

    def _stop(signum, frame) -> None:
        done.set()

    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        for name, value in cloud.env().items():
            print(f"export {name}={value}")
        if cloud.mode_note:
            print(f"# {cloud.mode_note}", file=sys.stderr)
        where = (f"network namespaces on bridge {cloud.engine.network.bridge} ({cloud.engine.network.cidr})"
                 if cloud.mode == NETNS else "loopback ports of 127.0.0.1")
        print(f"# mock cloud on {cloud.base_url} in {cloud.mode} mode (instances on {where}); "
              f"state in {Path(state).expanduser()}; Ctrl-C stops it and every instance's sshd",
              file=sys.stderr)
        sys.stdout.flush()
        while not done.wait(0.5):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        cloud.stop()


def register(app: typer.Typer) -> None:
    app.add_typer(mock_app, name="mock")
