"""MNIST CNN (the pytorch/examples model) trained with DistributedDataParallel.

    python workloads/mnist_ddp.py --steps 50                       # one process
    torchrun --standalone --nproc_per_node=4 workloads/mnist_ddp.py # one epoch on 4 GPUs
    python workloads/mnist_ddp.py --steps 20 --profile traces/      # + a TensorBoard trace

The data set is decoded once into tensors on the device; each rank walks its
DistributedSampler shard by indexing that tensor, so the loop is bound by
compute, not by a loader. In a world of one the model is not wrapped in DDP (the
gradients of one replica are their mean): the 1-GPU baseline of the speedup is
the training loop alone, not a collective over one process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data.distributed import DistributedSampler

import flags
import harness
import mnist_data

WORKLOAD = "mnist-ddp"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class Trainer:
    """One DDP replica over its shard of a tensor-resident data set."""

    def __init__(self, ctx: harness.Dist, args, split: mnist_data.Split) -> None:
        self.ctx = ctx
        self.args = args
        self.images = split.images.to(ctx.device)
        self.labels = split.labels.to(ctx.device)
        self.sampler = DistributedSampler(range(len(split)), num_replicas=ctx.world_size,
                                          rank=ctx.rank, shuffle=True, seed=args.seed,
                                          drop_last=True)
        model = Net().to(ctx.device)
        self.model = harness.replicate(ctx, model)
        if args.compile:
            self.model = torch.compile(self.model)
        self.optimizer = torch.optim.Adadelta(self.model.parameters(), lr=1.0)
        self.scaler = harness.grad_scaler(ctx, args.precision)
        self.steps_per_epoch = len(self.sampler) // args.batch_size
        self._order: torch.Tensor | None = None
        self._epoch = -1

    def _batch_indices(self, step: int) -> torch.Tensor:
        epoch, i = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._order = torch.tensor(list(iter(self.sampler)), device=self.ctx.device)
            self._epoch = epoch
        b = self.args.batch_size
        return self._order[i * b:(i + 1) * b]

    def step(self, step: int) -> None:
        idx = self._batch_indices(step)
        x, y = self.images[idx], self.labels[idx]
        self.optimizer.zero_grad(set_to_none=True)
        with harness.autocast(self.ctx, self.args.precision):
            loss = F.nll_loss(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def main(argv: list[str] | None = None) -> int:
    args = flags.parse(WORKLOAD, argv)
    torch.manual_seed(args.seed)
    shapes = harness.fixed_shapes()
    ctx = harness.setup_distributed()
    try:
        try:
            if args.data != "synthetic":
                # rank 0 fetches and verifies missing files while the others wait
                if ctx.is_main:
                    mnist_data.ensure_files(Path(args.data).expanduser(), mnist_data.TRAIN_FILES)
                torch.distributed.barrier()
            split = mnist_data.load_train(args.data, seed=args.seed, fetch=False)
        except mnist_data.DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        trainer = Trainer(ctx, args, split)
        if trainer.steps_per_epoch < 1:
            print("error: batch size too large for the data set", file=sys.stderr)
            return 2
        steps = harness.measured_steps(args, trainer.steps_per_epoch)
        timer = harness.measure(ctx, args, trainer.step, steps, model=trainer.model)
        record = harness.build_record(
            ctx, args, workload=WORKLOAD, timer=timer, steps=steps,
            samples_per_step=args.batch_size * ctx.world_size,
            epoch_samples=len(split), unit="images/s", model=trainer.model,
            extra={"steps_per_epoch": trainer.steps_per_epoch,
                   "epochs": steps / trainer.steps_per_epoch, **shapes},
        )
        harness.emit_record(ctx, args, record)
        return 0
    finally:
        harness.teardown_distributed()


if __name__ == "__main__":
    sys.exit(main())
