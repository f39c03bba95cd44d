"""Where API keys come from, in order: the provider's environment variable, the
official tool's credential file, then gpubench's own config.toml:

    [lambda]
    api_key = "..."

A key is only ever returned to the adapter that puts it in a header; it is never
printed, logged, or passed on a command line.
"""

from __future__ import annotations

import os
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.providers.common import MissingKeyError


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _lambda_file(path: Path) -> str | None:
    # SkyPilot's ~/.lambda_cloud/lambda_keys: lines "api_key = KEY".
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "api_key":
            return value.strip().strip('"')
    return None


def _plain_file(path: Path) -> str | None:
    return path.read_text().strip() or None


def _runpod_file(path: Path) -> str | None:
    data = tomllib.loads(path.read_text())
    section = data.get("default", data)
    if not isinstance(section, dict):   # `default = "x"`: no key here; try the next source
        return None
    key = section.get("api_key") or section.get("apikey")
    return (key.strip() or None) if isinstance(key, str) else None


def _official_files(provider: str) -> list[tuple[Path, callable]]:
    home = Path.home()
    if provider == "lambda":
        return [(home / ".lambda_cloud" / "lambda_keys", _lambda_file)]
    if provider == "vast":
        return [(_xdg_config() / "vastai" / "vast_api_key", _plain_file),
                (home / ".config" / "vastai" / "vast_api_key", _plain_file),
                (home / ".vast_api_key", _plain_file)]
    if provider == "runpod":
        return [(home / ".runpod" / "config.toml", _runpod_file)]
    return []


ENV_VARS = {"lambda": "LAMBDA_API_KEY", "vast": "VAST_API_KEY", "runpod": "RUNPOD_API_KEY"}


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


def api_key(provider: str) -> str:
    """The first key found for `provider`, or MissingKeyError naming where to put one."""
    env = ENV_VARS.get(provider, f"{provider.upper()}_API_KEY")
    if os.environ.get(env, "").strip():
        return os.environ[env].strip()
    for path, reader in _official_files(provider):
        try:
            if path.is_file():
                key = reader(path)
                if key:
                    return key
        except (OSError, ValueError, tomllib.TOMLDecodeError):
            continue  # an unreadable tool file falls through to the next source
    section = load_config().get(provider)
    if isinstance(section, dict) and str(section.get("api_key", "")).strip():
        return str(section["api_key"]).strip()
    raise MissingKeyError(provider, "credentials",
                          f"set {env}, or api_key under [{provider}] in "
                          f"{paths.config_dir() / 'config.toml'}")
