"""What every test folder may use: where the checkout is, the settings each test runs
under, and the real `gpubench` executable run in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from gpubench.providers import registry

if TYPE_CHECKING:
    from gpubench.mock import MockCloud

REPO = Path(__file__).resolve().parent.parent
# The console script this test run installed (the editable install in the same venv).
GPUBENCH = str(Path(sys.executable).parent / "gpubench")

# Client settings that keep provider and lifecycle waits short: no client-side rate
# limit, a 10 ms backoff between retries, a 5 s HTTP timeout, a 50 ms poll.
QUICK_CLIENT = {
    "GPUBENCH_RATE_LIMIT_SCALE": "0",
    "GPUBENCH_HTTP_BACKOFF": "0.01",
    "GPUBENCH_HTTP_TIMEOUT": "5",
    "GPUBENCH_POLL_INTERVAL": "0.05",
}


def mock_cloud(tmp_path: Path, monkeypatch, **env: str) -> Iterator["MockCloud"]:
    """A mock cloud in this process with gpubench pointed at it (its endpoints and keys,
    plus `env`), stopped afterwards; for a fixture to `yield from`. Instances boot at
    once, and a booted instance starts an sshd."""
    from gpubench.mock import MockCloud

    cloud = MockCloud.start(state_dir=tmp_path / "mock", boot_delay=0.0)
    try:
        for key, value in {**cloud.env(), **env}.items():
            monkeypatch.setenv(key, value)
        yield cloud
    finally:
        cloud.stop()


def clear_provider_env(monkeypatch) -> None:
    """No provider's key, endpoint override or setting from the machine the tests run on
    reaches a test: the list is the registry's, so a new provider is covered."""
    for var in registry.env_vars():
        monkeypatch.delenv(var, raising=False)


def _command(args: tuple[str, ...]) -> list[str]:
    return [GPUBENCH, *args]


def _cwd(args: tuple[str, ...], cwd: Path | str | None) -> Path | str:
    """Where a test's gpubench starts: as given, else beside the script it runs (where a
    user runs it from: a run of a user's script watches its working directory and moves
    aside what appears there), else the repository."""
    if cwd is not None:
        return cwd
    scripts = [Path(a) for a in args if a.endswith(".py") and Path(a).is_absolute()]
    return scripts[0].parent if scripts else REPO


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """The test's own environment (its isolated directories, no provider variables),
    plus `env`."""
    return {**os.environ, **(env or {})}


def run_gpubench(*args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """`gpubench ARGS` in a child process, run to its end, output captured as text.

    For what only a real process shows: signals sent to it, the process tree it
    starts and stops, the installed entry point. Everything else runs in-process
    through the `cli` fixture."""
    return subprocess.run(_command(args), capture_output=True, text=True, timeout=timeout,
                          cwd=_cwd(args, cwd), env=_environment(env))


def start_gpubench(*args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None,
                   **popen) -> subprocess.Popen:
    """`gpubench ARGS` started and left running, to be read from, signalled or killed;
    stdout and stderr are text pipes unless `popen` says otherwise."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    popen.setdefault("preexec_fn", ctrl_c_as_at_a_terminal)
    return subprocess.Popen(_command(args), text=True, cwd=_cwd(args, cwd), env=_environment(env),
                            **popen)


def ctrl_c_as_at_a_terminal() -> None:
    """In the child before it starts: SIGINT back to its default. A test run started in
    the background of a shell ignores SIGINT, and Python never turns an ignored SIGINT
    into KeyboardInterrupt, so a Ctrl-C test would otherwise wait for ever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one_line(err: str) -> str:
    """The one line a command said on stderr (asserted to be one)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# The lines that make a test's own tiny script form one gloo process group under torchrun,
# at any process count, as a real training script does: a run of a user's script at two
# or more processes that formed no group is refused as a measurement (gpubench.sweep.probe).
# JOIN goes first in the script, LEAVE last where the script ends normally.
JOIN = 'import torch.distributed as dist\ndist.init_process_group("gloo")\n'
LEAVE = 'dist.destroy_process_group()\n'


# A script for a run that loses a node: all-reduces in a loop, long on two nodes (where
# the test takes a node away once the marker file appears), short on one.
LOOPING = '''\
import argparse, datetime, json, os, time
import torch, torch.distributed as dist
p = argparse.ArgumentParser()
p.add_argument("--marker")
a = p.parse_args()
dist.init_process_group("gloo", timeout=datetime.timedelta(
    seconds=float(os.environ.get("GPUBENCH_PG_TIMEOUT_S", "1800"))))
nodes = int(os.environ["GROUP_WORLD_SIZE"])
t = torch.ones(1)
w = torch.zeros(1, requires_grad=True)   # a training step a loop (the probe wants one)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(3000 if nodes > 1 else 3):
    dist.all_reduce(t)
    (w * t).sum().backward(); opt.step()
    if step == 1 and dist.get_rank() == 0 and nodes > 1:
        open(a.marker, "w").close()
    time.sleep(0.1)
print(f"rank {dist.get_rank()} done", flush=True)
'''


def one_node(counts):
    """Process counts on one machine as sweep points: [1, 2] -> (1,1), (1,2)."""
    from gpubench.launch.base import SweepPoint

    return [SweepPoint(1, n) for n in counts]


# pytorch/examples' single-process style: a script that trains alone, never forming a
# process group, and says "done" at its end.
TRAINS_ALONE = """\
import torch
from torch import nn
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("done")
"""


def counted_calibration(samples: int = 32, flops_per_sample: float = 1.87e6, params: int = 100_000,
                        epoch_samples: int | None = 4000, tokens: int = 0, precision: str = "fp32"):
    """A calibration as the probe would count a small script's step: a matrix product
    forward and backward, an elementwise kernel, a view, an optimizer update."""
    from gpubench.predict.calibrate import Calibration

    flops = flops_per_sample * samples
    math = "bf16" if precision == "bf16" else "fp32"
    ops = (("forward", "aten.mm", "kernel", 1, flops / 3, 4 * (params + 64 * samples), math),
           ("forward", "aten.relu", "kernel", 1, 0, 8 * 64 * samples, ""),
           ("forward", "aten.view", "host", 2, 0, 0, ""),
           ("backward", "aten.mm", "kernel", 2, flops / 3, 4 * (params + 64 * samples), math),
           ("optimizer", "aten._foreach_add_", "kernel", 1, 0, 8 * params, ""))
    return Calibration(ops, 12 * params + 4 * 64 * samples, 12 * params, samples, tokens, 4 * params, params,
                       epoch_samples, precision, False, 0, 2, "2026-01-02 03:04", 9.0, 0.01, "adamw")
