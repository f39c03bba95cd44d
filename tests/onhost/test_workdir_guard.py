"""Each run of a user's script starts from the same files: what a run creates in
its working directory is moved aside, a file it changes is reported, gpubench's
own paths (its output too: > out.log, | tee bench.log) and shared directories are
left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench.onhost import workdir_guard
from tests.helpers import start_gpubench


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


# --------------------------------------------------------------------------- gpubench's own output

def test_a_file_gpubenchs_output_goes_to_is_not_the_runs(tmp_path):
    """`gpubench run ... > out.log` in the script's directory: out.log grows all along."""
    with open(tmp_path / "out.log", "w") as out:
        own = workdir_guard.own_output(fds=(out.fileno(),))
        st = (tmp_path / "out.log").stat()
        assert own == {(st.st_dev, st.st_ino): str((tmp_path / "out.log").resolve())}
        before = workdir_guard.snapshot(tmp_path, own=own)
        out.write("[1 gpu] ok\n" * 100)
        out.flush()
        found = workdir_guard.settle(tmp_path, before, "r1", own=own)
    assert (found["created"], found["changed"]) == ([], [])
    assert (tmp_path / "out.log").exists()


def test_the_files_a_pipes_reader_writes_are_gpubenchs_own(tmp_path):
    """`gpubench run ... | tee bench.log`: the file tee writes, found from the pipe, and
    the file a reader of tee's output writes in turn (| tee a.log | cat > b.log)."""
    read_end, write_end = os.pipe()
    tee = subprocess.Popen(["tee", str(tmp_path / "bench.log")], stdin=read_end,
                           stdout=subprocess.PIPE)
    os.close(read_end)
    cat = subprocess.Popen(["sh", "-c", f"cat > {tmp_path / 'b.log'}"], stdin=tee.stdout)
    tee.stdout.close()
    try:
        deadline = time.monotonic() + 10
        while not ((tmp_path / "bench.log").exists() and (tmp_path / "b.log").exists()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        own = workdir_guard.own_output(fds=(write_end,))
        ids = {(p.stat().st_dev, p.stat().st_ino) for p in (tmp_path / "bench.log", tmp_path / "b.log")}
        assert ids <= set(own)
        before = workdir_guard.snapshot(tmp_path, own=own)
        os.write(write_end, b"[2 gpus] ok\n")
        (tmp_path / "snapshot.pt").write_bytes(b"w")  # the run's, moved aside as ever
        found = workdir_guard.settle(tmp_path, before, "r1", own=own)
        assert (found["created"], found["changed"]) == (["snapshot.pt"], [])
    finally:
        os.close(write_end)
        tee.wait(timeout=10)
        cat.wait(timeout=10)
    assert (tmp_path / "bench.log").read_text() == "[2 gpus] ok\n"


def test_an_unreadable_proc_finds_nothing_and_says_nothing(tmp_path):
    read_end, write_end = os.pipe()
    try:
        assert workdir_guard.own_output(fds=(write_end, 9999), proc=str(tmp_path / "none")) == {}
        (tmp_path / "fake" / "self" / "fd").mkdir(parents=True)
        (tmp_path / "fake" / "12" / "fd").mkdir(parents=True)
        (tmp_path / "fake" / "12" / "fd" / "0").write_text("not a link")
        assert workdir_guard.own_output(fds=(write_end,), proc=str(tmp_path / "fake")) == {}
    finally:
        os.close(read_end)
        os.close(write_end)


# A script that trains together (one gloo group; a backward pass is a training step, timed
# as a whole run with no optimizer) and writes no file; what it prints, gpubench prints
# while the run lasts, into the log beside it.
SILENT = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
torch.ones(1, requires_grad=True).sum().backward()
print(f"rank {dist.get_rank()} summed {t.item():.0f}", flush=True)
dist.destroy_process_group()
"""


def _ran_clean(proc_result_code: int, err: str, proj: Path, log: Path) -> None:
    assert proc_result_code == 0, err
    records = [json.loads(line) for f in (proj / "results").glob("*.jsonl")
               for line in f.read_text().splitlines()]
    assert [(r["gpu_count"], r["status"]) for r in records] == [(1, "ok"), (2, "ok")]
    assert not any(r.get("left_behind") for r in records)
    assert log.exists() and "changed files" not in log.read_text() + err
    assert not (proj / workdir_guard.KEEP_DIR).exists()


@pytest.mark.slow
def test_gpubench_run_redirected_into_the_scripts_directory_runs_every_count(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(SILENT)
    log = proj / "out.log"
    with open(log, "w") as out:
        done = start_gpubench("run", "./train.py", "--gpus", "1,2", "--repeat", "1",
                              cwd=proj, stdout=out)
        _, err = done.communicate(timeout=300)
    _ran_clean(done.returncode, err, proj, log)
    assert "rank 1 summed 2" in log.read_text()


@pytest.mark.slow
def test_gpubench_run_through_tee_with_a_workdir_runs_every_count(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(SILENT)
    log = proj / "bench.log"
    tee = subprocess.Popen(["tee", str(log)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not log.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        done = start_gpubench("run", str(proj / "train.py"), "--workdir", str(proj), "--gpus", "1,2",
                              "--repeat", "1", cwd=proj, stdout=tee.stdin)
        _, err = done.communicate(timeout=300)
    finally:
        tee.stdin.close()
        tee.wait(timeout=30)
    _ran_clean(done.returncode, err, proj, log)
    assert "rank 1 summed 2" in log.read_text()
