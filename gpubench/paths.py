"""Where gpubench keeps its files. Tests point both at temporary directories.

- config dir ($GPUBENCH_CONFIG_DIR, else $XDG_CONFIG_HOME/gpubench, else ~/.config/gpubench):
  config.toml (API keys as a last resort), ssh/ (gpubench's own key pair, 0600),
  known_hosts (host keys pinned on first contact), ssh_config (entries `gpubench-NAME`).
- state dir ($GPUBENCH_STATE_DIR, else $XDG_STATE_HOME/gpubench, else ~/.local/state/gpubench):
  ledger.sqlite (every instance ever launched), other run-time state.
"""

from __future__ import annotations

import os
from pathlib import Path


def _base(env: str, xdg: str, fallback: str) -> Path:
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser()
    if os.environ.get(xdg):
        return Path(os.environ[xdg]).expanduser() / "gpubench"
    return Path.home() / fallback / "gpubench"


def config_dir(create: bool = False) -> Path:
    path = _base("GPUBENCH_CONFIG_DIR", "XDG_CONFIG_HOME", ".config")
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def state_dir(create: bool = False) -> Path:
    path = _base("GPUBENCH_STATE_DIR", "XDG_STATE_HOME", ".local/state")
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def ssh_key_path() -> Path:
    """gpubench's own ed25519 private key; the public key is beside it with .pub."""
    return config_dir() / "ssh" / "id_ed25519"


def known_hosts_path() -> Path:
    return config_dir() / "known_hosts"


def ssh_config_path() -> Path:
    return config_dir() / "ssh_config"


def ledger_path() -> Path:
    return state_dir() / "ledger.sqlite"
