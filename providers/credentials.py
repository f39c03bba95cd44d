"""Where API keys come from, in order: the provider's environment variable, the
official tool's credential files, then gpubench's own config.toml:

    [lambda]
    api_key = "..."

Which variable and which files belong to a provider is its registry entry's business
(registry.py); this module only knows how to look and how to read those files.

A key is only ever returned to the adapter that puts it in a header; it is never
printed, logged, or passed on a command line.
"""

from __future__ import annotations

import os
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.providers.common import MissingKeyError

if TYPE_CHECKING:
    from gpubench.providers.registry import ProviderEntry

# A reader turns a credential file's text into a key, or None when it holds none.
Reader = Callable[[Path], "str | None"]


def read_plain(path: Path) -> str | None:
    """The whole file is the key (the vastai CLI's vast_api_key)."""
    return path.read_text().strip() or None


def read_api_key_line(path: Path) -> str | None:
    """Lines of "api_key = KEY" (SkyPilot's ~/.lambda_cloud/lambda_keys)."""
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "api_key":
            return value.strip().strip('"')
    return None


def read_toml_default(path: Path) -> str | None:
    """api_key (or apikey) under [default], or at the top level (runpodctl's config.toml)."""
    data = tomllib.loads(path.read_text())
    section = data.get("default", data)
    if not isinstance(section, dict):   # `default = "x"`: no key here; try the next source
        return None
    key = section.get("api_key") or section.get("apikey")
    return (key.strip() or None) if isinstance(key, str) else None


@dataclass(frozen=True)
class KeyFile:
    """One credential file of a provider's own tool. The path is resolved when a key is
    looked up, so a changed HOME or XDG_CONFIG_HOME counts."""

    base: Literal["home", "config"]   # ~ or $XDG_CONFIG_HOME (default ~/.config)
    relative: str
    read: Reader

    def path(self) -> Path:
        if self.base == "config":
            return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / self.relative
        return Path.home() / self.relative


class ConfigError(GpubenchError):
    """gpubench's config.toml cannot be read."""


def load_config() -> dict:
    path = paths.config_dir() / "config.toml"
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None


def api_key(entry: "ProviderEntry") -> str:
    """The first key found for the provider, or MissingKeyError naming where to put one."""
    if os.environ.get(entry.key_var, "").strip():
        return os.environ[entry.key_var].strip()
    for key_file in entry.key_files:
        path = key_file.path()
        try:
            if path.is_file():
                key = key_file.read(path)
                if key:
                    return key
        except (OSError, ValueError, tomllib.TOMLDecodeError):
            continue  # an unreadable tool file falls through to the next source
    section = load_config().get(entry.name)
    if isinstance(section, dict) and str(section.get("api_key", "")).strip():
        return str(section["api_key"]).strip()
    raise MissingKeyError(entry.name, "credentials",
                          f"set {entry.key_var}, or api_key under [{entry.name}] in "
                          f"{paths.config_dir() / 'config.toml'}")
