"""`--on slurm --dry-run` where Slurm is installed but no controller answers (a
laptop with the client tools, a login node whose slurmctld is down): the scripts
are printed all the same, saying what could not be asked and what they assume
instead; a real run still stops at sinfo's error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NO_CONTROLLER = ("sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
                 "sinfo: fatal: Could not establish a configuration source\n")


@pytest.fixture
def no_controller(tmp_path, monkeypatch) -> Path:
    """sinfo and sbatch on PATH that cannot reach a controller (as Slurm's own say it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sinfo", "sbatch"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\nprintf '%s' '{NO_CONTROLLER.replace('sinfo', name)}' >&2\nexit 1\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_dry_run_without_a_controller_prints_the_scripts_saying_what_it_could_not_ask(
        no_controller, cli):
    base = no_controller / "cluster"
    code, out, err = cli("run", "mnist-ddp", "--on", "slurm", "--remote-dir", str(base),
                         "--nodes", "1,2", "--gpus-per-node", "4", "--partition", "gpu",
                         "--dry-run")
    assert code == 0, err
    assert out.count("#!/bin/bash") == 2 and out.rstrip().endswith("--dry-run: nothing was submitted")
    head = out.split("# ----")[0].splitlines()
    said = " ".join(line[2:] for line in head if line.startswith("# "))  # the scripts' preface
    assert said.startswith("Slurm could not be asked: sinfo failed on this machine: ")
    assert "Could not establish a configuration source" in said
    assert ("These scripts assume partition gpu and the GPUs per node of --gpus-per-node "
            "(1 unless given); Slurm has not checked them (no sbatch --test-only)") in said
    for expected in ("#SBATCH --nodes=1", "#SBATCH --nodes=2", "#SBATCH --gres=gpu:4",
                     "#SBATCH --partition=gpu", "--nproc_per_node=4"):
        assert expected in out, expected
    assert any(line.startswith("slurm on this machine: sinfo failed") and line.endswith(
        "--dry-run shows the scripts without what sinfo would have said") for line in head)
    assert not base.exists()


def test_dry_run_without_a_controller_asks_one_gpu_per_node_unless_told(no_controller, cli):
    code, out, err = cli("run", "mnist-ddp", "--on", "slurm", "--remote-dir",
                         str(no_controller / "cluster"), "--dry-run")
    assert code == 0, err
    assert out.count("#!/bin/bash") == 2  # 1 and 2 nodes, as on any Slurm
    assert "#SBATCH --gres=gpu:1" in out and "#SBATCH --partition" not in out


def test_a_real_run_without_a_controller_still_stops_at_sinfo(no_controller, cli):
    code, _, err = cli("run", "mnist-ddp", "--on", "slurm", "--remote-dir",
                       str(no_controller / "cluster"), "--results", str(no_controller / "r"))
    assert code == 1
    assert err.startswith("error: sinfo failed on this machine: sinfo: error: resolve_ctls")


def test_a_users_script_runs_under_the_probe_in_either_launch_style(no_controller, cli):
    # the probe (workloads/script_probe.py) times its steps and says whether its processes
    # trained together, on Slurm as on one machine; it sits with the suite's copy
    script = no_controller / "train.py"
    script.write_text("print('hi')\n")
    base = no_controller / "cluster"
    for launch in ("torchrun", "srun"):
        code, out, err = cli("run", str(script), "--on", "slurm", "--remote-dir", str(base),
                             "--nodes", "1", "--launch", launch, "--dry-run", "--", "--lr", "0.1")
        assert code == 0, err
        assert f"{base}/workloads/script_probe.py train.py --lr 0.1" in out, out
