"""Users' scripts under torchrun on this machine's CPU, failing as real ones do
(torch's own words, not ones written for the test): a script that asks for CUDA,
NCCL or an accelerator where there is none is told so in one line and stops the
sweep; the worker's own error is found behind torch's "[rank0]: " prefix. The
set_device script runs once, under `gpubench run` at two processes: one sweep serves
both its one line and the sweep it stops."""

from __future__ import annotations

import os
import subprocess
import shutil
import sys
from pathlib import Path

import pytest

from gpubench.launch.failures import RunFacts, explain
from gpubench.store.results import ResultsStore

# nvidia-smi stands for CUDA: importing torch here would cost every test worker its start-up
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="needs a machine without CUDA")]


def torchrun(tmp_path: Path, source: str, procs: int = 2) -> tuple[int, list[str]]:
    """Run `source` as train.py under torchrun on the CPU, as gpubench does: its exit code
    and its output, stdout and stderr together."""
    (tmp_path / "train.py").write_text(source)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc_per_node={procs}", "train.py"], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return done.returncode, done.stdout.splitlines()


def explained(tmp_path: Path, source: str, procs: int = 2):
    code, out = torchrun(tmp_path, source, procs)
    assert code != 0, "\n".join(out)
    return explain(out, RunFacts(code)), out


# pytorch/examples' ddp-tutorial-series: the process group first, then its GPU
SET_DEVICE = """\
import os
import torch
import torch.distributed as dist
from torch import nn

def ddp_setup():
    dist.init_process_group(backend="gloo")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

ddp_setup()
model = nn.Linear(20, 1)
"""

NCCL = """\
import os
import torch.distributed as dist

dist.init_process_group(backend="nccl")
dist.barrier()
"""

# a model moved to the GPU by hand, as most single-GPU scripts turned DDP do
HARD_CODED = """\
import os
import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
model = nn.Linear(20, 1){move}
"""

# the accelerator-agnostic style of torch 2.6+ tutorials
ACCELERATOR = """\
import os
import torch
import torch.distributed as dist

device_type = torch.accelerator.current_accelerator().type
dist.init_process_group(dist.get_default_backend_for_device(device_type))
"""

# rank 0 reads the data and the others wait for it: when rank 0 fails, another rank's
# error can follow it in the output (its peer closed the connection)
MISSING_FILE = """\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    with open("data.csv") as f:
        rows = f.read().splitlines()
dist.barrier()
"""


# Two processes where both ranks' words must come out as one line (set_device, in a
# sweep, the missing file); one where the words themselves are the subject.
def test_the_nccl_backend_on_a_cpu_says_to_use_gloo(tmp_path):
    failure, _ = explained(tmp_path, NCCL, procs=1)
    assert failure.kind == "no gpu" and failure.repeats
    assert failure.error.startswith('the script asks for the NCCL backend (dist.init_process_group('
                                    'backend="nccl") at train.py:4), which needs GPUs, and ')
    assert failure.error.endswith('; on a CPU use gloo (init_process_group(backend="gloo"))')


@pytest.mark.parametrize("move", ['.to(f"cuda:{local_rank}")', ".cuda()", '.to("cuda")'])
def test_a_hard_coded_cuda_device_on_a_cpu_is_one_line(tmp_path, move):
    failure, _ = explained(tmp_path, HARD_CODED.format(move=move), procs=1)
    assert failure.kind == "no gpu" and failure.repeats
    assert failure.error.startswith(f"the script asks for CUDA (model = nn.Linear(20, 1){move} at "
                                    "train.py:8) and ")
    assert failure.error.endswith('; on a CPU use torch.device("cpu")')


def test_torch_accelerator_with_no_accelerator_is_one_line(tmp_path):
    failure, _ = explained(tmp_path, ACCELERATOR, procs=1)
    assert failure.kind == "no gpu" and failure.repeats
    assert failure.error.startswith(
        "the script asks for an accelerator (device_type = torch.accelerator.current_accelerator()"
        ".type at train.py:5) and this machine has none")


def test_a_missing_file_behind_torchs_rank_prefix_is_the_scripts_own_error(tmp_path):
    failure, out = explained(tmp_path, MISSING_FILE)
    assert "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'" in out
    assert failure.error == "FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'"
    assert failure.kind == "missing file" and failure.repeats


def test_torch_cuda_set_device_on_a_cpu_is_one_line_naming_the_call_and_stops_the_sweep(
        tmp_path, monkeypatch, cli):
    # one sweep serves both: its first count, at two processes, is the run where both
    # ranks' words must come out as one line, and the count that stops the sweep
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SET_DEVICE)
    code, out, _ = cli("run", "train.py", "--gpus", "2,4", "--repeat", "1",
                       "--results", str(tmp_path / "results"))
    assert code == 1
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["gpu_count"], r["failure_kind"]) for r in records] == [(2, "no gpu")]
    log = (tmp_path / "results" / records[0]["log_file"]).read_text().splitlines()
    assert any(line.startswith("[rank0]: ") for line in log)  # torch's prefix, seen for real
    error = records[0]["error"]
    assert error.startswith(
        'the script asks for CUDA (torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) at '
        "train.py:8) and ")
    assert "[rank" not in error and "\n" not in error
    # it fails the same way at every count (the failure repeats): the sweep stops at its first
    assert ("stopping the sweep: the script needs a GPU (CUDA, NCCL, an accelerator) and found "
            "none at 2 gpus, and it would fail the same way at every count (the script asks for "
            'CUDA (torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) at train.py:8) and the '
            "torch it runs with is built without CUDA: ") in out
