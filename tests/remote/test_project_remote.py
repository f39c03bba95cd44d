"""A user's project on a machine (the mock cloud's, and one over SSH; real sshd, real
rsync): its requirements installed once with the machine's python and torch left as it
was, its setup step run once, its declared outputs brought back byte for byte after each
count, what it left undeclared named and pulled before the machine goes; a requirement
that wants another torch, an install or a setup step that fails: one line, no count run."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from tests.helpers import mock_cloud
from tests.remote.helpers import cli_args
from tests.remote.project_machine import machine_python, site_packages, wheel

TRAIN = """\
import json, os, pathlib
import alpha                                     # from requirements.txt: a wheel of the project
import torch.distributed as dist
dist.init_process_group("gloo")
assert pathlib.Path("data/prepared.txt").read_text() == "ready"   # made by --setup
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
if rank == 0:
    pathlib.Path("checkpoints").mkdir()
    pathlib.Path("checkpoints/model.pt").write_bytes(os.urandom(50000) + bytes([world]))
    pathlib.Path("runs").mkdir()
    pathlib.Path(f"runs/log-{world}.txt").write_text(alpha.VALUE)
    pathlib.Path("scratch.bin").write_bytes(b"x" * 3000)   # not declared as an output
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 100.0 * world, "throughput_unit": "samples/s"}, f)
dist.destroy_process_group()
"""

PREPARE = """\
import pathlib, sys
pathlib.Path("data").mkdir(exist_ok=True)
pathlib.Path("data/prepared.txt").write_text("ready")
with open({count!r}, "a") as f:
    f.write(sys.executable + "\\n")
"""


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN)
    (proj / "prepare.py").write_text(PREPARE.format(count=str(tmp_path / "setup-count")))
    (proj / ".gitignore").write_text("data/\n")
    whl = wheel(proj / "wheels", "alpha", "1.0", "VALUE = 'alpha-1.0'\n")
    (proj / "requirements.txt").write_text(f"# the project's one package\n./wheels/{whl.name}\n")
    return proj


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


@pytest.mark.slow
def test_requirements_setup_and_outputs_once_per_machine(cloud, tmp_path, cli):
    python = machine_python(tmp_path / "machine")
    proj = project(tmp_path)
    results = tmp_path / "results"
    code, _, err = cli("provision", "lambda", "--gpus", "2", "--name", "big", "--yes")
    assert code == 0, err
    args = ["--workdir", str(proj), "--outputs", "checkpoints/,runs/", "--setup", "python prepare.py",
            "--results", str(results), "--on", "big", "--remote-python", str(python), "--repeat", "1"]
    code, out, err = cli("run", str(proj / "train.py"), "--gpus", "1,2", *args)
    assert code == 0, out + err
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"]) for r in records] == [(1, "ok"), (2, "ok")]
    # installed with the machine's python, into its own site-packages; its torch untouched
    assert "installing 1 requirement of requirements.txt with pip" in out
    machine_site = site_packages(python)
    assert (machine_site / "alpha.py").is_file()
    assert not any(p.name.startswith("torch") for p in machine_site.iterdir())
    where = subprocess.run([str(python), "-c", "import torch; print(torch.__file__)"], capture_output=True,
                           text=True, check=True, timeout=120).stdout
    assert where.startswith(sysconfig.get_path("purelib"))
    # the setup step ran once, with the runs' python as `python`
    assert (tmp_path / "setup-count").read_text().splitlines() == [str(python)]
    run_id = records[0]["run_id"]
    logs = (results / "logs" / run_id / "prepare.log").read_text()
    assert "alpha" in logs and "# setup: python prepare.py" in logs
    # each count's declared outputs, byte for byte as the machine has them
    (kept,) = (tmp_path / "mock").glob("**/gpubench/workdir/.gpubench-left-behind")
    for label, world in (("1gpu", 1), ("2gpus", 2)):
        pulled = results / run_id / "outputs" / label
        assert sorted(p.relative_to(pulled).as_posix() for p in pulled.rglob("*") if p.is_file()) == [
            "checkpoints/model.pt", f"runs/log-{world}.txt"]
        (there,) = [d for d in kept.iterdir() if d.name.endswith(f"-{world}gpu")]
        assert filecmp.cmp(pulled / "checkpoints/model.pt", there / "checkpoints/model.pt", shallow=False)
        assert (pulled / "checkpoints/model.pt").read_bytes()[-1] == world
    assert "scratch.bin" in out and "not declared as outputs" in out

    # a second sweep on the same machine: nothing installed, no setup again
    code, out, err = cli("run", str(proj / "train.py"), "--gpus", "1", "--force", *args)
    assert code == 0, out + err
    assert "installing" not in out and "setup already done on this machine" in out
    assert len((tmp_path / "setup-count").read_text().splitlines()) == 1

    # what the counts left undeclared is still only there: marked, and pulled before it goes
    code, out, _ = cli("ls", "--format", "json")
    assert [r["outputs"] for r in json.loads(out)] == ["3 unpulled"]
    code, out, err = cli("down", "big", "--yes")
    assert code == 0, err
    assert (results / run_id / "outputs" / "2gpus" / "scratch.bin").read_bytes() == b"x" * 3000
    assert Ledger().find("big").status == "terminated"


@pytest.mark.slow
def test_pep723_with_uv_and_a_torch_the_machine_cannot_give(sshd, tmp_path, cli):
    python = machine_python(tmp_path / "machine")
    machine_site = site_packages(python)
    # uv beside the python, and a torch in its own site-packages, as an image has it: uv installs
    uv = shutil.which("uv", path=str(Path(sysconfig.get_path("scripts"))))
    if uv is None:
        pytest.skip("uv is not installed in this test run's environment")
    (python.parent / "uv").symlink_to(uv)
    here = Path(sysconfig.get_path("purelib"))
    (machine_site / "torch").symlink_to(here / "torch")
    for found in here.glob("torch-*.dist-info"):   # copied: uv does not follow a linked one
        shutil.copytree(found, machine_site / found.name)
    proj = tmp_path / "p723"
    whl = wheel(tmp_path / "wheels", "beta", "2.0", "VALUE = 'beta'\n")
    script = proj / "train.py"
    proj.mkdir()
    script.write_text(f"# /// script\n# dependencies = ['beta @ {whl.as_uri()}']\n# ///\n"
                      "import beta\n" + TRAIN.replace("import alpha", "alpha = beta")
                      .replace('assert pathlib.Path("data/prepared.txt").read_text() == "ready"', ""))
    results = tmp_path / "results"
    code, out, err = cli("run", str(script), "--workdir", str(proj), "--gpus", "1", "--results", str(results),
                         *cli_args(sshd, str(python), tmp_path))
    assert code == 0, out + err
    assert "installing 1 requirement of the PEP 723 block of train.py with uv" in out, out
    assert (machine_site / "beta.py").is_file()

    # a requirement that wants another torch: one line, nothing installed, nothing run
    (proj / "requirements.txt").write_text("torch>=99\n")
    script.write_text(TRAIN)
    code, out, err = cli("run", str(script), "--workdir", str(proj), "--gpus", "1", "--results",
                         str(tmp_path / "none"), *cli_args(sshd, str(python), tmp_path))
    assert code == 1
    line = err.strip().splitlines()[-1]
    assert "requirements.txt asks for torch>=99, but the machine's torch is 2.13.0" in line
    assert "nothing was installed or run" in line
    assert not (tmp_path / "none").exists() or not ResultsStore(tmp_path / "none").load().records

    # an install that fails: the installer's own last line; a setup step that fails: its own
    (proj / "requirements.txt").write_text("./wheels/missing-1.0-py3-none-any.whl\n")
    code, out, err = cli("run", str(script), "--workdir", str(proj), "--gpus", "1", "--results",
                         str(tmp_path / "none"), *cli_args(sshd, str(python), tmp_path))
    line = err.strip().splitlines()[-1]
    assert code == 1 and "installing requirements.txt on" in line and "no count was run" in line
    assert "missing-1.0-py3-none-any.whl" in line
    (proj / "requirements.txt").unlink()
    code, out, err = cli("run", str(script), "--workdir", str(proj), "--gpus", "1", "--results",
                         str(tmp_path / "none"), "--setup", "echo fetching; exit 3",
                         *cli_args(sshd, str(python), tmp_path))
    line = err.strip().splitlines()[-1]
    assert code == 1 and "setup 'echo fetching; exit 3' failed" in line and "(exit code 3): fetching" in line
    assert not (tmp_path / "none").exists() or not ResultsStore(tmp_path / "none").load().records
