"""The live board of a bench across candidates (cli/board.py): each machine's lines
printed with its name, its row following what it does (a run's step, the last thing
said and for how long), a run's steps only moving the row."""

from __future__ import annotations

import io

from rich.console import Console

from gpubench.cli.board import Board
from gpubench.sweep.events import RunEnded, RunStarted, RunStep


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def rows_of(board: Board) -> list[str]:
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(board.__rich__())
    return [ln.rstrip() for ln in console.export_text().splitlines()]


def test_each_machine_has_a_row_that_follows_what_it_does():
    printed = io.StringIO()
    clock = Clock()
    board = Board([("b-1", "1x H100 PCIe on vast"), ("b-2", "1x L40S on runpod")],
                  Console(file=printed, width=160), live=False, clock=clock, quiet=True)
    one, two = board.echo_for("b-1"), board.echo_for("b-2")
    board.say("renting 2 candidates at once")
    one("booting: status loading")
    clock.now += 7
    two(RunStarted("[1 gpu] mnist-ddp on runpod (L40S)", workload="mnist-ddp", where="1 gpu", index=1,
                   total=2, provider="runpod", gpu_name="L40S", price_per_hour=0.86))
    two(RunStep("step 3/10", phase="measure", step=3, total=10, elapsed=3.0, rate=812.4,
                unit="images/s", gpu_util=None, gpu_mem=None))
    clock.now += 2
    rows = rows_of(board)
    assert rows[0].split() == ["b-1", "1x", "H100", "PCIe", "on", "vast", "0:09", "booting:", "status",
                               "loading"]
    assert rows[1].startswith("b-2  1x L40S on runpod      0:02  run 1 of 2 · mnist-ddp · 1 gpu · step 3/10 "
                              "· 812.4 images/s · 0:02 elapsed")
    two(RunEnded("[1 gpu] done after 2.0 s", ok=True))
    two("dropped: its runs failed: boom")
    assert rows_of(board)[1].endswith("0:00  dropped: its runs failed: boom")
    assert printed.getvalue().splitlines() == [
        "renting 2 candidates at once", "[b-1] booting: status loading",
        "[b-2] [1 gpu] mnist-ddp on runpod (L40S) (run 1 of 2)",     # the step line only moves the row
        "[b-2] [1 gpu] done after 2.0 s", "[b-2] dropped: its runs failed: boom"]


def test_at_80_columns_a_row_keeps_its_rate_eta_and_spending_and_the_board_its_total():
    clock = Clock()
    board = Board([("bench-ab12-1", "8x RTX 4090 on runpod"), ("bench-ab12-2", "8x H100 SXM on vast")],
                  Console(file=io.StringIO(), width=80), live=False, clock=clock, quiet=True,
                  budget=50.0, spent=lambda: 1.234)
    two = board.echo_for("bench-ab12-2")
    two(RunStarted("[8 gpus] gpt-fsdp on vast (H100 SXM)", workload="gpt-fsdp", where="8 gpus", index=3,
                   total=4, provider="vast", gpu_name="H100 SXM", price_per_hour=16.40))
    clock.now += 600
    two(RunStep("step 30/50", phase="measure", step=30, total=50, elapsed=300.0, rate=312345.6,
                unit="tokens/s", gpu_util=97.0, gpu_mem=70e9))
    console = Console(file=io.StringIO(), width=80, record=True)
    console.print(board.__rich__())
    rows = [ln.rstrip() for ln in console.export_text().splitlines()]
    assert max(len(r) for r in rows) <= 80
    # too narrow for the row's line: what it is at goes under it, whole
    at = rows[rows.index(next(r for r in rows if r.startswith("bench-ab12-2"))) + 1]
    assert at.startswith("    8 gpus · step 30/50 · 312,345.6 tokens/s")
    assert "ETA 3:20" in at and "$2.73 spent" in at and "…" not in at
    assert rows[-1] == "spent $1.23 of the $50.00 budget on all the machines"


# -- the GPUs of every node, watched as the run goes -----------------------------------------

def started(gpu_name="H100", accelerator="cuda") -> RunStarted:
    return RunStarted("[4 gpus] mnist-ddp on vast (H100)", workload="mnist-ddp", where="4 gpus",
                      index=1, total=1, provider="vast", gpu_name=gpu_name, price_per_hour=8.0,
                      accelerator=accelerator)


def sample(node: str, index: int, util: float, mem_mib: float = 40960.0, power: float = 500.0):
    from gpubench.launch.gpu_sampling import live_line
    from gpubench.sweep.events import gpu_from_line

    line = live_line(index, util, mem_mib, power)
    return gpu_from_line(f"[{node}] {line}" if node else line)


def test_every_gpu_of_every_node_has_a_short_history_under_its_row():
    printed = io.StringIO()
    board = Board([("b-1", "2x2 H100 on vast")], Console(file=printed, width=80), live=False,
                  clock=Clock(), quiet=True)
    echo = board.echo_for("b-1")
    echo(started())
    for util in (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100):   # more than a sparkline holds
        for node in ("node0", "node1"):
            for index in (0, 1):
                echo(sample(node, index, util if node == "node0" else 100 - util))
    rows = rows_of(board)
    assert rows[1:] == [
        "    node0 GPU 0  use ▃▄▅▅▆▇▇█ 100%  mem ████████ 40.0 GiB  power ████████ 500 W",
        "    node0 GPU 1  use ▃▄▅▅▆▇▇█ 100%  mem ████████ 40.0 GiB  power ████████ 500 W",
        "    node1 GPU 0  use ▆▅▅▄▃▂▂▁ 0%  mem ████████ 40.0 GiB  power ████████ 500 W",
        "    node1 GPU 1  use ▆▅▅▄▃▂▂▁ 0%  mem ████████ 40.0 GiB  power ████████ 500 W"]
    assert max(map(len, rows)) <= 80
    assert "GPUBENCH_GPU" not in printed.getvalue()    # samples are drawn, never printed
    echo(RunEnded("[4 gpus] done after 9.0 s", ok=True))
    assert len(rows_of(board)) == 1                       # the run is over: its GPUs too


def test_a_run_on_a_cpu_says_it_has_no_gpu_and_a_progress_line_stands_in_until_samples_come():
    board = Board([("b-1", "cpu"), ("b-2", "1x H100 on vast")], Console(file=io.StringIO(), width=100),
                  live=False, clock=Clock(), quiet=True)
    board.echo_for("b-1")(started("cpu", "cpu"))
    two = board.echo_for("b-2")
    two(started())
    for util in (50.0, 97.0):
        two(RunStep("step 3/10", phase="measure", step=3, total=10, elapsed=3.0, rate=812.4,
                    unit="images/s", gpu_util=util, gpu_mem=70 * 2**30))
    rows = rows_of(board)
    assert rows[1] == "    no GPU: this run is on the CPU"
    assert rows[3] == "    rank 0's GPU  use       ▅█ 97%  mem       ██ 70.0 GiB"
    two(sample("", 0, 12.0))                              # the machine's own samples replace it
    assert rows_of(board)[3] == "    GPU 0  use        ▂ 12%  mem        █ 40.0 GiB  power        █ 500 W"


def test_the_runs_progress_shows_the_gpus_under_its_bar():
    from gpubench.cli.progress import Progress

    progress = Progress(Console(file=io.StringIO(), width=80), live=False, clock=Clock())
    progress(started())
    progress(sample("", 0, 40.0))
    progress(RunStep("step 5/10", phase="measure", step=5, total=10, elapsed=3.0, rate=812.4,
                     unit="images/s", gpu_util=None, gpu_mem=None))
    progress(sample("", 0, 80.0))
    console = Console(file=io.StringIO(), width=80, record=True)
    console.print(progress.__rich__())
    lines = [ln.rstrip() for ln in console.export_text().splitlines()]
    assert set(lines[-2]) == {"━"}                          # the bar, on a line of its own
    assert lines[-1] == "GPU 0  use       ▄▇ 80%  mem       ██ 40.0 GiB  power       ██ 500 W"


def test_sample_lines_are_read_with_their_node_and_nothing_else_is():
    from gpubench.launch.gpu_sampling import live_line
    from gpubench.sweep.events import gpu_from_line

    line = live_line(3, None, 1024.0, 250.5)
    assert line == "GPUBENCH_GPU index=3 util=- mem_used=1024 power=250.5"
    got = gpu_from_line("[node2] " + line)
    assert (got.node, got.gpu) == ("node2", {"index": 3, "util": None, "mem_used": 1024.0, "power": 250.5})
    for other in ("GPUBENCH_GPU index=x util=1", "GPUBENCH_GPU", "[node1] step 3", "", "GPUBENCH_GPUS index=0"):
        assert gpu_from_line(other) is None


def test_the_local_sampler_passes_each_gpu_on_at_most_once_a_second(monkeypatch):
    from gpubench.launch import gpu_sampling

    monkeypatch.setattr(gpu_sampling, "sampler_command", lambda *a: ["/nonexistent/nvidia-smi"])
    clock, said = Clock(), []
    sampler = gpu_sampling.LocalSampler([0, 1], said.append, clock=clock)
    for line in ("0, 80, 1024, 200.00", "1, 10, 512, [N/A]", "0, 90, 1024, 200.00", "garbage"):
        sampler.pass_on(line)
    clock.now += gpu_sampling.LIVE_EVERY_S
    sampler.pass_on("0, 95, 2048, 210.00")
    assert said == ["GPUBENCH_GPU index=0 util=80 mem_used=1024 power=200",
                    "GPUBENCH_GPU index=1 util=10 mem_used=512 power=-",
                    "GPUBENCH_GPU index=0 util=95 mem_used=2048 power=210"]
    assert sampler.stop() is None          # no nvidia-smi here: nothing sampled, nothing to stop


def test_a_sweep_passes_its_nodes_gpu_samples_to_the_display_and_keeps_them_out_of_the_log(tmp_path):
    from pathlib import Path

    from gpubench.launch.base import Launcher, Machine, RunOutcome
    from gpubench.launch.gpu_sampling import live_line
    from gpubench.store.results import ResultsStore
    from gpubench.suite import WorkloadRef
    from gpubench.sweep.events import GpuSample
    from gpubench.sweep.run import SweepPlan, sweep
    from tests.helpers import one_node

    class Saying(Launcher):
        def machine(self) -> Machine:
            return Machine("ssh", "box: 2x H100", "H100", 2, 8.0, "cuda")

        def prepare(self, workload) -> None:
            pass

        def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
            on_line("[node1] " + live_line(1, 97.0, 1024.0, 600.0))
            on_line("epoch 1 done")
            return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0},
                              ["torchrun"], 0.1)

        def close(self) -> None:
            pass

    said: list[str] = []
    plan = SweepPlan(WorkloadRef("w", Path("w.py"), True), one_node([2]), [], "r1", 60)
    sweep(Saying(), plan, ResultsStore(tmp_path), said.append)
    (gpu,) = [line for line in said if isinstance(line, GpuSample)]
    assert (gpu.node, gpu.gpu["index"], gpu.gpu["util"]) == ("node1", 1, 97.0)
    log = "".join(p.read_text() for p in tmp_path.rglob("*.log"))
    assert "epoch 1 done" in log and "GPUBENCH_GPU" not in log
