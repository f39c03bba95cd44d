"""Shared test settings: gpubench never reads or writes the real home directory here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpubench.providers import registry

REPO = Path(__file__).resolve().parent.parent
GPUBENCH = str(Path(sys.executable).parent / "gpubench")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gpubench-home")
    monkeypatch.setenv("GPUBENCH_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(home / "state"))
    clear_provider_env(monkeypatch)
    yield home


def clear_provider_env(monkeypatch) -> None:
    """No provider's key, endpoint override or setting from the machine the tests run on
    reaches a test: the list is the registry's, so a new provider is covered."""
    for var in registry.env_vars():
        monkeypatch.delenv(var, raising=False)


def cpu_env(**extra: str) -> dict[str, str]:
    """The environment for a child gpubench: small thread counts keep tests quick on 2 cores."""
    env = dict(os.environ)
    env.update(extra)
    return env
