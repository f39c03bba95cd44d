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
