"""`gpubench ssh NAME [-- CMD]`: log in to (or run CMD on) an instance."""

from __future__ import annotations

import subprocess
from typing import Annotated, List, Optional

import typer

from gpubench.cli.options import InstanceNameArg


def ssh(
    name: InstanceNameArg,
    command: Annotated[Optional[List[str]], typer.Argument(
        metavar="[-- CMD]...", help="Run CMD instead of a login shell.")] = None,
) -> None:
    """Open an SSH session to NAME through gpubench's ssh_config (a cluster's head, or
    member i with NAME:i)."""
    from gpubench.errors import GpubenchError
    from gpubench.store.ledger import Ledger
    from gpubench.lifecycle.sshconfig import login_command
    from gpubench.remote.cluster import member_instance

    with Ledger() as ledger:
        argv = login_command(ledger, member_instance(ledger, name), command)
    try:
        code = subprocess.call(argv)
    except OSError as e:
        raise GpubenchError(f"cannot run ssh: {e}") from None
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("ssh", context_settings={"allow_interspersed_args": False})(ssh)
