"""pytorch/examples' MNIST Net and Adadelta at batch 64, its data on the device (60,000
synthetic images, as the suite's mnist-ddp keeps MNIST there), trained under torchrun.

    torchrun --nproc_per_node=N mnist_net.py               # DDP only where the world is larger than one
    torchrun --nproc_per_node=N mnist_net.py --always-ddp  # DDP at one process too

A user's script as gpubench predicts and measures it (benchmarks/predict_accuracy.py
scripts); the device is CUDA where there is one, else the CPU (gloo)."""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--images", type=int, default=60_000)
    parser.add_argument("--always-ddp", action="store_true")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    images = torch.randn(args.images, 1, 28, 28, device=device)
    labels = torch.randint(0, 10, (args.images,), device=device)
    model = Net().to(device)
    if world > 1 or args.always_ddp:
        model = DDP(model)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    mine = torch.arange(rank, args.images, world, device=device)
    for step in range(args.steps):
        at = (step * args.batch_size) % (len(mine) - args.batch_size)
        index = mine[at:at + args.batch_size]
        optimizer.zero_grad()
        loss = F.nll_loss(model(images[index]), labels[index])
        loss.backward()
        optimizer.step()
        if step % 50 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
