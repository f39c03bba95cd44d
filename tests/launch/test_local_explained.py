"""Real torchrun runs of users' scripts on this machine: a checkpoint one count
writes is not seen by the next, a worker killed by SIGKILL is named with the memory
seen. (Lightning's `devices` mismatch, one line that stops the sweep: real Lightning,
in tests/cli/test_own_script_probe.py.)"""

from __future__ import annotations

import json

import pytest

from gpubench.store.results import ResultsStore
from tests.helpers import JOIN, LEAVE

pytestmark = pytest.mark.slow

# pytorch/examples' ddp-tutorial-series in miniature: resume from snapshot.pt when
# one is there (and then do less work), write it at the end; its processes form one
# process group (JOIN, LEAVE)
RESUMING = JOIN + """\
import json, os, time
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
epochs = 4
if os.path.exists("snapshot.pt"):
    done = int(open("snapshot.pt").read())
    print(f"Resuming training from snapshot at Epoch {done}", flush=True)
    epochs -= done
time.sleep(0.05 * epochs)
if rank == 0:
    open("snapshot.pt", "w").write(str(epochs))
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 100.0 * world * 4 / epochs, "throughput_unit": "samples/s"}, f)
""" + LEAVE

KILLED = """\
import os, signal, time
held = bytearray(300 * 2**20)  # touched: resident
time.sleep(2)  # long enough to be sampled
if os.environ["RANK"] == "1":
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer does
time.sleep(30)
"""


@pytest.fixture
def project(tmp_path, monkeypatch, cli):
    """A project directory to run from, and gpubench run in-process from it:
    run(source, *args) -> (exit code, stdout, the records)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (tmp_path / "results").mkdir()
    monkeypatch.chdir(proj)

    def run(source: str, *args: str) -> tuple[int, str, list[dict]]:
        (proj / "train.py").write_text(source)
        code, out, _ = cli("run", "train.py", "--results", str(tmp_path / "results"), "--repeat", "1",
                           *args)
        return code, out, ResultsStore(tmp_path / "results").load().records

    return proj, run


def test_a_checkpoint_one_count_writes_is_not_seen_by_the_next(project):
    proj, run = project
    code, out, records = run(RESUMING, "--gpus", "1,2")
    assert code == 0, out
    assert "Resuming" not in out
    assert [(r["gpu_count"], r["throughput"]) for r in records] == [(1, 100.0), (2, 200.0)]
    assert [r["left_behind"] for r in records] == [["snapshot.pt"], ["snapshot.pt"]]
    assert "the run left 1 file(s) in its working directory (snapshot.pt); moved to" in out
    assert not (proj / "snapshot.pt").exists()
    kept = sorted(p.parent.name for p in (proj / ".gpubench-left-behind").glob("*/snapshot.pt"))
    assert [k.rsplit("-", 1)[1] for k in kept] == ["1gpu", "2gpu"]
    logs = [(proj.parent / "results" / r["log_file"]).read_text() for r in records]
    assert all("Resuming" not in text for text in logs)

    # the same script again is recorded; the same script edited is measured again
    code, out, records = run(RESUMING, "--gpus", "1,2")
    assert code == 0 and len(records) == 2
    assert out.count("] already recorded") == 2


def test_a_worker_killed_by_sigkill_says_so_with_the_memory_seen(project):
    _, run = project
    code, out, (record,) = run(KILLED, "--gpus", "2")
    assert code == 1
    assert record["error"].startswith("worker rank 1 was killed by SIGKILL: the kernel may have run "
                                      "out of memory (its processes held up to ")
    assert (record["failure_kind"], record["exit_signal"]) == ("out of memory", "SIGKILL")
    assert record["peak_rss_bytes"] > 2 * 300 * 2**20
    assert record["memory_total_bytes"] > record["peak_rss_bytes"]
    assert f"its whole output: gpubench logs {record['run_id']} 2" in out
    assert json.dumps(record)  # a plain record, as every other
