"""`gpubench config`: the config file, each default with where its value comes from,
and whether each provider's API key is set (never the key)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpubench.cli.options import DocumentFormatOpt
from gpubench.cli.output import output_for
from gpubench.cli.render import err



def config(fmt: DocumentFormatOpt = "table") -> None:
    """Show the config file, each default (flag > env > config > built-in) and where
    its value comes from, and which providers have an API key set."""
    from gpubench import defaults
    from gpubench.providers import credentials, registry

    output = output_for(fmt)
    path = credentials.config_path()
    values = defaults.section()          # a broken file: one line, exit 1
    unknown = defaults.unknown_keys(values)
    rows = [_default_row(defaults.resolve(s.key, values)) for s in defaults.SETTINGS]
    keys = []
    for entry in registry.entries():
        source = credentials.key_source(entry)
        keys.append({"provider": entry.name, "api_key": "set" if source else "not set",
                     "source": source or credentials.where_to_put_key(entry)})
    if output.as_json:
        if unknown:
            err(f"warning: {defaults.unknown_warning(values)}")
        output.emit({"config_file": str(path), "exists": path.is_file(), "defaults": rows,
                     "unknown_keys": unknown, "api_keys": keys})
        return
    output.say(f"config file: {path}" + ("" if path.is_file() else " (not there yet)"))
    if unknown:
        err(f"warning: {defaults.unknown_warning(values)}")
    output.say("")
    output.say("defaults (a flag wins, then the variable, then [defaults] in the config file, "
               "then the built-in value):")
    width = max(len(_shown(r["value"])) for r in rows)
    for r in rows:
        overrides = ", ".join(x for x in (r["flag"], r["env"] and f"${r['env']}") if x)
        output.say(f"  {r['key']:<14} {_shown(r['value']):<{width}}  from {r['source']:<8} ({overrides})")
    output.say("")
    output.say("API keys:")
    for k in keys:
        output.say(f"  {k['provider']:<8} {k['api_key']:<8} ({k['source']})")


def _default_row(resolved) -> dict:
    setting = resolved.setting
    value = resolved.value
    if setting.key == "image" and value is None:
        from gpubench.lifecycle.provision import DEFAULT_IMAGE

        value = DEFAULT_IMAGE
    return {"key": setting.key, "value": str(value) if isinstance(value, Path) else value,
            "source": resolved.source, "flag": setting.flag, "env": setting.env,
            "meaning": setting.meaning}


def _shown(value) -> str:
    return "-" if value is None else str(value)


def register(app: typer.Typer) -> None:
    app.command("config")(config)
