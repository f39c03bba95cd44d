"""The defaults a user sets once instead of on every command: a flag given on the
command line wins, then an environment variable, then [defaults] in config.toml,
then gpubench's built-in value.

    [defaults]
    gpu_type = "RTX 4090"
    max_price = 1.5
    results = "~/gpubench-results"
    region = "us-east-1"

Each setting is one `Setting` in SETTINGS; `resolve` says its value and where the
value came from, which `gpubench config` shows. A key of [defaults] that is no
setting is reported by `unknown_keys` (a typo would otherwise be silently ignored);
a value of the wrong type is one ConfigError line naming the file or the variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpubench.providers.credentials import ConfigError, config_path, config_section

SECTION = "defaults"


@dataclass(frozen=True)
class Setting:
    key: str                 # under [defaults], and the command's parameter name
    flag: str                # the command-line flag that overrides it
    env: str | None          # the environment variable that overrides config.toml
    kind: type               # str, float, int or Path
    builtin: object          # when nothing sets it (None: the command decides)
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting("gpu_type", "--gpu-type", "GPUBENCH_GPU_TYPE", str, None,
            "GPU type to rent (provision, bench) [built-in: the cheapest offer]"),
    Setting("max_price", "--max-price", "GPUBENCH_MAX_PRICE", float, None,
            "highest $/h for a machine (provision, bench) [built-in: no limit]"),
    Setting("region", "--region", "GPUBENCH_REGION", str, None,
            "region or data center (provision) [built-in: any]"),
    Setting("image", "--image", "GPUBENCH_IMAGE", str, None,
            "container image (provision, bench) [built-in: gpubench's CUDA devel image]"),
    Setting("disk", "--disk", "GPUBENCH_DISK", int, 100, "disk in GB (provision, bench)"),
    Setting("remote_python", "--remote-python", "GPUBENCH_REMOTE_PYTHON", str, "python3",
            "the Python with torch on a remote machine (run, bench)"),
    Setting("results", "--results", "GPUBENCH_RESULTS", Path, Path("results"),
            "results directory (run, bench, report, logs)"),
    # Read by lifecycle/budget.py (it has no variable): listed so it is shown and known.
    Setting("budget", "--budget", None, float, None,
            "most dollars a bench may spend (bench) [built-in: none]"),
)
BY_KEY = {s.key: s for s in SETTINGS}


@dataclass(frozen=True)
class Resolved:
    setting: Setting
    value: object
    source: str              # "flag", "env" (setting.env), "config", "built-in"


def section() -> dict:
    """[defaults] of config.toml ({} when absent). A broken file, or a value of the
    wrong type under any known key, is one ConfigError: said by whichever command
    reads it first, not only by the one that uses that key."""
    values = config_section(SECTION) or {}
    for key, value in values.items():
        if key in BY_KEY:
            _typed(BY_KEY[key], value, f"{config_path()}: {key} under [{SECTION}]")
    return values


def unknown_keys(values: dict | None = None) -> list[str]:
    values = section() if values is None else values
    return sorted(k for k in values if k not in BY_KEY)


def unknown_warning(values: dict | None = None) -> str | None:
    """The one line that names [defaults] keys gpubench does not know, or None."""
    unknown = unknown_keys(values)
    if not unknown:
        return None
    return (f"{config_path()}: unknown key{'s' if len(unknown) > 1 else ''} in [{SECTION}] "
            f"ignored: {', '.join(unknown)} (known: {', '.join(BY_KEY)})")


def resolve(key: str, values: dict | None = None) -> Resolved:
    """The setting's value when no flag gives it: env > config > built-in."""
    setting = BY_KEY[key]
    if setting.env and os.environ.get(setting.env, "").strip():
        text = os.environ[setting.env].strip()
        return Resolved(setting, _parse(setting, text, f"${setting.env}"), "env")
    values = section() if values is None else values
    if key in values:
        where = f"{config_path()}: {key} under [{SECTION}]"
        return Resolved(setting, _typed(setting, values[key], where), "config")
    return Resolved(setting, setting.builtin, "built-in")


def _parse(setting: Setting, text: str, where: str):
    """An environment variable's text as the setting's type."""
    if setting.kind in (int, float):
        try:
            return _typed(setting, setting.kind(text), where)
        except ValueError:
            raise ConfigError(f"{where} must be a {_kind_name(setting)} (got {text!r})") from None
    return _typed(setting, text, where)


def _typed(setting: Setting, value, where: str):
    """A value checked against the setting's type (TOML says 1.5 or "x" for us)."""
    if setting.kind is Path:
        if isinstance(value, str) and value.strip():
            return Path(value.strip()).expanduser()
    elif setting.kind is str:
        if isinstance(value, str) and value.strip():
            return value.strip()
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        if setting.kind is int and value == int(value):
            return int(value)
        if setting.kind is float:
            return float(value)
    raise ConfigError(f"{where} must be a {_kind_name(setting)} (got {value!r})")


def _kind_name(setting: Setting) -> str:
    return {str: "non-empty string in quotes", Path: "path in quotes", int: "positive whole number",
            float: "positive number"}[setting.kind]
