"""Each run of a user's script starts from the same files: what a run creates in
its working directory is moved aside, a file it changes is reported, gpubench's
own paths and shared directories are left alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpubench.onhost import workdir_guard


def test_what_a_run_creates_is_moved_aside_and_what_it_changes_is_named(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "train.log").write_text("old\n")
    (tmp_path / "results").mkdir()
    before = workdir_guard.snapshot(tmp_path, [tmp_path / "results"])
    # the run: a checkpoint, a folder of them, a log rewritten, a cache, gpubench's own record
    (tmp_path / "snapshot.pt").write_bytes(b"weights")
    (tmp_path / "ckpt" / "epoch1").mkdir(parents=True)
    (tmp_path / "ckpt" / "epoch1" / "model.pt").write_bytes(b"w")
    (tmp_path / "train.log").write_text("new, longer\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "results" / "run.jsonl").write_text("{}\n")
    found = workdir_guard.settle(tmp_path, before, "r1-2gpu", [tmp_path / "results"])
    assert found["watched"] and found["created"] == ["ckpt", "snapshot.pt"]
    assert found["changed"] == ["train.log"]
    kept = tmp_path / workdir_guard.KEEP_DIR / "r1-2gpu"
    assert found["kept_in"] == str(kept)
    assert (kept / "snapshot.pt").read_bytes() == b"weights"
    assert (kept / "ckpt" / "epoch1" / "model.pt").exists()
    assert not (tmp_path / "snapshot.pt").exists() and not (tmp_path / "ckpt").exists()
    assert (tmp_path / "results" / "run.jsonl").exists()  # gpubench's own: left alone
    # the next run starts as the first did; the folder of moved files is not the run's
    again = workdir_guard.snapshot(tmp_path, [tmp_path / "results"])
    assert workdir_guard.settle(tmp_path, again, "r2", [tmp_path / "results"])["created"] == []


def test_shared_and_huge_directories_are_not_watched(tmp_path, monkeypatch):
    assert workdir_guard.unwatched("/tmp") and workdir_guard.unwatched(Path.home())
    assert workdir_guard.snapshot("/tmp") is None
    assert workdir_guard.settle("/tmp", None, "x") == {"watched": False, "created": [], "changed": []}
    monkeypatch.setattr(workdir_guard, "MAX_ENTRIES", 3)
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    assert workdir_guard.snapshot(tmp_path) is None


def test_the_same_source_runs_on_a_remote_machine(tmp_path):
    """python -c SOURCE snapshot / settle, as the SSH launcher runs it."""
    source = Path(workdir_guard.__file__).read_text()
    (tmp_path / "runs").mkdir()
    snap = tmp_path / "runs" / "x.snap"

    def run(*args: str) -> str:
        out = subprocess.run([sys.executable, "-c", source, *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    run("snapshot", ".", str(snap), "runs")
    (tmp_path / "snapshot.pt").write_text("w")
    (tmp_path / "runs" / "x.json").write_text("{}")  # the record, in gpubench's folder
    line = run("settle", ".", str(snap), "keep", "runs")
    assert line.startswith(workdir_guard.MARK)
    found = json.loads(line[len(workdir_guard.MARK):])
    assert found["created"] == ["snapshot.pt"] and found["changed"] == []
    assert (tmp_path / workdir_guard.KEEP_DIR / "keep" / "snapshot.pt").exists()
