"""The flags each SCHEMES launcher declares (launch/schemes.py), added to a
command's signature for typer, and what the user gave of them handed to the
command as one `launcher_flags` dict (name -> value; flags left at their default
are not in it). A new launcher's flags appear in `gpubench run --help` with no
change here."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Callable, List, Optional

import typer

from gpubench.launch.schemes import SCHEMES, LauncherFlag

PARAMETER = "launcher_flags"


def declared() -> list[LauncherFlag]:
    """Every scheme's flags, in SCHEMES order."""
    return [flag for scheme in SCHEMES.values() for flag in scheme.flags]


def with_launcher_flags(before: str) -> Callable[[Callable], Callable]:
    """Add the launchers' flags to a command, in --help just before its parameter
    `before`; the command takes them as `launcher_flags`."""
    def add(command: Callable) -> Callable:
        flags = declared()
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != PARAMETER]
        at = next(i for i, p in enumerate(own) if p.name == before)
        extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                   annotation=_annotation(f)) for f in flags]
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        parameters[at:at] = extra

        @functools.wraps(command)
        def with_flags(*args, **kwargs):
            given = {}
            for flag in flags:
                value = kwargs.pop(flag.name, flag.default)
                if value != flag.default and value not in (None, [], ()):
                    given[flag.name] = value
            return command(*args, **kwargs, **{PARAMETER: given})

        with_flags.__signature__ = signature.replace(parameters=parameters)
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags
    return add


def _annotation(flag: LauncherFlag):
    option = typer.Option(flag.flag, help=flag.help, **({"min": flag.min} if flag.min is not None else {}))
    kind = List[str] if flag.kind is list else flag.kind
    if flag.default is None:
        kind = Optional[kind]
    return Annotated[kind, option]
