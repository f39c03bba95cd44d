"""What the script probe (workloads/script_probe.py) adds to each training step.

A synthetic training step, run with and without the probe: a small model's forward,
backward and optimizer step (SGD, batch 32), then W ms of work (a busy loop on the
CPU; on a GPU, matrix products sized to take about W ms, which the probe synchronises
at the step's end). Each side is a fresh process, started in turn (A B A B ...) so
that both see the same machine load:

    A  python STEP.py STEPS W            (the step alone)
    B  python workloads/script_probe.py STEP.py STEPS W
                                         (the same, under the probe: its forward
                                         hook, the optimizer-step and backward hooks,
                                         the clock and, on a GPU, the synchronisation)

Each process times its own steps (perf_counter, after a warm-up of 20 steps) and
prints their median; the figures are the medians over the runs of each side, their
ratio (B / A) and the probe's cost a step in microseconds. A second pass with W = 0
shows the cost against the bare step, where it is not hidden in W's noise.

On a machine shared with other work those wall-clock figures move by more than the
probe costs, so the probe's own work a step is also measured in one process, in CPU
time (thread_time), each part against the same call without it, in alternating
blocks: a forward call of a model with the probe's pre-hook against one without
(the hook's dispatch and its counting), the optimizer-step hook as torch calls it,
and the backward wrapper around an empty call. Their sum over W is the ratio for a
step of W ms (CPU; a GPU adds the synchronisation at the step's end, measured only
by the A/B runs on a GPU).

With --parts, the cost of splitting each step into its parts (workloads/step_parts.py:
the DataLoader's __next__ timed, the span from the first forward to the optimizer's end,
DDP asked to time every iteration and its timing read at each step's end) instead: a step
that draws its batch from a DataLoader and trains a model wrapped in DDP (a gloo world of
one), run under the probe with the parts measured (B) and with GPUBENCH_STEP_PARTS=off
(A), alternating; and the parts' own work a step in CPU time, in one process: reading
DDP's timing (_get_ddp_logging_data, step_parts.ddp_exposed), the step's arithmetic
(split_step), the timed __next__ against the bare one, and a DDP forward and backward
timed by DDP at every iteration against one at its default sampling.

    .venv/bin/python benchmarks/probe_overhead.py [--runs 5] [--steps 400] [--work-ms 10]
        [--device cpu|cuda] [--parts]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "workloads" / "script_probe.py"
WARMUP = 20

STEP = '''\
import json, sys, time
import torch
from torch import nn

steps, work_s, device = int(sys.argv[1]), float(sys.argv[2]) / 1000.0, sys.argv[3]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)
if device == "cuda":  # matrix products that take about work_s on this GPU
    a = torch.randn(2048, 2048, device=device)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    products = max(1, round(work_s / ((time.perf_counter() - t) / 20)))
times = []
for i in range(steps + ''' + str(WARMUP) + '''):
    t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if device == "cuda":
        for _ in range(products):
            a @ a
        torch.cuda.synchronize()  # the step's end, as a script reading loss.item() has it
    else:
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < work_s:
            pass
    times.append(time.perf_counter() - t0)
timed = sorted(times[''' + str(WARMUP) + ''':])
print(json.dumps({"median_s": timed[len(timed) // 2]}))
'''


PARTS_STEP = '''\
import json, socket, sys, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

steps, work_s, device = int(sys.argv[1]), float(sys.argv[2]) / 1000.0, sys.argv[3]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(32 * 64, 64), torch.randint(0, 10, (32 * 64,))),
                    batch_size=32)
batches = iter(loader)
times = []
for i in range(steps + ''' + str(WARMUP) + '''):
    t0 = time.perf_counter()
    try:
        x, y = next(batches)
    except StopIteration:
        batches = iter(loader)
        x, y = next(batches)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < work_s:
        pass
    times.append(time.perf_counter() - t0)
timed = sorted(times[''' + str(WARMUP) + ''':])
print(json.dumps({"median_s": timed[len(timed) // 2]}))
dist.destroy_process_group()
'''


def run_once(script: Path, probed: bool, steps: int, work_ms: float, device: str,
             parts: bool | None = None) -> float:
    """One process's median step; `parts` (under the probe): the parts measured or not."""
    argv = [sys.executable, *([str(PROBE)] if probed else []), str(script), str(steps),
            str(work_ms), device]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if parts is not None:
        env["GPUBENCH_STEP_PARTS"] = "on" if parts else "off"
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)["median_s"]


def compare(script: Path, runs: int, steps: int, work_ms: float, device: str,
            parts: bool = False) -> dict:
    """A against B, alternating: without the probe and with it; with `parts`, both under
    the probe, without the parts' measuring and with it."""
    bare, probed = [], []
    for _ in range(runs):
        if parts:
            bare.append(run_once(script, True, steps, work_ms, device, parts=False))
            probed.append(run_once(script, True, steps, work_ms, device, parts=True))
            continue
        bare.append(run_once(script, False, steps, work_ms, device))
        probed.append(run_once(script, True, steps, work_ms, device))
    a, b = statistics.median(bare), statistics.median(probed)
    return {"work_ms": work_ms, "bare_ms": [round(t * 1e3, 4) for t in bare],
            "probed_ms": [round(t * 1e3, 4) for t in probed], "bare_median_ms": a * 1e3,
            "probed_median_ms": b * 1e3, "ratio": b / a, "cost_us": (b - a) * 1e6}


def hook_costs(blocks: int = 30, calls: int = 2000) -> dict:
    """The probe's own work a step, in microseconds of CPU time (see the docstring)."""
    sys.path.insert(0, str(PROBE.parent))
    import script_probe

    script_probe._install()
    import torch
    from torch import nn

    torch.set_num_threads(1)
    steps = script_probe._steps
    hooked, bare = nn.Linear(64, 10), nn.Linear(64, 10)
    x = torch.randn(32, 64)
    hooked(x)  # the probe takes the first module called with gradients for the model
    assert steps.model is hooked
    optimizer = torch.optim.SGD(hooked.parameters(), lr=0.01)
    hooked(x).sum().backward()
    optimizer.step()  # the first optimizer to step: its steps are the steps

    def per_call(fn) -> float:
        start = time.thread_time()
        for _ in range(calls):
            fn()
        return (time.thread_time() - start) / calls

    def empty() -> None:
        return None

    wrapped_empty = script_probe._after(empty, steps.on_backward)
    parts = {"forward": ([], []), "optimizer step": ([], []), "backward": ([], [])}
    for _ in range(blocks):
        parts["forward"][0].append(per_call(lambda: hooked(x)))
        parts["forward"][1].append(per_call(lambda: bare(x)))
        parts["optimizer step"][0].append(per_call(lambda: steps.on_optimizer_step(optimizer, (), {})))
        parts["optimizer step"][1].append(per_call(empty))
        parts["backward"][0].append(per_call(wrapped_empty))
        parts["backward"][1].append(per_call(empty))
    return {name: (statistics.median(a) - statistics.median(b)) * 1e6
            for name, (a, b) in parts.items()}


def parts_costs(blocks: int = 30, calls: int = 2000) -> dict:
    """The parts' own work a step, in microseconds of CPU time (see the docstring)."""
    import socket

    sys.path.insert(0, str(PROBE.parent))
    import script_probe

    script_probe._install()
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    steps = script_probe._steps
    model = torch.nn.parallel.DistributedDataParallel(nn.Linear(64, 10))  # watched: DDP's timing read
    x = torch.randn(32, 64)
    for _ in range(3):
        model(x).sum().backward()
    model(x)  # DDP logs the iteration before at each forward
    assert steps.ddp, "the probe did not see the DDP model"
    module = script_probe._step_parts()
    data = TensorDataset(torch.randn(calls * 2, 4))

    def per_call(fn) -> float:
        start = time.thread_time()
        for _ in range(calls):
            fn()
        return (time.thread_time() - start) / calls

    def per_call_n(fn, n: int) -> float:
        start = time.thread_time()
        for _ in range(n):
            fn()
        return (time.thread_time() - start) / n

    def read_ddp() -> None:
        steps.ddp_iterations.clear()  # as at a step's end: a new iteration to read
        steps._exposed()

    def empty() -> None:
        return None

    loader = DataLoader(data, batch_size=1)
    parts = {"DDP's timing read": ([], []), "the step's arithmetic": ([], []),
             "the timed __next__": ([], []), "DDP timing every iteration": ([], [])}

    def ddp_step() -> None:
        model(x).sum().backward()

    for _ in range(blocks):
        model._set_ddp_runtime_logging_sample_rate(1)  # as the probe asks
        parts["DDP timing every iteration"][0].append(per_call_n(ddp_step, 300))
        model._set_ddp_runtime_logging_sample_rate(10**9)  # as DDP's default after iteration 10
        parts["DDP timing every iteration"][1].append(per_call_n(ddp_step, 300))
        parts["DDP's timing read"][0].append(per_call(read_ddp))
        parts["DDP's timing read"][1].append(per_call(empty))
        parts["the step's arithmetic"][0].append(per_call(
            lambda: module.split_step(0.01, data=0.001, span=0.008, comm=0.0005)))
        parts["the step's arithmetic"][1].append(per_call(empty))
        it = iter(loader)
        parts["the timed __next__"][0].append(per_call(lambda: next(it)))
        base = type(it).__mro__[1].__next__.__wrapped__  # _BaseDataLoaderIter's own
        it = iter(loader)
        parts["the timed __next__"][1].append(per_call(lambda: base(it)))
    dist.destroy_process_group()
    return {name: (statistics.median(a) - statistics.median(b)) * 1e6
            for name, (a, b) in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--work-ms", type=float, default=10.0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--parts", action="store_true",
                        help="the cost of the step's parts (under the probe, with and without)")
    args = parser.parse_args()
    if args.parts:
        side_by_side(args, "the parts'", parts_costs(), PARTS_STEP, "a DDP step from a DataLoader",
                     ("without the parts", "with the parts"), parts=True, both_probed=True)
    else:
        side_by_side(args, "the probe's", hook_costs(), STEP, "step",
                     ("without the probe", "with the probe"))


def side_by_side(args, what: str, costs: dict, step_source: str, step: str, sides: tuple[str, str],
                 parts: bool = False, both_probed: bool = False) -> None:
    """`what` own CPU time a step ("the probe's"), then the step script timed without and
    with it."""
    total = sum(costs.values())
    print(f"{what} own work a step (CPU time, in one process): "
          + ", ".join(f"{name} {us:.2f} us" for name, us in costs.items()))
    print(f"  {total:.2f} us a step: ratio {1 + total / (args.work_ms * 1e3):.5f} for a "
          f"{args.work_ms:g} ms step")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "step.py"
        script.write_text(step_source)
        for work in (args.work_ms, 0.0):
            found = compare(script, args.runs, args.steps, work, args.device, parts=parts)
            print(f"{args.device}, {step} + {work:g} ms of work, {args.steps} steps, {args.runs} runs a side"
                  + (", both under the probe" if both_probed else ""))
            print(f"  {sides[0]:17}  {found['bare_median_ms']:9.4f} ms  {found['bare_ms']}")
            print(f"  {sides[1]:17}  {found['probed_median_ms']:9.4f} ms  {found['probed_ms']}")
            print(f"  ratio {found['ratio']:.4f}  ({found['cost_us']:+.1f} us a step)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
