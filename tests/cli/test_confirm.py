"""Asking before renting or terminating: --yes skips it, no terminal is a usage error
naming --yes, and "no" stops with exit 1."""

from __future__ import annotations

import pytest
import typer

from gpubench.cli import confirm
from gpubench.errors import UsageError


class _Stdin:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_yes_asks_nothing(monkeypatch):
    monkeypatch.setattr(confirm.sys, "stdin", _Stdin(False))
    confirm.confirm_or_stop("Rent?", "not rented: pass --yes", yes=True)


def test_without_a_terminal_it_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(confirm.sys, "stdin", _Stdin(False))
    with pytest.raises(UsageError, match="^not rented: pass --yes$"):
        confirm.confirm_or_stop("Rent?", "not rented: pass --yes")


@pytest.mark.parametrize("answer", [True, False])
def test_the_answer_decides(monkeypatch, capsys, answer):
    monkeypatch.setattr(confirm.sys, "stdin", _Stdin(True))
    asked = []
    monkeypatch.setattr(confirm.typer, "confirm", lambda q, default: asked.append((q, default)) or answer)
    if answer:
        confirm.confirm_or_stop("Rent?", "-", said_on_no="nothing rented")
    else:
        with pytest.raises(typer.Exit) as e:
            confirm.confirm_or_stop("Rent?", "-", said_on_no="nothing rented")
        assert e.value.exit_code == 1
    assert asked == [("Rent?", False)]
    assert capsys.readouterr().err == ("" if answer else "nothing rented\n")
