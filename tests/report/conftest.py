"""Fixtures: a results directory of hand-made records, and `gpubench` run in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.cli import main

from .helpers import scaling_records, write_store


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch) -> Path:
    """The column cache lives in the state directory: a fresh one per test."""
    path = tmp_path / "state"
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(path))
    return path


@pytest.fixture
def store(tmp_path) -> Path:
    return write_store(tmp_path / "results", scaling_records())


@pytest.fixture
def cli(capsys):
    """cli('report', ...) -> (exit code, stdout, stderr)."""
    def run(*args: str) -> tuple[int, str, str]:
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run
