"""Lifecycle tests run like the provider tests: their own config, state and home
directories, no real API keys, and short polls and backoffs."""

from __future__ import annotations

import pytest

from tests.providers.conftest import fake_api  # noqa: F401  (a scripted HTTP server, for adapter launches)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GPUBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for var in ("LAMBDA_API_KEY", "VAST_API_KEY", "RUNPOD_API_KEY", "GPUBENCH_LAMBDA_URL",
                "GPUBENCH_VAST_URL", "GPUBENCH_RUNPOD_URL", "GPUBENCH_LAMBDA_SSH_USER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUBENCH_RATE_LIMIT_SCALE", "0")
    monkeypatch.setenv("GPUBENCH_HTTP_BACKOFF", "0.01")
    monkeypatch.setenv("GPUBENCH_HTTP_TIMEOUT", "5")
    monkeypatch.setenv("GPUBENCH_POLL_INTERVAL", "0.05")
    return tmp_path
