"""Following one job from submission to its end: what it is doing (pending and
why, its place in the queue, running where and for how long, its output as it
comes), two deadlines (pending, running), Ctrl-C cancelling it, and its end
state from the best source the cluster offers.

End states come from sacct where accounting is on, else from the job
completion log (sacct -c), else from squeue while the controller still holds
the job plus the files the job left (slurmstepd's cancel line, the exit code
the script wrote). The first source that answers is used for every later job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from gpubench.launch.base import LineSink
from gpubench.launch.gpu_sampling import is_live_line
from gpubench.launch.slurm import states
from gpubench.launch.slurm.commands import Slurm
from gpubench.launch.slurm.errors import PendingTimeoutError, SlurmError
from gpubench.launch.slurm.states import JobState

FIRST_POLL_S = 0.25      # doubling up to the poll interval: short jobs are seen ending soon
HEARTBEAT_S = 60.0       # a line while a quiet job runs
PLACE_EVERY_S = 30.0     # the queue position costs one more squeue: now and then
SETTLE_S = 15.0          # sacct may hold a job's end a few seconds after squeue shows it
CANCEL_WAIT_S = 90.0     # scancel to the job's end (KillWait, epilog)


@dataclass
class Followed:
    """How a job ended, as far as Slurm and its files tell."""

    state: JobState
    output_tail: list[str] = field(default_factory=list)
    timed_out: bool = False  # gpubench cancelled it at the run deadline


@dataclass
class Follower:
    slurm: Slurm
    poll_s: float
    pending_timeout: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # which end-state sources answer on this cluster (None: not tried yet)
    usable: dict[str, bool | None] = field(
        default_factory=lambda: {states.FROM_SACCT: None, states.FROM_JOBCOMP: None})

    def follow(self, job_id: str, output_path: str, on_line: LineSink, run_timeout: float) -> Followed:
        """Watch the job until it ends, passing its output lines on as they come.
        Raises PendingTimeoutError (after scancel) when it pends past the deadline,
        and KeyboardInterrupt (after scancel, said on `on_line`) on Ctrl-C."""
        try:
            return self._watch(job_id, output_path, on_line, run_timeout)
        except KeyboardInterrupt:
            self._cancel_quietly(job_id)
            on_line(f"cancelled job {job_id} with scancel")
            raise

    def _watch(self, job_id: str, output_path: str, on_line: LineSink, run_timeout: float) -> Followed:
        output = OutputTail(self.slurm, output_path, on_line)
        submitted = self.clock()
        started = None
        said = ""
        place: int | None = None
        place_at = 0.0
        beat_at = 0.0
        wait = FIRST_POLL_S
        last: JobState | None = None
        while True:
            state = self.slurm.queue(job_id)
            now = self.clock()
            if state is None:  # forgotten already: long done
                break
            last = state
            if state.pending:
                if now >= place_at and state.partition:
                    place = self.slurm.place_in_queue(job_id, state.partition)
                    place_at = now + PLACE_EVERY_S
                text = f"job {job_id} pending" + (f": {state.reason}" if state.reason else "")
                if place:
                    text += f" ({_ordinal(place)} in the {state.partition} queue)"
                if text != said:
                    on_line(text)
                    said = text
                if now - submitted > self.pending_timeout:
                    self._cancel_quietly(job_id)
                    raise PendingTimeoutError(
                        f"job {job_id} still pending after {self.pending_timeout:.0f}s "
                        f"(--pending-timeout); Slurm's reason: {state.reason or 'none given'}; "
                        "cancelled it with scancel")
            else:
                if started is None:
                    started = now
                    beat_at = now + HEARTBEAT_S
                    if not state.finished:
                        on_line(f"job {job_id} running on {state.nodelist or 'its nodes'}")
                output.pump()
                if state.finished:
                    break
                if now - started > run_timeout:
                    self._cancel_quietly(job_id)
                    on_line(f"job {job_id} ran past --timeout {run_timeout:.0f}s; "
                            "cancelled it with scancel")
                    last = self._until_over(job_id, output) or last
                    return Followed(self.end_state(job_id, last), output.tail, timed_out=True)
                if now >= beat_at:
                    on_line(f"job {job_id} running for {now - started:.0f}s")
                    beat_at = now + HEARTBEAT_S
            self.sleep(wait)
            wait = min(self.poll_s, wait * 2)
        output.pump()
        if last is None:
            last = JobState(job_id, "UNKNOWN", source=states.FROM_SQUEUE)
        return Followed(self.end_state(job_id, last), output.tail)

    def _until_over(self, job_id: str, output: "OutputTail") -> JobState | None:
        deadline = self.clock() + CANCEL_WAIT_S
        last = None
        while self.clock() < deadline:
            state = self.slurm.queue(job_id)
            if state is None or state.finished:
                return state or last
            last = state
            self.sleep(self.poll_s)
        output.pump()
        return last

    def _cancel_quietly(self, job_id: str) -> None:
        try:
            self.slurm.cancel(job_id)
        except SlurmError:
            pass  # already over, or the controller busy: the end state says which

    # ------------------------------------------------------------------ end state
    def end_state(self, job_id: str, seen: JobState) -> JobState:
        """The job's end from sacct or the completion log where they answer (a few
        seconds' grace for accounting to catch up), else what squeue last said.
        The latter's source is FROM_SQUEUE: the caller adds what the files say."""
        deadline = self.clock() + SETTLE_S
        while True:
            for source, completion_log in ((states.FROM_SACCT, False), (states.FROM_JOBCOMP, True)):
                if self.usable[source] is False:
                    continue
                answers, state = self.slurm.accounting(job_id, completion_log)
                self.usable[source] = answers
                if state is not None and state.finished:
                    return _fill(state, seen)
            if not any(self.usable.values()) or self.clock() >= deadline or not seen.finished:
                return replace(seen, source=states.FROM_SQUEUE)
            self.sleep(self.poll_s)


def _fill(state: JobState, seen: JobState) -> JobState:
    """An accounting answer, its gaps filled from what squeue said."""
    return replace(state, nodelist=state.nodelist or seen.nodelist,
                   partition=state.partition or seen.partition,
                   account=state.account or seen.account,
                   cpus=state.cpus if state.cpus else seen.cpus,
                   submit=state.submit or seen.submit, start=state.start or seen.start)


class OutputTail:
    """The job's output file, read on from where the last read stopped: each new
    complete line passed on, the last ones kept (not the nodes' GPU samples, which
    must not crowd out the job's last words)."""

    KEEP = 200

    def __init__(self, slurm: Slurm, path: str, on_line: LineSink) -> None:
        self.slurm = slurm
        self.path = path
        self.on_line = on_line
        self.offset = 0
        self.tail: list[str] = []

    def pump(self) -> None:
        text = self.slurm.shell.read(self.path, self.offset)
        if not text:
            return
        complete, _, _ = text.rpartition("\n")
        if not complete and "\n" not in text:
            return
        self.offset += len((complete + "\n").encode("utf-8"))
        for line in complete.split("\n"):
            if not is_live_line(line):
                self.tail.append(line)
            self.on_line(line)
        del self.tail[:-self.KEEP]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
