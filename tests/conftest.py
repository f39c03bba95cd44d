"""Settings every test runs under, and the in-process command line.

`isolated` (autouse): gpubench never reads or writes the real home directory, config
or state here, no provider key or endpoint from this machine reaches a test, and
client retries and polls are short. `cli` runs one gpubench command in this process.
A command that must run as a real process goes through tests.helpers.run_gpubench.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

# The test processes keep what they compile (the rewritten test modules, gpubench's own)
# in __pycache__ even where PYTHONDONTWRITEBYTECODE is set: compiling every test module
# again took most of the 10 s each test worker spent collecting. The gpubench processes
# the tests start inherit the environment unchanged (and read what is kept here).
sys.dont_write_bytecode = False

from gpubench.cli import main
from gpubench.defaults import SETTINGS
from tests.helpers import QUICK_CLIENT, clear_provider_env


@dataclass(frozen=True)
class IsolatedDirs:
    """One test's directories: HOME (created, empty), and gpubench's config and state
    directories (not created: gpubench makes them when it needs them)."""

    home: Path
    config: Path
    state: Path


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory, monkeypatch) -> IsolatedDirs:
    # Beside the test's tmp_path, not in it: tests that list or fill tmp_path see only
    # what they put there.
    root = tmp_path_factory.mktemp("isolated")
    dirs = IsolatedDirs(home=root / "home", config=root / "config", state=root / "state")
    dirs.home.mkdir()
    monkeypatch.setenv("HOME", str(dirs.home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(dirs.home / ".config"))
    monkeypatch.setenv("GPUBENCH_CONFIG_DIR", str(dirs.config))
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(dirs.state))
    clear_provider_env(monkeypatch)
    for setting in SETTINGS:  # no [defaults] override from this machine's environment
        if setting.env:
            monkeypatch.delenv(setting.env, raising=False)
    for var, value in QUICK_CLIENT.items():
        monkeypatch.setenv(var, value)
    # Tables as wide as a wide terminal, whatever runs the tests (a terminal, CI, a test
    # worker): tests read what a table says; the ones about narrow terminals set their own.
    monkeypatch.setenv("COLUMNS", "200")
    return dirs


class CliResult(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """cli('report', '--format', 'json') -> (exit code, stdout, stderr) of that one
    command, run in-process through gpubench.cli.main; a run of a user's script starts
    beside it, as a user's would (it watches its working directory: never the repository)."""
    def run(*args: str) -> CliResult:
        capsys.readouterr()  # only this command's output
        scripts = [Path(p) for a in args for p in a.split(",")  # --workload a.py,b.py too
                   if p.endswith(".py") and Path(p).is_absolute()]
        if scripts:
            monkeypatch.chdir(scripts[0].parent)
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)
    return run


@pytest.hookimpl(trylast=True)  # after -m has deselected what does not run
def pytest_collection_modifyitems(config, items):
    """Files with the most slow tests first, then the files with the most tests; each
    file's tests in their own order. Under --dist loadfile a worker takes a whole file at
    a time: the long files start at once and the quick ones fill in at the end, rather
    than a long file starting when the others are nearly done (pyproject.toml passes
    --no-loadscope-reorder, so that xdist keeps this order)."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    tests = Counter(item.path for item in items)
    first_seen = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (-slow[item.path], -tests[item.path], first_seen[item.path]))
