"""A results directory of hand-made records."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import scaling_records, write_store


@pytest.fixture
def store(tmp_path) -> Path:
    return write_store(tmp_path / "results", scaling_records())
