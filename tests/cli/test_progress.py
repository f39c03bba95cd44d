"""Live progress: the workload's progress line parsed, the sweep's events, and the
display: live on a terminal (rich's Console with force_terminal), plain lines when
stdout is not one, fewer with --quiet."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from gpubench import suite
from gpubench.cli.progress import Progress, clock_text, eta_seconds, spent_dollars, status_line
from gpubench.sweep.events import RunEnded, RunStarted, RunStep, step_from_line
from gpubench.launch.base import Launcher, Machine, RunOutcome
from gpubench.store.results import ResultsStore
from gpubench.sweep.run import SweepPlan, sweep
from gpubench.workloads.metrics import parse_progress, progress_line
from tests.helpers import one_node

LINE = progress_line("measure", 20, 50, 2.0, 812.44, "samples/s", 87, 1.2e9)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def started(index=2, total=6, price=None) -> RunStarted:
    return RunStarted("[2 gpus] mnist-ddp on local (cpu)", workload="mnist-ddp", where="2 gpus",
                      index=index, total=total, provider="local", gpu_name="cpu",
                      price_per_hour=price)


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=200, color_system=None), buffer


# --------------------------------------------------------------------------- the line
def test_the_progress_line_round_trips():
    assert LINE.startswith("GPUBENCH_PROGRESS ")
    fields = parse_progress(LINE)
    assert fields == {"phase": "measure", "step": 20, "total": 50, "rate": 812.4,
                      "unit": "samples/s", "elapsed": 2.0, "gpu_util": 87.0, "gpu_mem": 1.2e9}
    assert parse_progress(progress_line("warmup", 1, 5, 0.3)) == {
        "phase": "warmup", "step": 1, "total": 5, "elapsed": 0.3}


def test_other_lines_and_garbled_progress_lines_are_not_progress():
    for line in ("mnist-ddp: world 1 300 images/s", "", "GPUBENCH_PROGRESS step=x total=5",
                 "GPUBENCH_PROGRESS phase=measure", "say GPUBENCH_PROGRESS step=1 total=2"):
        assert parse_progress(line) is None
        assert step_from_line(line) is None


def test_a_step_event_reads_as_a_line_and_carries_its_fields():
    step = step_from_line(LINE, "[1 gpu] ")
    assert isinstance(step, RunStep) and isinstance(step, str)
    assert step == "[1 gpu] step 20 of 50, 812.4 samples/s"
    assert (step.step, step.total, step.rate, step.gpu_util, step.gpu_mem) == (20, 50, 812.4, 87.0, 1.2e9)


# --------------------------------------------------------------------------- figures
def test_clock_eta_and_money():
    assert [clock_text(s) for s in (7, 723, 3723, None)] == ["0:07", "12:03", "1:02:03", "-"]
    step = step_from_line(LINE)
    assert eta_seconds(step) == 3.0           # 2 s for 20 steps, 30 to go
    assert eta_seconds(step, since_step=1.0) == 2.0
    assert spent_dollars(3.6, 100) == 0.1
    assert spent_dollars(0.0, 100) is None and spent_dollars(None, 100) is None


def test_the_status_line_has_count_step_rate_elapsed_eta_money_and_gpu():
    from gpubench.cli.progress import RunState

    run = RunState(started(price=7.2), since=0.0, step=step_from_line(LINE), step_at=10.0)
    line = status_line(run, now=10.0, spent_s=50.0)
    for part in ("run 2 of 6", "mnist-ddp", "2 gpus", "step 20/50", "812.4 samples/s",
                 "0:10 elapsed", "ETA 0:03", "$0.10 spent", "GPU 87% 1.2 GB"):
        assert part in line, part


# --------------------------------------------------------------------------- the display
def feed(progress: Progress, clock: Clock) -> None:
    progress("preparing")
    progress(started())
    for i, seconds in ((5, 1.0), (20, 12.0), (30, 14.0), (50, 24.0)):  # since the run began
        clock.now = 100.0 + seconds
        progress(step_from_line(progress_line("measure", i, 50, seconds, 800.0), "[2 gpus] "))
    progress(RunEnded("[2 gpus] done after 30.0 s", ok=True))


def test_plain_lines_when_stdout_is_not_a_terminal():
    con, buffer = console(terminal=False)
    clock = Clock()
    with Progress(con, clock=clock) as progress:
        assert not progress.live
        feed(progress, clock)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "preparing"
    assert lines[1] == "[2 gpus] mnist-ddp on local (cpu) (run 2 of 6)"
    steps = [line for line in lines if "step " in line]
    assert len(steps) == 2  # paced: one per PLAIN_EVERY_S, not one per progress line
    assert "step 20/50" in steps[0] and "800.0 samples/s" in steps[0] and "ETA" in steps[0]
    assert lines[-1] == "[2 gpus] done after 30.0 s"
    assert "\x1b[" not in buffer.getvalue()  # no cursor movement


def test_quiet_gives_plain_lines_without_steps_even_on_a_terminal():
    con, buffer = console(terminal=True)
    clock = Clock()
    with Progress(con, quiet=True, clock=clock) as progress:
        assert not progress.live
        feed(progress, clock)
    text = buffer.getvalue()
    assert "step " not in text
    assert "(run 2 of 6)" in text and "done after 30.0 s" in text


def test_live_display_on_a_terminal_shows_the_run():
    con, buffer = console(terminal=True)
    clock = Clock()
    with Progress(con, clock=clock) as progress:
        assert progress.live
        progress(started(price=3.6))
        clock.now += 4.0
        progress(step_from_line(LINE, "[2 gpus] "))
        with con.capture() as shown:
            con.print(progress)
    for part in ("run 2 of 6", "step 20/50", "812.4 samples/s", "0:04 elapsed", "ETA 0:03",
                 "spent", "GPU 87% 1.2 GB"):
        assert part in shown.get(), part
    assert "[2 gpus] mnist-ddp on local (cpu) (run 2 of 6)" in buffer.getvalue()


def test_live_display_between_runs_shows_the_last_wait_with_a_clock():
    con, _ = console(terminal=True)
    clock = Clock()
    with Progress(con, clock=clock) as progress:
        progress("booting: status booting")
        clock.now += 12.0
        with con.capture() as shown:
            con.print(progress)
    assert "booting: status booting · 0:12" in shown.get()


# --------------------------------------------------------------------------- the sweep's events
class Stepping(Launcher):
    """Runs nothing; prints two progress lines and one ordinary line per run."""

    def machine(self) -> Machine:
        return Machine("ssh", "box", "H100", 4, 8.0, "cuda")

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        on_line(progress_line("warmup", 1, 2, 0.1))
        on_line(progress_line("measure", 10, 20, 1.0, 99.0))
        on_line("hello")
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0},
                          ["torchrun"], 0.1, output_tail=["hello"])

    def close(self) -> None:
        pass


def test_the_sweep_says_each_runs_start_steps_and_end_as_events(tmp_path):
    said: list[str] = []
    plan = SweepPlan(suite.WorkloadRef("w", Path("w.py"), True), one_node([1, 2]), [], "r1", 60,
                     repeat=2)
    sweep(Stepping(), plan, ResultsStore(tmp_path), said.append)
    starts = [s for s in said if isinstance(s, RunStarted)]
    assert [(s.index, s.total, s.where, s.price_per_hour) for s in starts] == [
        (1, 4, "1 gpu, run 1 of 2", 8.0), (2, 4, "2 gpus, run 1 of 2", 8.0),
        (3, 4, "1 gpu, run 2 of 2", 8.0), (4, 4, "2 gpus, run 2 of 2", 8.0)]
    steps = [s for s in said if isinstance(s, RunStep)]
    assert [(s.phase, s.step, s.total, s.rate) for s in steps[:2]] == [
        ("warmup", 1, 2, None), ("measure", 10, 20, 99.0)]
    assert sum(isinstance(s, RunEnded) and s.ok for s in said) == 4
    assert not any("GPUBENCH_PROGRESS" in s for s in said)
    log = (tmp_path / "logs" / "r1" / "1gpu-r1.log").read_text()
    assert "hello" in log and "GPUBENCH_PROGRESS" not in log  # kept out of the run's log


def test_each_run_start_is_heard_by_the_command_and_nothing_else_is():
    heard = []
    out, _ = console(False)
    progress = Progress(out, on_run_start=lambda: heard.append(len(heard)))
    progress.say("checking the machine")
    progress.say(started(1, 2))
    progress.say(RunEnded("[2 gpus] done after 3.0 s", ok=True))
    progress.say(started(2, 2))
    assert heard == [0, 1]
