"""`gpubench run ./script.py` knows what each process of a user's script really did
(workloads/script_probe.py): a count whose processes did not form one process group of
its size, did not train together in it, or took no training step is a failed record with
the reason in words, never a speedup, and the sweep stops there (every larger count would
be the same). Scripts in the style of the real ones: a loop that never forms a group, a
GPU guard that exits 0, Lightning's Trainer() left to itself or with a fixed device
count, a plain Accelerator() on a CPU, the README's Lightning example, and a
nanoGPT-shaped loop (token ids, gradient accumulation) over an epoch shared by a
DistributedSampler. Plain DDP on gloo and Accelerate with cpu=True, each a measurement
that says what it formed, are the plain and the reporting script of
tests/cli/test_own_script.py: one run there serves both that file's check and this one's."""

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


def test_a_gpu_guard_that_exits_0_took_no_training_step_and_is_named_by_its_last_words(tmp_path):
    # at one process too: 2.7 s of doing nothing is no measurement (at two, the processes
    # also formed no group: tests/sweep/test_probe.py)
    proc, records = sweep(tmp_path, GUARD, "1,2")
    assert proc.returncode == 1
    assert [(r["gpu_count"], r["status"], r["failure_kind"]) for r in records] == [(1, "failed", "no step")]
    assert records[0]["error"] == ("the process took no training step; its last words: Unable to "
                                   "locate sufficient 1 gpus to run this example. Exiting.")
    assert "its processes took no training step, and at a larger count they would not either" in proc.stdout


# Accelerate's Accelerator() on a machine without GPUs: a gloo group of the right size,
# but DistributedType.NO: no DDP, no sharding, the same losses on every process
PLAIN_ACCELERATOR = """\
import torch
from torch import nn
from accelerate import Accelerator
accelerator = Accelerator()
model, opt = accelerator.prepare(nn.Linear(8, 1), torch.optim.SGD(nn.Linear(8, 1).parameters(), lr=0.1))
for _ in range(4):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); accelerator.backward(loss); opt.step()
"""


def test_a_plain_accelerator_on_a_cpu_is_refused_with_the_fix(tmp_path):
    proc, records = sweep(tmp_path, PLAIN_ACCELERATOR, "2")
    assert proc.returncode == 1
    (record,) = records
    assert (record["status"], record["failure_kind"], record["wrapped_in"]) == ("failed", "alone", "none")
    assert record["error"].startswith("the 2 processes formed a group of 2 but did not train together: "
                                      "Accelerate ran as DistributedType.NO")
    assert "Accelerator(cpu=True) or ACCELERATE_USE_CPU=1" in record["error"]


# nanoGPT's train.py in miniature: token ids (batch, length), gradient accumulation (a
# micro-batch's forward and backward, the optimizer every ACCUM of them), DDP only when
# torchrun started more than one process; its data an epoch shared by a DistributedSampler.
# Each micro-batch's work is a sleep, so that two processes go through the epoch in half
# the time on any machine.
NANO = """\
import os, time
import torch, torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
ACCUM, BATCH, BLOCK = 2, 4, 16
world = int(os.environ.get("WORLD_SIZE", 1))
dist.init_process_group("gloo")
class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(64, 16), nn.Linear(16, 64)
    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        return nn.functional.cross_entropy(logits.view(-1, 64), targets.view(-1))
model = GPT()
if world > 1:
    model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randint(0, 64, (320, BLOCK)), torch.randint(0, 64, (320, BLOCK)))
loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data), drop_last=True)
for i, (x, y) in enumerate(loader):
    loss = model(x, y) / ACCUM
    loss.backward()
    time.sleep(0.03)
    if (i + 1) % ACCUM == 0:
        opt.step(); opt.zero_grad(set_to_none=True)
print(f"iters {len(loader) // ACCUM}", flush=True)
dist.destroy_process_group()
"""


def test_a_nanogpt_shaped_epoch_with_gradient_accumulation_is_measured_in_tokens(tmp_path):
    proc, records = sweep(tmp_path, NANO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(r["gpu_count"], r["status"], r["timing"], r["throughput_unit"]) for r in records] == [
        (1, "ok", "training steps", "tokens/s"), (2, "ok", "training steps", "tokens/s")]
    for r in records:  # every micro-batch of a step counted: 2 of 4 samples of 16 tokens
        n = r["gpu_count"]
        assert (r["global_batch"], r["tokens_per_step"]) == (8 * n, 8 * 16 * n)
        assert r["throughput"] == pytest.approx(r["tokens_per_step"] / r["median_step_s"], rel=0.1)
        assert r["epoch_samples"] == 320 * 16  # the dataset, in tokens
        assert r["steps"] == 40 // n - max(2, 40 // n // 10)
    speedup = records[1]["throughput"] / records[0]["throughput"]
    # the epoch shared: each process does half the steps (a busy machine's dispatch between
    # the sleeps lowers it; one that did the whole epoch each would be near 1.0)
    assert 1.4 < speedup < 2.3, speedup


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
    # Lightning's steps as the probe times them: samples of the batches DDP's forward is given
    assert [(r["timing"], r["throughput_unit"]) for r in records] == [("training steps", "samples/s")] * 2
    assert [r["global_batch"] for r in records] == [64, 128] and all(r["steps"] > 0 for r in records)


# pytorch/examples' imagenet main.py in miniature: DDP over a DataLoader with workers and
# more epochs than anyone waits for; run --max-steps ends it
ENDLESS = """\
import os, torch, torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
model = DDP(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data), num_workers=2)
for epoch in range(10**6):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
"""


def test_max_steps_ends_a_script_that_would_train_for_days_and_its_record_says_so(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(ENDLESS)
    results = tmp_path / "results"
    proc = run_gpubench("run", str(script), "--gpus", "2", "--repeat", "1", "--max-steps", "12",
                        "--results", str(results), "--quiet", cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = sorted((json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()),
                     key=lambda r: r["gpu_count"])
    assert [(r["gpu_count"], r["status"], r["ended_after_steps"], r["steps"]) for r in records] == [
        (2, "ok", 12, 10)]   # both processes ended together; the first two of the 12 their warm-up
    # its DataLoader workers went with it: nothing of the script is left running
    left = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
