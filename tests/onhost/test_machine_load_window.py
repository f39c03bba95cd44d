"""The busy check before a local run is not waited out where it need not be: its
window starts when nothing of a run was alive (the command began, the previous run
ended), less the CPU gpubench itself used since; only what the window lacks is
slept."""

from __future__ import annotations

import os
import time

import pytest

from gpubench.onhost import machine_load

HZ = os.sysconf("SC_CLK_TCK")


@pytest.fixture
def clockwork(monkeypatch):
    """/proc/stat and this process's CPU as the test says; sleeps recorded, not slept."""
    state = {"stat": (1000, 10_000), "own": 5.0, "slept": []}
    monkeypatch.setattr(machine_load, "cpu_stat", lambda: state["stat"])
    monkeypatch.setattr(machine_load, "own_cpu_seconds", lambda: state["own"])
    monkeypatch.setattr(machine_load.time, "sleep", lambda s: state["slept"].append(s))
    return state


def test_the_window_since_the_mark_is_not_waited_and_gpubenchs_own_cpu_is_not_other_work(
        clockwork, monkeypatch):
    since = machine_load.mark()
    since["clock"] -= 1.0  # a second ago: gpubench imported, loaded its records
    # over that second, on 2 cores (2 s of core time), 1.5 s busy, 1 s of it gpubench's own
    clockwork["stat"] = (1000 + int(1.5 * HZ), 10_000 + 2 * HZ)
    clockwork["own"] = 6.0
    figures = machine_load.before(since=since)
    assert clockwork["slept"] == []
    assert figures["busy_before"] == pytest.approx(0.25)
    assert figures["stat_start"] == clockwork["stat"]  # the run's own window starts now


def test_a_short_window_sleeps_only_what_it_lacks(clockwork):
    since = machine_load.mark()
    since["clock"] -= 0.4 * machine_load.BEFORE_S
    machine_load.before(since=since)
    assert len(clockwork["slept"]) == 1
    assert clockwork["slept"][0] == pytest.approx(0.6 * machine_load.BEFORE_S, abs=0.05)


def test_a_stale_mark_or_none_waits_the_whole_window(clockwork):
    machine_load.before()
    stale = machine_load.mark()
    stale["clock"] -= machine_load.STALE_S + 1  # the user was asked a question meanwhile
    machine_load.before(since=stale)
    assert clockwork["slept"] == [machine_load.BEFORE_S, machine_load.BEFORE_S]


def test_the_real_clock_and_proc():
    since = machine_load.mark()
    while time.monotonic() - since["clock"] < machine_load.BEFORE_S:  # gpubench at work
        pass
    started = time.monotonic()
    figures = machine_load.before(since=since)
    assert time.monotonic() - started < machine_load.BEFORE_S / 2  # nothing left to wait
    assert 0.0 <= figures["busy_before"] <= 1.0  # its own spinning is not other work
