"""What a sweep tells its listener while it runs, as lines that carry their facts.

Each event is a str: the line a plain listener (print, a list, a log) shows as it
always has. A live display (gpubench.cli.progress) also reads its fields, so the
sweep and everything that passes its echo along (bench, the launchers) need no
second callback.
"""

from __future__ import annotations

from gpubench.launch.gpu_sampling import parse_live_line
from gpubench.workloads.metrics import parse_progress


class RunStarted(str):
    """A run of the sweep begins: run `index` of `total` (this sweep's, skips left out)."""

    def __new__(cls, text: str, *, workload: str, where: str, index: int, total: int,
                provider: str, gpu_name: str, price_per_hour: float | None,
                accelerator: str = "cuda") -> "RunStarted":
        event = super().__new__(cls, text)
        event.workload, event.where, event.index, event.total = workload, where, index, total
        event.provider, event.gpu_name, event.price_per_hour = provider, gpu_name, price_per_hour
        event.accelerator = accelerator     # "cpu": the run has no GPU to watch
        return event


class RunStep(str):
    """A workload's progress line (metrics.progress_line) as the sweep read it."""

    def __new__(cls, text: str, *, phase: str, step: int, total: int, elapsed: float | None,
                rate: float | None, unit: str, gpu_util: float | None,
                gpu_mem: float | None) -> "RunStep":
        event = super().__new__(cls, text)
        event.phase, event.step, event.total, event.elapsed = phase, step, total, elapsed
        event.rate, event.unit, event.gpu_util, event.gpu_mem = rate, unit, gpu_util, gpu_mem
        return event


class GpuSample(str):
    """One GPU of a node sampled as the run goes (gpu_sampling.live_line): `gpu` as
    cli/gpu_history.py keeps it, on `node` ("" on a machine of one node)."""

    def __new__(cls, text: str, *, node: str, gpu: dict) -> "GpuSample":
        event = super().__new__(cls, text)
        event.node, event.gpu = node, gpu
        return event


class RunEnded(str):
    """The run is recorded; ok or not."""

    def __new__(cls, text: str, *, ok: bool) -> "RunEnded":
        event = super().__new__(cls, text)
        event.ok = ok
        return event


def step_from_line(line: str, prefix: str = "") -> RunStep | None:
    """The workload's progress line as a RunStep (its text readable, with `prefix`);
    None for every other line."""
    fields = parse_progress(line)
    if fields is None:
        return None
    rate, unit = fields.get("rate"), fields.get("unit", "samples/s")
    text = f"{prefix}{'warm-up ' if fields['phase'] == 'warmup' else ''}step {fields['step']} of {fields['total']}"
    if rate is not None:
        text += f", {rate:,.1f} {unit}"
    return RunStep(text, phase=fields["phase"], step=fields["step"], total=fields["total"],
                   elapsed=fields.get("elapsed"), rate=rate, unit=unit,
                   gpu_util=fields.get("gpu_util"), gpu_mem=fields.get("gpu_mem"))


def gpu_from_line(line: str) -> GpuSample | None:
    """A node's GPU sample line (gpu_sampling.live_line, behind a cluster's '[nodeI] ') as
    a GpuSample; None for every other line."""
    node, rest = "", line
    if line.startswith("[node") and "] " in line:
        node, _, rest = line[1:].partition("] ")
    gpu = parse_live_line(rest)
    return None if gpu is None else GpuSample(line, node=node, gpu=gpu)


def named(line: str, name: str) -> str:
    """`line` as machine `name` of several says it ('[name] line'): a GpuSample stays
    one, its node named by the machine ("name node0"), so that a display draws it and
    never prints it; any other line becomes plain text."""
    if isinstance(line, GpuSample):
        return GpuSample(f"[{name}] {line}", node=f"{name} {line.node}".strip(), gpu=line.gpu)
    return f"[{name}] {line}"
