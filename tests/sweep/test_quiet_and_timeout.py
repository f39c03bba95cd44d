"""A run's long waits: a run quiet for a while says so once per interval (nothing while
lines come), and a run that hit --timeout does not spend the same limit at every larger
count: the user is asked, and with no one to ask (--yes, no terminal) the larger counts
are skipped in one line."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gpubench import suite
from gpubench.cli import confirm
from gpubench.launch.base import Launcher, Machine, RunOutcome, SweepPoint
from gpubench.launch.failures import Failure
from gpubench.launch.local import LocalLauncher
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.sweep.run import SweepPlan, sweep
from gpubench.sweep.waits import QuietWatch, duration_text, quiet_notice
from tests.helpers import one_node

GPU_BOX = Machine("ssh", "box: 8x H100", "H100", 8, 16.0, "cuda")
SUITE_REF = suite.WorkloadRef("mnist-ddp", Path("w.py"), True)
TIMED_OUT = Failure("timed out after 1800s", "timeout")
STOPPED = ("stopped: 2 gpus hit --timeout 30 min; 4 and 8 gpus not run (a larger count rarely "
           "runs faster per step; raise --timeout to try)")


class Fake(Launcher):
    """Runs nothing: the counts in `timing_out` hit the timeout, the others are ok; each
    run stays silent for `silent_s` first."""

    def __init__(self, timing_out=(), silent_s: float = 0.0) -> None:
        self.timing_out, self.silent_s = set(timing_out), silent_s
        self.ran: list[int] = []

    def machine(self) -> Machine:
        return GPU_BOX

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        procs = point.procs_per_node
        self.ran.append(procs)
        time.sleep(self.silent_s)
        on_line(f"hello from {procs}")
        if procs in self.timing_out:
            return RunOutcome(-9, None, ["torchrun"], timeout, TIMED_OUT.error, failure=TIMED_OUT)
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0 * procs},
                          ["torchrun"], 0.1)

    def close(self) -> None:
        pass


def _plan(counts, repeat=1, timeout=1800.0, quiet_after=300.0) -> SweepPlan:
    return SweepPlan(SUITE_REF, one_node(counts), [], "r1", timeout, repeat=repeat,
                     quiet_after=quiet_after)


# -- quiet runs -------------------------------------------------------------------

def test_the_notice_says_how_long_and_when_the_timeout_stops_it():
    stops_at = time.mktime(time.localtime()[:3] + (12, 41, 0, 0, 0, -1))
    assert quiet_notice("mnist-ddp at 2 gpus", 300, 1800, stops_at) == (
        "mnist-ddp at 2 gpus: no output for 5 min (the run goes on; --timeout 30 min stops it "
        "at 12:41)")
    assert [duration_text(s) for s in (0.5, 1, 45, 600, 3600, 5400)] == [
        "0.5 s", "1 s", "45 s", "10 min", "1 h", "1 h 30 min"]


def _watched(quiet_after: float, lines_every: float | None, for_s: float) -> list[str]:
    said: list[str] = []
    with QuietWatch(said.append, "w at 1 gpu", quiet_after, 60) as watch:
        end = time.monotonic() + for_s
        while time.monotonic() < end:
            time.sleep(lines_every or for_s)
            if lines_every:
                watch.heard()
    return said


def test_a_quiet_run_says_so_once_per_interval():
    said = _watched(0.3, None, 1.0)
    silences = [line.split("no output for ")[1].split(" (")[0] for line in said]
    assert 1 <= len(said) <= 3 and silences == ["0.3 s", "0.6 s", "0.9 s"][:len(said)], said


def test_a_run_whose_lines_keep_coming_says_nothing():
    assert _watched(0.5, 0.05, 1.2) == []


def test_the_watch_waits_on_an_event_and_ends_with_the_run():
    before = threading.active_count()
    with QuietWatch(lambda _: None, "w", 300, 60):
        assert threading.active_count() == before + 1
    assert threading.active_count() == before
    with QuietWatch(lambda _: None, "w", 0, 60):  # none asked for: no thread
        assert threading.active_count() == before


def test_the_sweep_passes_a_quiet_runs_notice_along(tmp_path):
    lines: list[str] = []
    sweep(Fake(silent_s=0.5), _plan([1], quiet_after=0.2), ResultsStore(tmp_path), lines.append)
    notices = [line for line in lines if "no output" in line]
    assert notices and notices[0].startswith("mnist-ddp at 1 gpu: no output for 0.2 s (the run "
                                             "goes on; --timeout 30 min stops it at ")


# -- a count that hit --timeout ---------------------------------------------------

def test_with_no_one_to_ask_the_larger_counts_are_skipped_in_one_line(tmp_path):
    store = ResultsStore(tmp_path)
    fake = Fake(timing_out={2})
    lines: list[str] = []
    result = sweep(fake, _plan([1, 2, 4, 8]), store, lines.append)
    assert fake.ran == [1, 2] and not result.all_ok
    assert result.stopped == lines[-1] == STOPPED
    assert [line for line in lines if "not run" in line or "skipping" in line] == [STOPPED]
    assert result.dropped == {SweepPoint(1, 4): "skipping 4 gpus: 2 gpus hit --timeout 30 min",
                              SweepPoint(1, 8): "skipping 8 gpus: 2 gpus hit --timeout 30 min"}
    timed_out = [r for r in store.load().records if r["gpu_count"] == 2]
    assert [(r["status"], r["failure_kind"], r["error"]) for r in timed_out] == [
        ("failed", "timeout", "timed out after 1800s")]


@pytest.mark.parametrize("answer", [True, False])
def test_the_user_is_asked_and_the_answer_decides(tmp_path, answer):
    asked: list[str] = []
    fake = Fake(timing_out={2, 4})
    result = sweep(fake, _plan([1, 2, 4, 8]), ResultsStore(tmp_path), lambda _: None,
                   ask=lambda q: asked.append(q) or answer)
    assert asked[0] == ("mnist-ddp at 2 gpus hit --timeout (30 min); run 4 and 8 gpus with the "
                        "same limit?")
    if answer:  # 4 hit it too: asked again, about 8 alone
        assert fake.ran == [1, 2, 4, 8] and result.stopped is None
        assert asked[1:] == ["mnist-ddp at 4 gpus hit --timeout (30 min); run 8 gpus with the "
                             "same limit?"]
    else:
        assert fake.ran == [1, 2] and result.stopped == STOPPED and len(asked) == 1


def test_nothing_is_asked_at_the_largest_count_and_smaller_repeats_go_on(tmp_path):
    asked: list[str] = []
    fake = Fake(timing_out={4})
    result = sweep(fake, _plan([1, 2, 4], repeat=2), ResultsStore(tmp_path), lambda _: None,
                   ask=asked.append)
    assert asked == [] and result.stopped is None
    assert fake.ran == [1, 2, 4, 1, 2]  # a failed count is not run again
    fake = Fake(timing_out={2})
    result = sweep(fake, _plan([1, 2, 4], repeat=2), ResultsStore(tmp_path / "b"), lambda _: None)
    assert fake.ran == [1, 2, 1] and result.dropped.keys() == {SweepPoint(1, 4)}


class _Stdin:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_command_line_asks_only_at_a_terminal_and_never_under_yes(monkeypatch):
    monkeypatch.setattr(confirm.sys, "stdin", _Stdin(True))
    assert confirm.asker(yes=True) is None
    asked = []
    monkeypatch.setattr(confirm.typer, "confirm", lambda q, default: asked.append((q, default)) or True)
    assert confirm.asker(yes=False)("run 4 gpus?") is True and asked == [("run 4 gpus?", False)]
    monkeypatch.setattr(confirm.sys, "stdin", _Stdin(False))
    assert confirm.asker(yes=False) is None


# -- end to end: a user's script under torchrun -----------------------------------

# one process needs no process group (sweep.probe.verdict), and without torch it starts
# sooner; taking no training step, it reports its own figure (else it is no measurement)
QUIET = ('import os, time\nprint("started", flush=True)\ntime.sleep(3)\nprint("done")\n'
         'open(os.environ["GPUBENCH_RECORD_FILE"], "w").write(\'{"throughput": 1.0}\')\n')
SLEEPER = "import time\ntime.sleep(60)\n"


@pytest.mark.slow
def test_a_script_that_sleeps_silently_is_said_to_be_quiet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the run's working directory, which its guard watches
    script = tmp_path / "quiet.py"
    script.write_text(QUIET)
    plan = SweepPlan(suite.resolve(str(script)), one_node([1]), [], new_run_id(), 120, quiet_after=1.0)
    lines: list[str] = []
    result = sweep(LocalLauncher(gpus=[]), plan, ResultsStore(tmp_path / "results"), lines.append)
    assert result.records[0]["status"] == "ok", result.records[0]
    notices = [line for line in lines if "no output for" in line]
    assert notices, lines
    assert all(n.startswith(f"{script} at 1 gpu: no output for ") for n in notices), notices
    silences = [int(n.split("no output for ")[1].split(" s ")[0]) for n in notices]
    # one line per interval, not per poll: 1 s, 2 s, ... from each line the run printed
    assert all(s == 1 or s == before + 1 for before, s in zip([0, *silences], silences)), silences
    assert 2 in silences  # the 3 s sleep
    assert len(notices) <= result.records[0]["process_seconds"] + 1


@pytest.mark.slow
def test_a_count_that_hit_the_timeout_stops_the_larger_ones(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    results = tmp_path / "results"
    out = cli("run", str(script), "--gpus", "1,2", "--repeat", "1", "--timeout", "2",
              "--results", str(results))
    assert out.code == 1, out.out + out.err
    assert ("stopped: 1 gpu hit --timeout 2 s; 2 gpus not run (a larger count rarely runs faster "
            "per step; raise --timeout to try)") in out.out.splitlines()
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"], r["failure_kind"]) for r in records] == [(1, "failed", "timeout")]
