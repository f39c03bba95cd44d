"""Asking before spending money or terminating machines, the same way everywhere."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, ContextManager

import typer

from gpubench.cli.render import err
from gpubench.errors import UsageError


def confirm_or_stop(question: str, refusal_without_tty: str, said_on_no: str | None = None,
                    yes: bool = False) -> None:
    """Return when the user agrees (or `yes`, from --yes). With no terminal to ask on,
    a UsageError saying `refusal_without_tty` (which tells the user to pass --yes);
    on "no", `said_on_no` on stderr (if given) and exit 1."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(refusal_without_tty)
    if not typer.confirm(question, default=False):
        if said_on_no:
            err(said_on_no)
        raise typer.Exit(1)


def rent_question(offer, provider: str, tail: str = "") -> str:
    """"Rent 1x RTX 3090 (24 GB) at $0.16/h on vast?": what is rented, for how much,
    named in the question itself."""
    from gpubench.lifecycle.consent import describe_machine
    from gpubench.providers.gpus import offer_vram_gb

    machine = describe_machine(offer.gpu_count, offer.gpu_name, offer.price_per_hour, offer_vram_gb(offer))
    return f"Rent {machine} on {provider}{tail}?"


def ask(question: str) -> bool:
    """A yes/no question in the middle of a command (default no)."""
    return typer.confirm(question, default=False)


def asker(yes: bool, around: Callable[[], ContextManager] = contextlib.nullcontext
          ) -> Callable[[str], bool] | None:
    """How a command asks a yes/no question in the middle of its work (default no), each
    asked inside `around()` (a live display paused, the prompt off a JSON stdout); None
    where no one is to be asked: under --yes, or with no terminal to ask on."""
    if yes or not sys.stdin.isatty():
        return None

    def asking(question: str) -> bool:
        with around():
            return ask(question)
    return asking
