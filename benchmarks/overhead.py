"""What the suite's harness and `gpubench run` cost over the same work done by hand.

Each comparison but `parts` runs each side once untimed, then its two sides in turn
(A B B A ...) N times, each run a fresh process started from a temporary directory, so
that both sides see the same machine load; it prints each side's runs, their medians
and the ratio (the median of each pair's), and the load average. On a shared machine
runs of one side spread by 5 to 15%; `parts` compares the steps inside one process,
where that cannot tilt the result, and `command` also gives gpubench's own time part
by part. `all` runs every comparison in turn and ends with their figures side by side.

loop      the mnist-ddp harness at one process and one thread against the
          pytorch/examples training loop at one thread: the same Net, batch 64,
          Adadelta (lr 1.0), the same synthetic images, W warm-up steps, then S
          measured steps; samples/s over the measured steps.
            A  OMP_NUM_THREADS=1 python workloads/mnist_ddp.py --steps S --warmup W \\
                   --record-file F              (throughput: F's "throughput")
            B  OMP_NUM_THREADS=1 python benchmarks/overhead.py examples --steps S --warmup W
          B is pytorch/examples' mnist/main.py train(): a Dataset that makes each
          sample a PIL image and then a normalised tensor, a DataLoader (batch 64,
          shuffled), zero_grad, forward, nll_loss, backward, step, a loss.item()
          print every 10 batches; no process group, no DDP.
            A' A with GPUBENCH_MALLOC=default: glibc's malloc as B has it, where A's
               keeps what each step frees (workloads/host_malloc.py)
parts     the same comparison inside one process at one thread, where a shared machine
          cannot tilt it: the variants' steps take turns in blocks (R rounds, a fresh
          random order each), median wall and CPU ms a step (CPU: every thread of the
          process) and the harness's throughput over the plain loop's, round by round.
          mnist: the examples loop (its DataLoader); the same model fed from tensors;
          that with DDP at world size 1 (what harness.replicate spares a world of one);
          the harness's own step (mnist_ddp.Trainer.step inside run_window's timer and
          progress hook, as mnist-ddp runs it). gpt: the plain loop below; it with DDP
          at world size 1; gpt_ddp.Trainer.step as gpt-ddp runs it. Then the per-step
          extras (the step timer, the progress hook) alone. Every variant runs with
          the harness's malloc setting (one process has one), so A' has no part here.
gpt       the gpt-ddp harness at one process and one thread against a plain loop of the
          same model (gpt_ddp.GPT, 4 layers of 256, 256 tokens, batch 2): nanoGPT's
          train.py loop (AdamW with its two weight-decay groups, zero_grad, forward with
          the loss, backward, step), no process group; tokens/s over the measured steps;
          and the harness with glibc's default malloc beside them, as loop's A'.
command   one count of `gpubench run` against the torchrun it runs, typed by hand:
            A  gpubench run mnist-ddp --gpus 1 --repeat 1 --force --quiet \\
                   --results DIR -- --steps S
            B  OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 python -m torch.distributed.run \\
                   --standalone --nproc_per_node=1 workloads/mnist_ddp.py --steps S \\
                   --record-file F                  (its output read from a pipe)
          --script: a user's script instead (this file's `examples` loop: gpubench
          runs it under its step probe and watches its working directory).
          wall time of each whole command; and gpubench's time part by part
          (noted as it runs): its start (the interpreter, the import of its command
          line), parsing and planning, the machine-load window before the run, the
          run, the record and log, the report it prints (pandas, the table); and the
          run itself under gpubench against the run by hand, pair by pair.

    .venv/bin/python benchmarks/overhead.py all     # each below in turn, then their figures
    .venv/bin/python benchmarks/overhead.py loop [--runs 5] [--steps 60] [--warmup 5]
    .venv/bin/python benchmarks/overhead.py parts [mnist|gpt] [--rounds 30]
    .venv/bin/python benchmarks/overhead.py command [--runs 3] [--steps 30] [--script]
    .venv/bin/python benchmarks/overhead.py gpt [--runs 5] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = REPO / "workloads"
BATCH = 64
LOG_INTERVAL = 10  # pytorch/examples mnist: --log-interval
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Both sides of `command` run as from a user's shell, where Python keeps the bytecode it
# compiles (__pycache__): a machine that sets PYTHONDONTWRITEBYTECODE would otherwise
# compile every module of gpubench and of the workload at each start.
AS_A_USER = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# torchrun of one process on this machine, as a user types it (this Python's)
TORCHRUN_ONE = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def median_line(name: str, values: list[float], unit: str) -> str:
    shown = ", ".join(f"{v:.2f}" for v in values)
    return f"  {name:44s} median {statistics.median(values):8.2f} {unit}  ({shown})"


def alternate(sides: dict, runs: int) -> dict[str, list[float]]:
    """Each side's figure, the sides in turn, `runs` times; the first side alternates.
    Each side runs once first, untimed: the first run of a process reads its files from
    disk and compiles what Python had not cached, which no later run pays (2 to 5 s)."""
    figures: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for name in names:
        print(f"    warm-up {name}: {sides[name]():.2f} (not counted)", flush=True)
    for i in range(runs):
        for name in (names if i % 2 == 0 else names[::-1]):
            figures[name].append(sides[name]())
            print(f"    run {i + 1} {name}: {figures[name][-1]:.2f}", flush=True)
    return figures


def paired(figures: dict[str, list[float]], first: str | None = None, second: str | None = None) -> float:
    """The median of one side's figure over another's (the first two, unless named), run
    by run: each pair ran back to back, under much the same load."""
    names = list(figures)
    a_runs, b_runs = figures[first or names[0]], figures[second or names[1]]
    return statistics.median(a / b for a, b in zip(a_runs, b_runs))


# ---------------------------------------------------------------------- loop
# The harness's third side in `loop` and `gpt`: the same run with glibc's malloc as a
# plain loop has it (workloads/host_malloc.py), what keeping freed memory gives apart.
GLIBC_DEFAULT = {"GPUBENCH_MALLOC": "default"}


def workload_run(script: str, argv: tuple, steps: int, warmup: int, env: dict | None = None) -> float:
    """One run of a suite workload at one thread: the throughput its record gives."""
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        record = Path(tmp) / "record.json"
        subprocess.run([sys.executable, str(WORKLOADS / script), *argv, "--steps", str(steps),
                        "--warmup", str(warmup), "--record-file", str(record)],
                       env={**os.environ, **ONE_THREAD, "GPUBENCH_PROGRESS": "on", **(env or {})}, cwd=tmp,
                       check=True, stdout=subprocess.DEVNULL, timeout=3600)
        return float(json.loads(record.read_text())["throughput"])


def plain_run(mode: str, steps: int, warmup: int) -> float:
    """One run of a plain loop (this file's `examples` or `gpt-plain`): the rate it prints last."""
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), mode,
                               "--steps", str(steps), "--warmup", str(warmup)],
                              env={**os.environ, **ONE_THREAD}, cwd=tmp, check=True,
                              capture_output=True, text=True, timeout=3600)
        return float(done.stdout.strip().splitlines()[-1].split()[-2])


def side_by_side(title: str, ours: str, theirs: str, run_ours, run_theirs, unit: str, runs: int,
                 also: dict | None = None) -> dict[str, float]:
    """Our loop and theirs in turn, `runs` times each, with `also`'s sides (a variant of
    ours) among them; medians, and each of ours over theirs (the median of each pair's),
    which it returns by name."""
    print(f"{title}; {load()}")
    figures = alternate({ours: run_ours, theirs: run_theirs, **(also or {})}, runs)
    for name, values in figures.items():
        print(median_line(name, values, unit))
    ratios = {}
    for name in [ours, *(also or {})]:
        a, b = statistics.median(figures[name]), statistics.median(figures[theirs])
        ratios[name] = paired(figures, name, theirs)
        print(f"  ratio {name} / {theirs}: {a / b:.3f} (of the medians), "
              f"{ratios[name]:.3f} (the median of each pair's)")
    print(f"  {load()}")
    return ratios


MNIST_HARNESS, MNIST_DEFAULT_MALLOC = "mnist-ddp harness", "mnist-ddp harness, glibc's default malloc"
GPT_HARNESS, GPT_DEFAULT_MALLOC = "gpt-ddp harness", "gpt-ddp harness, glibc's default malloc"


def loop(args) -> dict[str, float]:
    return side_by_side(f"loop: mnist-ddp harness against the pytorch/examples loop, one process, one thread, "
                 f"{args.steps} steps after {args.warmup}", MNIST_HARNESS, "pytorch/examples loop",
                 lambda: workload_run("mnist_ddp.py", (), args.steps, args.warmup),
                 lambda: plain_run("examples", args.steps, args.warmup), "samples/s", args.runs,
                 {MNIST_DEFAULT_MALLOC:
                  lambda: workload_run("mnist_ddp.py", (), args.steps, args.warmup, GLIBC_DEFAULT)})


def examples(args) -> None:
    """pytorch/examples mnist/main.py's train(), timed as the harness times its window."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(WORKLOADS))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import mnist_data
    from mnist_ddp import Net
    from mnist_loader import PerSampleMNIST
    import torch.nn.functional as F

    loader, model, optimizer = _examples_setup(mnist_data, Net, PerSampleMNIST)
    model.train()
    start = None
    for batch_idx, (data, target) in enumerate(loader):
        if batch_idx == args.warmup:
            start = time.perf_counter()
        if batch_idx == args.warmup + args.steps:
            break
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            print(f"Train Epoch: 1 [{batch_idx * len(data)}/{len(loader.dataset)}]\t"
                  f"Loss: {loss.item():.6f}")
    seconds = time.perf_counter() - start
    print(f"{args.steps} steps in {seconds:.3f} s: {args.steps * BATCH / seconds:.2f} samples/s")


def _examples_setup(mnist_data, net_class, dataset_class):
    """pytorch/examples' set-up: its DataLoader (batch 64, shuffled) over per-sample
    pictures, the Net, Adadelta (lr 1.0)."""
    import torch
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    loader = DataLoader(_examples_dataset(mnist_data, dataset_class), batch_size=BATCH, shuffle=True)
    model = net_class()
    return loader, model, torch.optim.Adadelta(model.parameters(), lr=1.0)


def _examples_dataset(mnist_data, dataset_class):
    """The synthetic images as the uint8 pictures torchvision's MNIST holds."""
    import torch

    split = mnist_data.synthetic()
    raw = ((split.images[:, 0] * mnist_data.STD + mnist_data.MEAN) * 255).round().clamp(0, 255)
    return dataset_class(raw.to(torch.uint8).numpy(), split.labels.numpy())


# ---------------------------------------------------------------------- parts
def parts(args) -> float:
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(WORKLOADS))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import harness

    print(f"parts ({args.workload}): one process, one thread, {args.rounds} rounds of {args.block} "
          f"steps each; {load()}")
    given = {var for var in ("MASTER_ADDR", "MASTER_PORT") if var in os.environ}
    ctx = harness.setup_distributed()  # a world of one, as `python mnist_ddp.py`
    variants, theirs = (_mnist_variants if args.workload == "mnist" else _gpt_variants)(ctx, harness)
    times, cpu = interleaved(variants, args.rounds, args.block)
    base = next(iter(variants))
    print(f"  {'':44s} {'wall ms':>8s} {'ratio':>6s} {'CPU ms':>8s} {'ratio':>6s}  (ratios: to "
          f"the first row, median of each round's)")
    for name in variants:
        print(f"  {name:44s} {statistics.median(times[name]):8.2f} {_ratio(times, name, base):6.3f} "
              f"{statistics.median(cpu[name]):8.2f} {_ratio(cpu, name, base):6.3f}")
    ours = HARNESS_STEP
    print(f"  the harness's throughput over the {theirs}'s: {_ratio(times, theirs, ours):.3f} (wall), "
          f"{_ratio(cpu, theirs, ours):.3f} (CPU); median of each round's")
    extras = _extras_ns(harness)
    print(f"  the harness's per-step extras alone: step timer {extras[0]:.0f} ns, progress hook "
          f"{extras[1]:.0f} ns a step (no line due); {load()}")
    harness.teardown_distributed()
    for var in ("MASTER_ADDR", "MASTER_PORT"):  # set for this world of one: not for later runs
        if var not in given:
            os.environ.pop(var, None)
    return _ratio(times, theirs, ours)


HARNESS_STEP = "harness step (as the workload runs it)"


def _ratio(values: dict[str, list[float]], name: str, base: str) -> float:
    return statistics.median(a / b for a, b in zip(values[name], values[base]))


def interleaved(variants: dict, rounds: int, block: int) -> tuple[dict, dict]:
    """Each variant's wall and CPU ms a step (CPU: every thread of the process, robust to
    a shared machine): after 3 warm-up steps each, `rounds` rounds in which every
    variant runs `block` steps in a row, the variants in a fresh random order each round."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    done = {name: 0 for name in variants}
    for name, step in variants.items():
        for _ in range(3):
            step(done[name])
            done[name] += 1
    rng = random.Random(0)
    for _ in range(rounds):
        names = list(variants)
        rng.shuffle(names)
        for name in names:
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(block):
                variants[name](done[name])
                done[name] += 1
            times[name].append((time.perf_counter() - started) / block * 1000)
            cpu[name].append((time.process_time() - cpu_started) / block * 1000)
    return times, cpu


def _harness_step(harness, step_fn, samples_per_step: int):
    """run_window's body around a workload's step: the step timer, the step, the progress hook."""
    import torch

    timer = harness.StepTimer(torch.device("cpu"))
    progress = harness.ProgressPrinter(samples_per_step, write=lambda line: None)

    def step(i: int) -> None:
        with timer.step():
            step_fn(i)
        progress.after_step(i + 1)
    return step


def _mnist_variants(ctx, harness) -> tuple[dict, str]:
    import torch
    import mnist_data
    import torch.nn.functional as F
    from mnist_ddp import Net, Trainer
    from mnist_loader import PerSampleMNIST
    from torch.nn.parallel import DistributedDataParallel as DDP

    split = mnist_data.synthetic()
    order = torch.randperm(len(split), generator=torch.Generator().manual_seed(0))

    def fed_from_tensors(ddp: bool):
        torch.manual_seed(0)
        model = DDP(Net()) if ddp else Net()
        optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)

        def step(i: int) -> None:
            i %= len(split) // BATCH
            idx = order[i * BATCH:(i + 1) * BATCH]
            optimizer.zero_grad(set_to_none=True)
            F.nll_loss(model(split.images[idx]), split.labels[idx]).backward()
            optimizer.step()
        return step

    def examples_loop():
        loader, model, optimizer = _examples_setup(mnist_data, Net, PerSampleMNIST)
        batches = iter(loader)

        def step(_i: int) -> None:
            nonlocal batches
            try:
                data, target = next(batches)
            except StopIteration:
                batches = iter(loader)
                data, target = next(batches)
            optimizer.zero_grad()
            F.nll_loss(model(data), target).backward()
            optimizer.step()
        return step

    trainer = Trainer(ctx, argparse.Namespace(batch_size=BATCH, seed=0, compile=False,
                                              precision="fp32"), split)
    examples = "pytorch/examples loop (its DataLoader)"
    return {examples: examples_loop(),
            "fed from tensors, no DDP": fed_from_tensors(False),
            "+ DDP at world size 1 (what replicate spares)": fed_from_tensors(True),
            HARNESS_STEP: _harness_step(harness, trainer.step, BATCH)}, examples


def _gpt_variants(ctx, harness) -> tuple[dict, str]:
    import gpt_ddp
    from torch.nn.parallel import DistributedDataParallel as DDP

    cfg, batch = _gpt_config(gpt_ddp)
    trainer = gpt_ddp.Trainer(ctx, argparse.Namespace(batch_size=batch, seed=0, compile=False,
                                                      precision="fp32"), cfg)
    plain = "plain loop (nanoGPT's train.py)"
    return {plain: _plain_gpt_step(gpt_ddp, cfg, batch),
            "+ DDP at world size 1 (what replicate spares)": _plain_gpt_step(gpt_ddp, cfg, batch, DDP),
            HARNESS_STEP: _harness_step(harness, trainer.step, batch * cfg.block_size)}, plain


def _extras_ns(harness) -> tuple[float, float]:
    import torch

    timer = harness.StepTimer(torch.device("cpu"))
    progress = harness.ProgressPrinter(BATCH, write=lambda line: None, every_s=3600)
    n = 200_000
    started = time.perf_counter()
    for _ in range(n):
        with timer.step():
            pass
    timed = (time.perf_counter() - started) / n * 1e9
    started = time.perf_counter()
    for i in range(n):
        progress.after_step(i)
    return timed, (time.perf_counter() - started) / n * 1e9


# ---------------------------------------------------------------------- command
# gpubench run as the user runs it, with the moments that split its time besides
# torchrun's noted (a clock read at each; the last line on stderr, as JSON)
INSTRUMENTED = """
import json, sys, time
t0 = time.perf_counter()
seen = {}
import gpubench.cli as cli
seen["imported"] = time.perf_counter() - t0
from gpubench.cli import run_cmd
from gpubench.launch import local
from gpubench.onhost import machine_load

def noted(module, name, key):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        seen[key + " begins"] = time.perf_counter() - t0
        try:
            return inner(*args, **kwargs)
        finally:
            seen[key + " ends"] = time.perf_counter() - t0
    setattr(module, name, wrapper)

noted(machine_load, "before", "window")
noted(local, "stream_process", "torchrun")
noted(run_cmd, "_report", "report")
try:
    cli.entry()
finally:
    seen["end"] = time.perf_counter() - t0
    print(json.dumps(seen), file=sys.stderr)
"""


@dataclass(frozen=True)
class Counted:
    """What one count runs: through gpubench (`run_argv`: gpubench run's own arguments)
    and by hand (`script_argv`: torchrun's, after --nproc_per_node)."""

    name: str
    run_argv: tuple[str, ...]
    script_argv: tuple[str, ...]
    in_suite: bool  # a suite workload: by hand, it is given --record-file as gpubench gives it


def counted(script: bool, steps: int) -> Counted:
    """mnist-ddp, a suite workload; or, with `script`, a user's script: this file's
    pytorch/examples loop (`examples`), which gpubench runs under its step probe."""
    if script:
        argv = ("examples", "--steps", str(steps))
        return Counted("a script (the pytorch/examples loop)", (str(Path(__file__).resolve()), "--", *argv),
                       (str(Path(__file__).resolve()), *argv), in_suite=False)
    return Counted("mnist-ddp", ("mnist-ddp", "--", "--steps", str(steps)),
                   (str(WORKLOADS / "mnist_ddp.py"), "--steps", str(steps)), in_suite=True)


def gpubench_run(what: Counted, phases: list[dict]) -> float:
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", INSTRUMENTED, "run", what.run_argv[0], "--gpus", "1",
                               "--repeat", "1", "--force", "--quiet", "--results",
                               str(Path(tmp) / "r"), *what.run_argv[1:]],
                              env=AS_A_USER, cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=3600)
        whole = time.perf_counter() - started
        seen = json.loads(done.stderr.strip().splitlines()[-1])
        phases.append({
            "python start and exit": whole - seen["end"],
            "import gpubench.cli": seen["imported"],
            "parse, open, plan (to the window)": seen["window begins"] - seen["imported"],
            "machine-load window before the run": seen["window ends"] - seen["window begins"],
            "to torchrun's start": seen["torchrun begins"] - seen["window ends"],
            "torchrun (the run itself)": seen["torchrun ends"] - seen["torchrun begins"],
            "record, log (to the report)": seen["report begins"] - seen["torchrun ends"],
            "the report (pandas, the table)": seen["report ends"] - seen["report begins"],
            "to exit": seen["end"] - seen["report ends"]})
        return whole


def torchrun_by_hand(what: Counted) -> float:
    """The torchrun gpubench shows in its record, typed by hand: its output read from
    a pipe to the end, as a terminal or `| tee` would take it."""
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        record = ("--record-file", str(Path(tmp) / "record.json")) if what.in_suite else ()
        started = time.perf_counter()
        subprocess.run([*TORCHRUN_ONE, what.script_argv[0], *record, *what.script_argv[1:]],
                       env={**AS_A_USER, **ONE_THREAD, "PYTHONUNBUFFERED": "1"}, cwd=tmp,
                       check=True, capture_output=True, timeout=3600)
        return time.perf_counter() - started


@dataclass(frozen=True)
class CommandFigures:
    """What `command` found: gpubench's own time over the by-hand run's (`own_share`),
    and the whole command's over it, pair by pair (`end_to_end`)."""

    own_share: float
    end_to_end: float


def command(args) -> CommandFigures:
    what = counted(args.script, args.steps)
    print(f"command: one count of gpubench run against torchrun by hand, {what.name}, "
          f"{args.steps} steps; {load()}")
    phases: list[dict] = []
    figures = alternate({"gpubench run": lambda: gpubench_run(what, phases),
                         "torchrun by hand": lambda: torchrun_by_hand(what)}, args.runs)
    phases = phases[1:]  # the first was the warm-up
    for name, values in figures.items():
        print(median_line(name, values, "s"))
    ours, theirs = (statistics.median(v) for v in figures.values())
    end_to_end = paired(figures)
    print(f"  ratio gpubench / by hand: {ours / theirs:.3f} ({ours - theirs:+.2f} s) of the "
          f"medians, {end_to_end:.3f} the median of each pair's; {load()}")
    print("  gpubench's time, part by part (medians of its runs):")
    for name in phases[0]:
        print(f"    {name:40s} {statistics.median(p[name] for p in phases):7.3f} s")
    besides = [sum(v for k, v in p.items() if not k.startswith("torchrun")) for p in phases]
    own_share = statistics.median(besides) / theirs
    print(f"    {'all but torchrun':40s} {statistics.median(besides):7.3f} s, "
          f"{own_share:.1%} of the by-hand median")
    # the run itself under gpubench against the same run by hand, pair by pair: what
    # gpubench's threads beside it (its output reader, the memory watch, the report's
    # import) might cost it, against what the machine's own swings give
    slower = [p["torchrun (the run itself)"] - hand for p, hand in zip(phases, figures["torchrun by hand"])]
    spread = statistics.pstdev(figures["torchrun by hand"])
    print(f"  the run under gpubench minus the run by hand, pair by pair: median {statistics.median(slower):+.2f} s "
          f"({', '.join(f'{d:+.2f}' for d in slower)}); the by-hand runs themselves spread by "
          f"{spread:.2f} s (standard deviation)")
    return CommandFigures(own_share, end_to_end)


# ---------------------------------------------------------------------- gpt
# A GPT small enough for a CPU step of a fraction of a second: gpt-ddp's own model class.
GPT_SHAPE = ("--n-layer", "4", "--n-head", "4", "--n-embd", "256", "--block-size", "256",
             "--vocab-size", "8192", "--batch-size", "2")


def gpt(args) -> dict[str, float]:
    return side_by_side(f"gpt: gpt-ddp harness against a plain loop of the same model (nanoGPT's train.py "
                 f"loop, no process group), one process, one thread, {' '.join(GPT_SHAPE)}, "
                 f"{args.steps} steps after {args.warmup}", GPT_HARNESS, "plain loop",
                 lambda: workload_run("gpt_ddp.py", GPT_SHAPE, args.steps, args.warmup),
                 lambda: plain_run("gpt-plain", args.steps, args.warmup), "tokens/s", args.runs,
                 {GPT_DEFAULT_MALLOC:
                  lambda: workload_run("gpt_ddp.py", GPT_SHAPE, args.steps, args.warmup, GLIBC_DEFAULT)})


def _gpt_config(gpt_ddp):
    shape = dict(zip(GPT_SHAPE[::2], GPT_SHAPE[1::2]))
    cfg = gpt_ddp.GPTConfig(int(shape["--block-size"]), int(shape["--vocab-size"]), int(shape["--n-layer"]),
                            int(shape["--n-head"]), int(shape["--n-embd"]))
    return cfg, int(shape["--batch-size"])


def _plain_gpt_step(gpt_ddp, cfg, batch: int, wrap=None):
    """nanoGPT's train.py loop over gpt_ddp.GPT: AdamW (its settings, two weight-decay
    groups), random tokens made up front, zero_grad, forward with the loss, backward,
    step; `wrap` (DDP) around the model, or none."""
    import torch

    torch.manual_seed(0)
    model = gpt_ddp.GPT(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=6e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, cfg.vocab_size, (4, batch, cfg.block_size + 1))
    module = wrap(model) if wrap else model
    module.train()

    def step(i: int) -> None:
        x, y = tokens[i % 4, :, :-1], tokens[i % 4, :, 1:]
        optimizer.zero_grad(set_to_none=True)
        loss = module(x, y)
        loss.backward()
        optimizer.step()
    return step


def gpt_plain(args) -> None:
    """One run of the plain loop (_plain_gpt_step), timed as the harness times its window."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(WORKLOADS))
    import gpt_ddp

    cfg, batch = _gpt_config(gpt_ddp)
    step = _plain_gpt_step(gpt_ddp, cfg, batch)
    start = None
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            start = time.perf_counter()
        step(i)
    seconds = time.perf_counter() - start
    print(f"{args.steps} steps in {seconds:.3f} s: {args.steps * batch * cfg.block_size / seconds:.2f} tokens/s")


LONG_COUNT_STEPS = 160  # mnist-ddp at one thread: 16 to 20 s under torchrun on a 2-core machine


def everything(args) -> None:
    """Every comparison in one run, in turn, then their headline figures together."""
    def with_(**given):
        return argparse.Namespace(**{"warmup": 5, **given})

    rows = [
        ("parts mnist --rounds 20", "mnist-ddp harness step / pytorch/examples loop, one process (wall)",
         parts(with_(workload="mnist", rounds=20, block=2)), ">= 1.0"),
        ("parts gpt --rounds 12", "gpt-ddp harness step / plain nanoGPT loop, one process (wall)",
         parts(with_(workload="gpt", rounds=12, block=2)), ">= 1.0"),
    ]
    mnist, gpt_ = loop(with_(runs=5, steps=60)), gpt(with_(runs=5, steps=20))
    rows += [
        ("loop --runs 5 --steps 60", "mnist-ddp harness / pytorch/examples loop, processes in turn",
         mnist[MNIST_HARNESS], ">= 1.0"),
        ("loop (A')", "  the same, the harness with glibc's default malloc", mnist[MNIST_DEFAULT_MALLOC], "-"),
        ("gpt --runs 5 --steps 20", "gpt-ddp harness / plain nanoGPT loop, processes in turn",
         gpt_[GPT_HARNESS], ">= 1.0"),
        ("gpt (A')", "  the same, the harness with glibc's default malloc", gpt_[GPT_DEFAULT_MALLOC], "-"),
    ]
    # a short count, where gpubench's own time weighs most; then one about as long by hand
    # as nanoGPT's train.py count measured on an H200 (60 iterations, 16.6 s under torchrun)
    for runs, steps, script, what in ((7, 30, False, "mnist-ddp"), (7, 30, True, "a script"),
                                      (5, LONG_COUNT_STEPS, False, "mnist-ddp, a longer count")):
        found = command(with_(runs=runs, steps=steps, script=script))
        how = f"command --runs {runs} --steps {steps}" + (" --script" if script else "")
        rows += [(how, f"gpubench's own time / torchrun by hand, {what}", found.own_share, "<= 0.05"),
                 (how, f"gpubench run / torchrun by hand, whole command, {what}", found.end_to_end,
                  "<= 1.05")]
    print(f"\nall, {time.strftime('%Y-%m-%d %H:%M')}, {load()}:")
    for how, what, figure, target in rows:
        print(f"  {what:70s} {figure:6.3f}  (target {target}; overhead.py {how})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for name, runs, steps in (("loop", 5, 60), ("command", 3, 30), ("gpt", 5, 20)):
        p = sub.add_parser(name)
        p.add_argument("--runs", type=int, default=runs, help="runs of each side, alternating")
        p.add_argument("--steps", type=int, default=steps, help="measured steps")
        p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps")
        if name == "command":
            p.add_argument("--script", action="store_true",
                           help="count a user's script (the pytorch/examples loop) instead of mnist-ddp")
    sub.add_parser("all", help="every comparison in one run, then their figures together")
    p = sub.add_parser("parts")
    p.add_argument("workload", nargs="?", choices=("mnist", "gpt"), default="mnist")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=2, help="steps of one variant in a row")
    p = sub.add_parser("examples", help="one run of the pytorch/examples loop (loop's side B)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p = sub.add_parser("gpt-plain", help="one run of the plain GPT loop (gpt's side B)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    {"loop": loop, "parts": parts, "command": command, "examples": examples, "gpt": gpt,
     "gpt-plain": gpt_plain, "all": everything}[args.what](args)


if __name__ == "__main__":
    main()
