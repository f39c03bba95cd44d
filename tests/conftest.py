"""Shared test settings: gpubench never reads or writes the real home directory here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GPUBENCH = str(Path(sys.executable).parent / "gpubench")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gpubench-home")
    monkeypatch.setenv("GPUBENCH_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(home / "state"))
    for key in ("LAMBDA_API_KEY", "VAST_API_KEY", "RUNPOD_API_KEY",
                "GPUBENCH_LAMBDA_URL", "GPUBENCH_VAST_URL", "GPUBENCH_RUNPOD_URL"):
        monkeypatch.delenv(key, raising=False)
    yield home


def cpu_env(**extra: str) -> dict[str, str]:
    """The environment for a child gpubench: small thread counts keep tests quick on 2 cores."""
    env = dict(os.environ)
    env.update(extra)
    return env
