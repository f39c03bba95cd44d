"""`gpubench run proj/train.py --workdir proj --on HOST`: a user's project goes along
whole (less what its .gitignore names and .git), runs start in it, and its
modules import as they do at home. Without --workdir the failed import says so."""

import os
from pathlib import Path

import pytest

from gpubench.store.results import ResultsStore
from tests.remote.helpers import cli_args

TRAIN = """\
import json, os
import model                                  # a module beside the script
scale = float(open("config.txt").read())      # read from the directory runs start in
if os.environ["RANK"] == "0":
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": model.rate(int(os.environ["WORLD_SIZE"])) * scale,
                   "throughput_unit": "samples/s"}, f)
"""


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / ".git").mkdir()
    (proj / "train.py").write_text(TRAIN)
    (proj / "model.py").write_text("def rate(world):\n    return 100.0 * world\n")
    (proj / "config.txt").write_text("2.0\n")
    (proj / ".gitignore").write_text("data/\n")
    (proj / "data" / "shard-000.bin").write_bytes(os.urandom(1 << 16))
    (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return proj


@pytest.mark.slow
def test_the_project_goes_along_and_runs_start_in_it(sshd, tmp_path, cli, remote_python):
    proj = project(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    code, out, _ = cli("run", str(proj / "train.py"), "--workdir", str(proj), "--gpus", "1,2",
                       "--results", str(results), *cli_args(sshd, remote_python, tmp_path))
    assert code == 0, out
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"], r["throughput"]) for r in records] == [
        (1, "ok", 200.0), (2, "ok", 400.0)]
    assert f"{tmp_path / 'remote' / 'workdir'}/train.py" in records[0]["launch_command"]
    sent = tmp_path / "remote" / "workdir"
    sent_names = sorted(p.name for p in sent.iterdir() if p.name != "__pycache__")  # made by the import
    assert sent_names == [".gitignore", "config.txt", "model.py", "train.py"]
    assert "synced" in out and str(proj) in out


@pytest.mark.slow
def test_without_workdir_a_missing_module_says_how_to_send_it(sshd, tmp_path, cli, remote_python):
    proj = project(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    code, _, _ = cli("run", str(proj / "train.py"), "--gpus", "1", "--results", str(results),
                     *cli_args(sshd, remote_python, tmp_path))
    assert code == 1
    (record,) = ResultsStore(results).load().records
    assert "ModuleNotFoundError: No module named 'model'" in record["error"]
    assert "--workdir DIR sends its project" in record["error"]


@pytest.mark.parametrize("workdir, message", [
    ("elsewhere", "is not inside"),
    ("missing", "no such directory"),
])
def test_bad_workdir_is_one_line(tmp_path, cli, workdir, message):
    proj = project(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    code, _, err = cli("run", str(proj / "train.py"), "--workdir", str(tmp_path / workdir))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
