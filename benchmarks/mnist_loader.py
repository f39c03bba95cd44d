"""One epoch of mnist-ddp in one CPU process, against the same model and batch
size fed the pytorch/examples way (a Dataset with per-sample transforms and a
DataLoader, rebuilt without torchvision), measured side by side in one run.

    .venv/bin/python benchmarks/mnist_loader.py [--steps N] [--threads T]

Both sides: world of one (gloo), the model as harness.replicate leaves it there
(alone, no DDP wrapper), Adadelta, batch 64,
DistributedSampler, 5 untimed warm-up steps; the clock covers the measured
steps only. Prints the median step time and epoch time of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workloads"))
import harness  # noqa: E402
import mnist_data  # noqa: E402
from mnist_ddp import Net, Trainer  # noqa: E402

WARMUP = 5
BATCH = 64


class PerSampleMNIST(Dataset):
    """torchvision.datasets.MNIST's __getitem__: uint8 array -> PIL image ->
    ToTensor -> Normalize, one sample at a time."""

    def __init__(self, images_u8: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images_u8, labels
        try:
            from PIL import Image
            self.to_image = lambda a: Image.fromarray(a, mode="L")
        except ImportError:  # without Pillow: the array itself
            self.to_image = lambda a: a

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        img = self.to_image(self.images[i])
        # ToTensor: HxW uint8 -> 1xHxW float in [0, 1]
        x = torch.from_numpy(np.array(img, dtype=np.uint8, copy=True)).unsqueeze(0).float().div(255)
        x = (x - mnist_data.MEAN) / mnist_data.STD  # Normalize((0.1307,), (0.3081,))
        return x, int(self.labels[i])


def time_steps(step, steps: int) -> tuple[float, list[float]]:
    for i in range(WARMUP):
        step(i)
    per_step = []
    start = time.perf_counter()
    for i in range(steps):
        t0 = time.perf_counter()
        step(WARMUP + i)
        per_step.append(time.perf_counter() - t0)
    return time.perf_counter() - start, per_step


def tensor_resident(ctx, split, steps: int):
    args = argparse.Namespace(batch_size=BATCH, seed=0, compile=False, precision="fp32")
    trainer = Trainer(ctx, args, split)
    return time_steps(trainer.step, steps)


def per_sample_loader(ctx, split, steps: int):
    raw = ((split.images[:, 0] * mnist_data.STD + mnist_data.MEAN) * 255).round().clamp(0, 255)
    dataset = PerSampleMNIST(raw.to(torch.uint8).numpy(), split.labels.numpy())
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, drop_last=True)
    model = harness.replicate(ctx, Net())
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    batches = iter(loader)

    def step(_i: int) -> None:
        x, y = next(batches)
        optimizer.zero_grad(set_to_none=True)
        F.nll_loss(model(x), y).backward()
        optimizer.step()

    return time_steps(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="measured steps (default: one epoch)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = harness.setup_distributed()
    try:
        split = mnist_data.synthetic()
        epoch_steps = len(split) // BATCH - WARMUP
        steps = args.steps or epoch_steps
        results = {}
        for name, fn in (("gpubench mnist-ddp (tensors decoded once)", tensor_resident),
                         ("pytorch/examples way (per-sample transforms + DataLoader)", per_sample_loader)):
            wall, per_step = fn(ctx, split, steps)
            results[name] = wall
            print(f"{name:58s} {steps} steps in {wall:7.2f} s, median step "
                  f"{statistics.median(per_step) * 1000:6.2f} ms, one epoch "
                  f"{wall / steps * (len(split) // BATCH):6.1f} s")
        ours, theirs = results.values()
        print(f"ratio (per-sample loader / gpubench): {theirs / ours:.2f}x  "
              f"[threads={args.threads}, batch={BATCH}, torch {torch.__version__}]")
    finally:
        harness.teardown_distributed()


if __name__ == "__main__":
    main()
