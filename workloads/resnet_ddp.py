"""ResNet-50 (written out in plain PyTorch) trained with DistributedDataParallel
on synthetic ImageNet-shaped batches, in channels_last memory format.

    python workloads/resnet_ddp.py --steps 50                                    # one process
    torchrun --standalone --nproc_per_node=4 workloads/resnet_ddp.py --steps 200 --precision bf16
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d \\
        --rdzv_endpoint=HEAD:29500 workloads/resnet_ddp.py --steps 200            # 2 nodes
    python workloads/resnet_ddp.py --depth 18 --width 8 --image-size 32 --steps 3 # tiny, for a CPU

The batches are random tensors made once on the device, so the loop measures
the GPU and the all-reduce, not a JPEG decoder: the figure to compare with is
a synthetic-data ResNet-50 training benchmark (images/s per GPU). An "epoch"
is ImageNet-1k's 1,281,167 training images; without --steps or --epochs the
run is 200 steps after the warm-up. On a CPU the defaults shrink to what a CPU
machine holds (batch 8, 2 warm-up and 10 measured steps: flags.DEVICE_SIZES),
and the record says so (size: cpu).
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import flags
import harness

WORKLOAD = "resnet-ddp"
# batch per GPU: 256, in the range MLPerf and NVIDIA's examples use (16 on a CPU: flags.DEVICE_SIZES)
IMAGENET_TRAIN_IMAGES = 1_281_167
SYNTHETIC_BATCHES = 4  # distinct random batches cycled through, made once on the device
DEFAULT_STEPS = flags.GPU_DEFAULT_STEPS["resnet-ddp"]  # without --steps or --epochs

# torchvision's table: (block, blocks per stage) for each depth
ARCHS = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _shortcut(inplanes, planes * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.downsample(x), inplace=True)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride, as torchvision's v1.5 does), 1x1 expand."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.downsample = _shortcut(inplanes, planes * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = F.relu(self.bn2(self.conv2(out)), inplace=True)
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.downsample(x), inplace=True)


def _shortcut(inplanes: int, outplanes: int, stride: int) -> nn.Module:
    if stride == 1 and inplanes == outplanes:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(inplanes, outplanes, 1, stride, bias=False),
                         nn.BatchNorm2d(outplanes))


class ResNet(nn.Module):
    def __init__(self, depth: int = 50, width: int = 64, num_classes: int = 1000) -> None:
        super().__init__()
        kind, layers = ARCHS[depth]
        block = Bottleneck if kind == "bottleneck" else BasicBlock
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1))
        stages, inplanes = [], width
        for i, blocks in enumerate(layers):
            planes = width * 2 ** i
            for j in range(blocks):
                stages.append(block(inplanes, planes, stride=2 if i > 0 and j == 0 else 1))
                inplanes = planes * block.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        for m in self.modules():  # zero-init the last BN of each residual branch
            if isinstance(m, (Bottleneck, BasicBlock)):
                nn.init.zeros_((m.bn3 if isinstance(m, Bottleneck) else m.bn2).weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class Trainer:
    """One DDP replica: SGD with momentum on cycled synthetic batches."""

    def __init__(self, ctx: harness.Dist, args) -> None:
        self.ctx = ctx
        self.args = args
        model = ResNet(args.depth, args.width, args.num_classes)
        model = model.to(ctx.device, memory_format=torch.channels_last)
        self.n_params = sum(p.numel() for p in model.parameters())
        self.model = harness.replicate(ctx, model)
        if args.compile:
            self.model = torch.compile(self.model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9,
                                         weight_decay=1e-4)
        self.scaler = harness.grad_scaler(ctx, args.precision)
        self.criterion = nn.CrossEntropyLoss()
        g = torch.Generator(device=ctx.device).manual_seed(args.seed + ctx.rank)
        shape = (args.batch_size, 3, args.image_size, args.image_size)
        self.images = [torch.randn(shape, generator=g, device=ctx.device)
                       .contiguous(memory_format=torch.channels_last) for _ in range(SYNTHETIC_BATCHES)]
        self.labels = [torch.randint(0, args.num_classes, (args.batch_size,), generator=g,
                                     device=ctx.device) for _ in range(SYNTHETIC_BATCHES)]

    def step(self, step: int) -> None:
        x, y = self.images[step % SYNTHETIC_BATCHES], self.labels[step % SYNTHETIC_BATCHES]
        self.optimizer.zero_grad(set_to_none=True)
        with harness.autocast(self.ctx, self.args.precision):
            loss = self.criterion(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def main(argv: list[str] | None = None) -> int:
    args = flags.parse(WORKLOAD, argv)
    torch.manual_seed(args.seed)
    shapes = harness.fixed_shapes()
    ctx = harness.setup_distributed()
    size = flags.size_for_device(WORKLOAD, args, ctx.device.type)
    try:
        trainer = Trainer(ctx, args)
        global_batch = args.batch_size * ctx.world_size
        steps_per_epoch = max(1, IMAGENET_TRAIN_IMAGES // global_batch)
        steps = harness.measured_steps(args, steps_per_epoch, DEFAULT_STEPS)
        timer = harness.measure(ctx, args, trainer.step, steps, model=trainer.model)
        record = harness.build_record(
            ctx, args, workload=WORKLOAD, timer=timer, steps=steps,
            samples_per_step=global_batch, epoch_samples=IMAGENET_TRAIN_IMAGES, unit="images/s",
            model=trainer.model,
            extra={"model": f"resnet{args.depth}", "depth": args.depth, "width": args.width,
                   "image_size": args.image_size, "num_classes": args.num_classes,
                   "memory_format": "channels_last",
                   "conv_tf32": torch.backends.cudnn.allow_tf32 and ctx.device.type == "cuda",
                   "data": "synthetic", "steps_per_epoch": steps_per_epoch,
                   "epochs": steps / steps_per_epoch, "size": size, **shapes},
        )
        record["images_per_s_per_gpu"] = (record["throughput"] / ctx.world_size
                                          if record["throughput"] else None)
        harness.emit_record(ctx, args, record)
        return 0
    finally:
        harness.teardown_distributed()


if __name__ == "__main__":
    sys.exit(main())
