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
