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
from typing import Callable, Literal, Protocol

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.providers.common import MissingKeyError

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
    """gpubench's config.toml, or a key in it, cannot be used."""


def config_path() -> Path:
    return paths.config_dir() / "config.toml"


def load_config() -> dict:
    """config.toml as a dict ({} when there is none). Whatever is wrong with the file
    (a directory, no permission, not UTF-8, not TOML) is one ConfigError line naming it."""
    path = config_path()
    if not path.exists():
        return {}
    try:
        text = path.read_bytes().decode("utf-8")
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                          f"{e.start}); save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def config_section(name: str) -> dict | None:
    """[name] of config.toml (None when absent); anything but a section is a ConfigError."""
    section = load_config().get(name)
    if section is None or isinstance(section, dict):
        return section
    raise ConfigError(f"{config_path()}: '{name}' must be a section ([{name}]), "
                      f"not a {type(section).__name__}")


def _config_key(provider: str) -> str | None:
    """api_key under [provider] in config.toml; a section or key of the wrong type is an error."""
    section = config_section(provider)
    if section is None:
        return None
    key = section.get("api_key")
    if key is None:
        return None
    if not isinstance(key, str):
        raise ConfigError(f"{config_path()}: api_key under [{provider}] must be a string in quotes, "
                          f"not a {type(key).__name__}")
    return key.strip() or None


def _usable(key: str, source: str) -> str:
    """An API key travels in an HTTP header: printable ASCII only. Anything else is a
    broken copy-paste, said here instead of failing inside the HTTP client."""
    if not all(33 <= ord(c) < 127 for c in key):
        raise ConfigError(f"{source}: the API key has characters an API key cannot hold "
                          "(spaces, accents or control characters); paste it again")
    return key


class Keyed(Protocol):
    """What this module reads of a provider's registry entry (registry.ProviderEntry),
    named here so that the registry imports this module and not the other way round."""

    name: str
    key_var: str
    key_files: tuple[KeyFile, ...]


def api_key(entry: Keyed) -> str:
    """The first key found for the provider, or MissingKeyError naming where to put one."""
    found = _find_key(entry)
    if found is None:
        raise MissingKeyError(entry.name, "credentials", where_to_put_key(entry))
    key, source = found
    return _usable(key, source)


def key_source(entry: Keyed) -> str | None:
    """Where the provider's key would be read from ($VAR, a file, config.toml), or
    None when there is none: for saying whether a key is set, never what it is."""
    found = _find_key(entry)
    return None if found is None else found[1]


def where_to_put_key(entry: Keyed) -> str:
    return (f"set {entry.key_var}, or api_key under [{entry.name}] in "
            f"{paths.config_dir() / 'config.toml'}")


def _find_key(entry: Keyed) -> tuple[str, str] | None:
    """(key, where it was found) from the first source that has one."""
    if os.environ.get(entry.key_var, "").strip():
        return os.environ[entry.key_var].strip(), f"${entry.key_var}"
    for key_file in entry.key_files:
        path = key_file.path()
        try:
            if path.is_file():
                key = key_file.read(path)
                if key:
                    return key, str(path)
        except (OSError, ValueError, tomllib.TOMLDecodeError):
            continue  # an unreadable tool file falls through to the next source
    key = _config_key(entry.name)
    if key:
        return key, f"{config_path()} [{entry.name}]"
    return None
