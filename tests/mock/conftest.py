"""Fixtures for the mock cloud tests: a running MockCloud per test, SSH key pairs, and an API
client per provider."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpubench.mock import MockCloud
from tests.mock.helpers import Api


@pytest.fixture(scope="session")
def keys(tmp_path_factory) -> dict[str, Path]:
    """Two ed25519 pairs: 'good' is registered with providers, 'other' never is."""
    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("good", "other"):
        path = d / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                       check=True, timeout=30)
        out[name] = path
    return out


@pytest.fixture
def cloud(tmp_path):
    with MockCloud.start(state_dir=tmp_path / "state") as c:
        yield c


@pytest.fixture
def lam(cloud) -> Api:
    e = cloud.env()
    return Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})


@pytest.fixture
def vast(cloud) -> Api:
    e = cloud.env()
    return Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})


@pytest.fixture
def rp(cloud) -> Api:
    e = cloud.env()
    return Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"})
