"""`gpubench run proj/train.py --workdir proj --on HOST`: a user's project goes along
whole (less what its .gitignore names and .git), runs start in it, and its
modules import as they do at home. Without --workdir the failed import says so
(one sshd serves both runs)."""

import os
from pathlib import Path

import pytest

from gpubench.store.results import ResultsStore
from tests.remote.helpers import cli_args

TRAIN = """\
import json, os
import model                                  # a module beside the script (first: a
import torch.distributed as dist              # run without it fails before torch loads)
scale = float(open("config.txt").read())      # read from the directory runs start in
dist.init_process_group("gloo")               # its processes train together
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
def test_without_workdir_a_missing_module_says_how_to_send_it_and_with_it_the_project_goes_along(
        sshd, tmp_path, cli, remote_python):
    # one sshd serves both runs: first the script alone, then its project with it
    proj = project(tmp_path)
    alone = tmp_path / "alone"
    alone.mkdir()
    code, _, _ = cli("run", str(proj / "train.py"), "--gpus", "1", "--results", str(alone),
                     *cli_args(sshd, remote_python, tmp_path))
    assert code == 1
    (record,) = ResultsStore(alone).load().records
    assert "ModuleNotFoundError: No module named 'model'" in record["error"]
    assert "--workdir DIR sends its project" in record["error"]

    # with --workdir: the project goes along and runs start in it
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
    assert "1 ignored file stays here: data/; list them in .gpubenchignore (as !data/)" in out


@pytest.mark.parametrize("workdir, message", [
    ("elsewhere", "is not inside"),
    ("missing", "no such directory"),
])
def test_bad_workdir_is_one_line(tmp_path, cli, workdir, message):
    proj = project(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    code, _, err = cli("run", str(proj / "train.py"), "--workdir", str(tmp_path / workdir))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- what travels
# The real rsync, to a directory on this machine: the command sync_tree builds, less
# its ssh transport.

def _mirror(monkeypatch, tmp_path: Path, proj: Path, keep_out=(), own=None, lines=None) -> set[str]:
    """Upload `proj` as a session does, the rsync going to tmp_path/dest; the paths
    that arrived."""
    from gpubench.onhost import workdir_guard
    from gpubench.remote import sync
    from gpubench.remote.session import RemoteLayout, RemoteSession, SessionOptions
    from gpubench.remote.target import SshTarget

    dest = tmp_path / "dest"
    real_rsync = sync._rsync

    def local(target, cmd, timeout):
        shown = [arg for arg in cmd if not arg.startswith("--rsync-path=")]
        at = shown.index("-e")
        del shown[at:at + 2]
        return real_rsync(target, [*shown[:-1], f"{dest}/"], timeout)

    monkeypatch.setattr(sync, "_rsync", local)
    monkeypatch.setattr(workdir_guard, "own_output", lambda: own or {})
    target = SshTarget("127.0.0.1", 2222, "me", tmp_path / "key")
    session = RemoteSession(target, tmp_path / "known_hosts",
                            SessionOptions(layout=RemoteLayout(str(tmp_path / "remote"))),
                            echo=(lines if lines is not None else []).append)
    session.upload_workdir(proj, tuple(keep_out))
    return {p.relative_to(dest).as_posix() for p in dest.rglob("*")}


def _proj_with_ignored_data(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "sub").mkdir()
    (proj / "train.py").write_text("open('train.csv')\n")
    (proj / "train.csv").write_text("1,2\n")
    (proj / "sub" / "notes.csv").write_text("x\n")
    (proj / "data" / "a.bin").write_bytes(b"a")
    (proj / "data" / "b.bin").write_bytes(b"b")
    (proj / ".gitignore").write_text("*.csv\ndata/\n")
    return proj


def test_the_ignored_files_that_stay_here_are_named(monkeypatch, tmp_path):
    proj = _proj_with_ignored_data(tmp_path)
    lines: list[str] = []
    sent = _mirror(monkeypatch, tmp_path, proj, lines=lines)
    assert sent == {".gitignore", "train.py", "sub"}
    assert lines[-1] == ("me@127.0.0.1:2222: 4 ignored files stay here: data/, train.csv, "
                         "sub/notes.csv; list them in .gpubenchignore (as !data/) to send them")


def test_a_gpubenchignore_decides_before_the_gitignore(monkeypatch, tmp_path):
    proj = _proj_with_ignored_data(tmp_path)
    (proj / "checkpoints").mkdir()
    (proj / "checkpoints" / "last.pt").write_bytes(b"w")
    (proj / "data" / "c.tmp").write_bytes(b"t")
    # git's last-match-wins: data/ sent, then everything in it left out but a.bin
    (proj / ".gpubenchignore").write_text(
        "# what the script opens\n!/train.csv\n!data/\ndata/*\n!data/a.bin\ncheckpoints/\n\n")
    lines: list[str] = []
    sent = _mirror(monkeypatch, tmp_path, proj, lines=lines)
    assert sent == {".gitignore", ".gpubenchignore", "train.py", "train.csv", "sub",
                    "data", "data/a.bin"}
    assert lines[-1].endswith(": 4 ignored files stay here: checkpoints/, data/b.bin, data/c.tmp, "
                              "...; list them in .gpubenchignore (as !checkpoints/) to send them")


def test_gpubenchs_own_files_never_travel_whatever_the_ignore_files_say(monkeypatch, tmp_path):
    proj = tmp_path / "proj"
    (proj / "results" / "logs").mkdir(parents=True)
    (proj / "results" / "r1.jsonl").write_text("{}\n")
    (proj / ".gpubench-left-behind" / "r1-2gpu").mkdir(parents=True)
    (proj / ".gpubench-left-behind" / "r1-2gpu" / "snapshot.pt").write_bytes(b"w")
    (proj / "train.py").write_text("print('hi')\n")
    (proj / "out.log").write_text("gpubench's own lines\n")
    (proj / ".gpubenchignore").write_text("!results/\n!.gpubench-left-behind/\n!out.log\n!*\n")
    lines: list[str] = []
    own = {(0, 0): str((proj / "out.log").resolve())}
    sent = _mirror(monkeypatch, tmp_path, proj, keep_out=[(proj / "results").resolve()],
                   own=own, lines=lines)
    assert sent == {".gpubenchignore", "train.py"}
    assert not any("ignored" in line for line in lines)  # gpubench's own are not "ignored"


def test_ignore_rules_follow_gits_syntax():
    from gpubench.remote.sync import ignore_rules

    text = "# comment\n\n*.csv\n!keep.csv\ndata/\n/top.txt\nlogs/*.log\n**/cache\n\\#odd\n!a/b/\n"
    assert ignore_rules(text) == [  # last line first: rsync's first match is git's last
        "--filter=+ /a/b/", "--filter=- #odd", "--filter=- cache", "--filter=- /logs/*.log",
        "--filter=- /top.txt", "--filter=- data/", "--filter=+ keep.csv", "--filter=- *.csv"]
