"""Helpers for the mock cloud tests: poll with a deadline, ssh into an instance with the real
OpenSSH client, count an instance host's sshd processes, call an API with its auth header,
start a mock in namespace mode (or skip where this machine cannot make namespaces)."""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import requests

from gpubench.mock import NETNS, MockCloud

SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR"]


def pub(key: Path) -> str:
    return key.with_suffix(".pub").read_text().strip()


def wait_for(fn, timeout: float = 10.0, interval: float = 0.05):
    """Call fn until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
        time.sleep(interval)


def ssh(port: int, key: Path, command: str, user: str = "root", timeout: float = 30,
        host: str = "127.0.0.1") -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", *SSH_OPTS, "-i", str(key), "-p", str(port), f"{user}@{host}", command],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@contextmanager
def netns_mock_cloud(state_dir: Path, monkeypatch=None, **start) -> Iterator[MockCloud]:
    """A mock cloud in namespace mode (each instance a host of its own on the mock's bridge),
    stopped afterwards; the test is skipped, with the reason, where this machine cannot make
    network namespaces. With `monkeypatch`, gpubench is pointed at it (its endpoints and keys).
    `start`: more MockCloud.start arguments (boot_delay, faults).

        with netns_mock_cloud(tmp_path / "mock", monkeypatch) as cloud: ...
    """
    cloud = MockCloud.start(state_dir=state_dir, netns=True, **start)
    try:
        if cloud.mode != NETNS:
            pytest.skip(cloud.mode_note or "namespace mode unavailable")
        if monkeypatch is not None:
            for key, value in cloud.env().items():
                monkeypatch.setenv(key, value)
        yield cloud
    finally:
        cloud.stop()


def sshd_count(state_dir: Path) -> int:
    """sshd processes started for instances under this state dir."""
    out = subprocess.run(["pgrep", "-f", f"sshd -D -e -f {state_dir}"], capture_output=True, text=True)
    return len(out.stdout.split())


class Api:
    """A thin requests wrapper with the provider's auth header and a timeout on every call."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        self.base = base
        self.s = requests.Session()
        self.s.headers.update(headers)

    def __call__(self, method: str, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", 15)
        return self.s.request(method, self.base + path, **kw)


def clean_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    """Environment for an official client in a subprocess: its own HOME, no proxies."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(extra)
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_CACHE_HOME": str(home / ".cache"), "NO_PROXY": "127.0.0.1"})
    return env
