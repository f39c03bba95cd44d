"""A command's value for a setting of [defaults]: the flag when the user gave it,
else gpubench.defaults' environment > config.toml > built-in. Unknown keys in
[defaults] are one warning per command.

A flag whose default is None was given when its value is not None; one with a
real default (--disk 100) is told apart by the command's context (typer passes it
to a parameter annotated `typer.Context`), which knows where each value came from."""

from __future__ import annotations

import typer

from gpubench.cli.render import err

_META = "gpubench.defaults"


def flag_or_default(key: str, value, ctx: typer.Context | None = None):
    """`value` when its flag was given (its parameter is named `key`), else the
    configured default."""
    return flags_or_defaults(ctx, **{key: value})[0]


def flags_or_defaults(ctx: typer.Context | None = None, **values) -> tuple:
    """flag_or_default for each keyword, in the order given:
    `disk, image = flags_or_defaults(ctx, disk=disk, image=image)`."""
    from gpubench import defaults

    chosen = []
    for key, value in values.items():
        if _given(ctx, key, value):
            chosen.append(value)
        else:
            chosen.append(defaults.resolve(key, _section(ctx)).value)
    return tuple(chosen)


def _given(ctx: typer.Context | None, key: str, value) -> bool:
    if ctx is None or key not in ctx.params:
        return value is not None
    source = ctx.get_parameter_source(key)
    return source is not None and source.name != "DEFAULT"



def _section(ctx: typer.Context | None) -> dict:
    """[defaults], read once per command; its unknown keys said then."""
    meta = ctx.meta if ctx is not None else {}
    if _META not in meta:
        from gpubench import defaults

        values = defaults.section()
        if (warning := defaults.unknown_warning(values)) is not None:
            err(f"warning: {warning}")
        meta[_META] = values
    return meta[_META]
