"""`gpubench run ./script.py` knows what each process of a user's script really did
(workloads/script_probe.py): a count whose processes did not form one process group of
its size is a failed record with the reason in words, never a speedup, and the sweep
stops there (every larger count would be the same). Scripts in the style of the real
ones: a loop that never forms a group, a GPU guard that exits 0, Lightning's Trainer()
left to itself or with a fixed device count, and the README's Lightning example. Plain
DDP on gloo and Accelerate's Accelerator(), each a measurement that says what it formed,
are the plain and the reporting script of tests/cli/test_own_script.py: one run there
serves both that file's check and this one's."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import REPO, TRAINS_ALONE, run_gpubench

pytestmark = pytest.mark.slow

# pytorch/examples' single-process style, started by torchrun unchanged
ALONE = TRAINS_ALONE

# the DDP tutorial's guard: too few GPUs, a message, and exit code 0
GUARD = """\
import os, sys, torch
world = int(os.environ.get("WORLD_SIZE", 1))
if torch.cuda.device_count() < world:
    print(f"Unable to locate sufficient {world} gpus to run this example. Exiting.")
    sys.exit(0)
"""

LIGHTNING_LEFT_TO_ITSELF = """\
import lightning as L, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 1)
    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

trainer = L.Trainer(max_epochs=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)
trainer.fit(Model(), DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=16))
"""

def sweep(tmp_path, source: str, counts: str = "1,2") -> tuple[subprocess.CompletedProcess, list[dict]]:
    script = tmp_path / "train.py"
    script.write_text(source)
    results = tmp_path / "results"
    proc = run_gpubench("run", str(script), "--gpus", counts, "--repeat", "1", "--results", str(results),
                        "--quiet", cwd=tmp_path, timeout=240)
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    return proc, sorted(records, key=lambda r: r["gpu_count"])


def test_processes_that_each_train_alone_are_no_measurement_and_the_sweep_stops(tmp_path):
    proc, records = sweep(tmp_path, ALONE, "1,2,4")
    assert proc.returncode == 1
    assert [(r["gpu_count"], r["status"]) for r in records] == [(1, "ok"), (2, "failed")]  # 4 never ran
    failed = records[1]
    assert failed["error"] == ("each of the 2 processes trained alone: no process group was formed; "
                               "it never called torch.distributed.init_process_group (its last words: done)")
    assert failed["failure_kind"] == "alone" and failed["process_group"] == "none"
    assert "GPUBENCH_PROBE" not in proc.stdout + proc.stderr     # the probe's lines are not shown
    assert "speedup" not in failed


def test_a_gpu_guard_that_exits_0_is_named_by_its_last_words(tmp_path):
    proc, records = sweep(tmp_path, GUARD, "2")
    assert proc.returncode == 1 and records[0]["status"] == "failed"
    assert records[0]["error"].endswith(
        "(its last words: Unable to locate sufficient 2 gpus to run this example. Exiting.)")


def test_lightnings_trainer_left_to_itself_is_told_how_to_join(tmp_path):
    proc, records = sweep(tmp_path, LIGHTNING_LEFT_TO_ITSELF, "2")
    assert [(r["status"], r["frameworks"]) for r in records] == [("failed", "lightning")]
    assert ("trained alone: no process group was formed; Lightning's Trainer() needs strategy='ddp' "
            "and devices from torchrun: Trainer(strategy='ddp', devices=int(os.environ['LOCAL_WORLD_SIZE'])"
            in records[0]["error"])


def test_lightning_with_a_fixed_device_count_is_measured_at_that_count_only(tmp_path):
    fixed = LIGHTNING_LEFT_TO_ITSELF.replace("L.Trainer(max_epochs=1,",
                                             "L.Trainer(strategy='ddp', devices=2, max_epochs=1,")
    proc, records = sweep(tmp_path, fixed, "1,2,4")
    assert proc.returncode == 1
    assert [(r["gpu_count"], r["status"]) for r in records] == [(1, "failed"), (2, "ok")]
    assert records[0]["failure_kind"] == "devices" and records[1]["process_group"] == "gloo x 2"
    # Lightning's own words (TorchElasticEnvironment.validate_settings), told in one line
    assert records[0]["error"].startswith(
        "Lightning's Trainer(devices=2, num_nodes=1) wants 2 processes but this count runs 1: "
        "write Trainer(devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1))")
    assert "skipping 4 gpus: the script runs only at 2 processes" in proc.stdout + proc.stderr


def test_the_manuals_lightning_example_runs_at_one_and_two_processes(tmp_path):
    readme = (REPO / "docs" / "running.md").read_text()
    start = readme.index("```python\nimport os\nimport lightning as L")
    source = readme[start + len("```python\n"):readme.index("```", start + 10)]
    source = source.replace("max_epochs=2", "max_epochs=1, enable_progress_bar=False, logger=False, "
                                            "enable_checkpointing=False")
    proc, records = sweep(tmp_path, source)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(r["gpu_count"], r["status"], r["process_group"], r["wrapped_in"]) for r in records] == [
        (1, "ok", "gloo x 1", "DDP"), (2, "ok", "gloo x 2", "DDP")]
