"""The sweep: run one workload at each point of a plan (nodes, processes per node)
and record every run.

It knows nothing of where the machine is: a Launcher gets the workload there and
runs each point, and the sweep turns what came back into one result record per
run. A launcher that spans nodes says so in its Machine (max_nodes); the plan,
the skips and the records need nothing more from it. A machine that spans fewer
nodes than when the sweep began (a cluster that lost a member) is asked before
each run: the points it can no longer hold are skipped, saying why.

With --repeat K each point runs K times, the points taking turns (1, 2, 1, 2,
...) so that a change in the machine's load falls on every point alike; a point
that fails is not run again. Every run's whole output is kept beside its records
(runlogs). A failure that will repeat at every point (a usage error, a missing
module or file) stops the sweep, as does a user's script that changed files its
next run would start from. A run quiet for a while says so as it waits; one that hit
--timeout skips the larger counts after it unless the user, asked, says to run them
(gpubench.sweep.waits).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from gpubench import suite
from gpubench.sweep import events
from gpubench.sweep import runlogs
from gpubench.sweep import traces
from gpubench.errors import GpubenchError, UsageError
from gpubench.launch.base import Launcher, Machine, RunOutcome, SweepPoint
from gpubench.launch.failures import Failure, last_words, stop_reason
from gpubench.launch.points import sweep_points
from gpubench.sweep import out_of_memory
from gpubench.sweep.outputs import OutputKeeper
from gpubench.sweep.probe import ALONE, NO_STEP, ProbeReports, judge
from gpubench.sweep.plan import DEFAULT_TIMEOUT_S, SweepPlan
from gpubench.sweep.records import finish_record
from gpubench.sweep.waits import TIMEOUT_KIND, QuietWatch, TimedOut, goes_on, larger_ahead
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.suite import WorkloadRef

GPU_REPEATS, CPU_REPEATS = 1, 3
PREPARE_LOG = "prepare"  # logs/<run id>/prepare.log: the machine's preparation  # --repeat's default where the runs use GPUs, and on a CPU


def default_repeats(machine: Machine) -> int:
    """--repeat's default: one run per point on a GPU machine, whose numbers hold
    still; three on a CPU shared with whatever else runs there, so that the report
    has a median and a spread."""
    return GPU_REPEATS if machine.accelerator == "cuda" and machine.gpu_count > 0 else CPU_REPEATS


def parse_repeat(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"--repeat: {value} is not a number of runs; it starts at 1")
    return value


def misfit(point: SweepPoint, machine: Machine) -> str | None:
    """Why `point` does not fit the machine, or None when it does."""
    if point.nodes > machine.max_nodes:
        spans = f"{machine.max_nodes} node{'s' if machine.max_nodes > 1 else ''}"
        return f"skipping {point.describe()}: {machine.instance_type} spans at most {spans}"
    most = machine.max_procs
    if most is not None and point.procs_per_node > most:
        if point.nodes == 1:
            return f"skipping {point.procs_per_node} GPUs: {machine.instance_type} has {most}"
        return f"skipping {point.describe()}: {machine.instance_type} has {most} per node"
    return None


@dataclass
class SweepResult:
    records: list[dict] = field(default_factory=list)  # appended by this sweep
    skipped: dict[SweepPoint, dict] = field(default_factory=dict)  # point -> its newest ok record
    stopped: str | None = None  # why the sweep stopped before its end
    dropped: dict[SweepPoint, str] = field(default_factory=dict)  # point -> why it no longer
    #   fits: the machine spans fewer nodes than when the sweep began (a node was lost)

    @property
    def all_ok(self) -> bool:
        """No run of this sweep failed and it ran to its end (points skipped as already
        recorded count as ok)."""
        return self.stopped is None and all(r["status"] == "ok" for r in self.records)


def point_of(record: dict) -> SweepPoint | None:
    """The point a record was run at; records from before nodes were kept ran on one."""
    nodes, world = record.get("nodes", 1) or 1, record.get("gpu_count")
    if not isinstance(nodes, int) or not isinstance(world, int) or nodes < 1 or world % nodes:
        return None
    return SweepPoint(nodes, world // nodes)


def recorded_points(records: list[dict], plan: SweepPlan, machine: Machine,
                    identity: dict | None = None) -> dict[SweepPoint, list[dict]]:
    """Points of this plan that already have ok records, oldest first: same workload,
    provider, instance type, GPU, workload arguments, nodes and GPUs per node, and
    for a user's script the same file and contents (`identity`: suite.script_identity)."""
    found: dict[SweepPoint, list[dict]] = {}
    wanted = set(plan.points)
    identity = identity or {}
    for record in records:
        if (record.get("status") == "ok"
                and record.get("workload") == plan.workload.name
                and record.get("provider") == machine.provider
                and record.get("instance_type") == machine.instance_type
                and record.get("gpu_name") == machine.gpu_name
                and record.get("workload_args") == list(plan.workload_args)
                and all(record.get(k) == v for k, v in identity.items())):
            point = point_of(record)
            if point in wanted:
                found.setdefault(point, []).append(record)
    for point in found:
        found[point].sort(key=lambda r: str(r.get("time")))
    return found


Ask = Callable[[str], bool]  # a yes/no question put to the user; True: yes


def sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
          echo: Callable[[str], None], ask: Ask | None = None) -> SweepResult:
    """Get the workload to the machine, then run each point of the plan in turn,
    plan.repeat times; every run gets a record, ok or failed.

    A point that already has plan.repeat ok records is skipped unless plan.force
    (one with fewer runs only the missing ones), so a sweep that stopped half-way
    (a lost machine, Ctrl-C) resumes at its first run without one when it is run
    again. Points the machine cannot hold are skipped with a line saying why. After
    a run that hit the timeout, the larger counts run only if `ask` says yes (None:
    no one to ask, and they are skipped).
    """
    machine = launcher.machine()
    result = SweepResult()
    workload = replace(plan.workload, untouched=_store_paths(store))
    identity = suite.script_identity(workload)
    earlier = {} if plan.force else recorded_points(store.load().records, plan, machine, identity)
    fitting = []
    for point in plan.points:
        why_not = misfit(point, machine)
        if why_not:
            echo(why_not)
        else:
            fitting.append(point)
    have = {point: len(earlier.get(point, [])) for point in fitting}
    for point in fitting:
        if have[point] >= plan.repeat:
            result.skipped[point] = earlier[point][-1]
            echo(f"[{point.describe()}] already recorded (run {result.skipped[point].get('run_id')}, "
                 f"{result.skipped[point].get('time')}); skipping (--force runs it again)")
    todo = [p for p in fitting if p not in result.skipped]
    launcher.prepare(workload)
    _keep_prepare_log(launcher, store, plan)
    keeper = OutputKeeper(launcher, workload, getattr(store, "directory", None), plan.run_id, echo)
    failed: set[SweepPoint] = set()
    warned: set[str] = set()
    # the points take turns, each run once per round; earlier runs count
    schedule = [(repeat, point) for repeat in range(1, plan.repeat + 1) for point in todo
                if repeat > have[point]]
    runs = _Runs(len(schedule))
    for at, (repeat, point) in enumerate(schedule):
        if point in failed or point in result.dropped:
            continue  # a failed point is not run again
        why_not = misfit(point, launcher.machine())
        if why_not:  # it fitted when the sweep began: the machine lost a node since
            result.dropped[point] = f"{why_not} now"
            echo(result.dropped[point])
            continue
        runs.index += 1
        stop = _run_one(launcher, plan, workload, machine, point, repeat, identity, store,
                        echo, result, warned, runs, keeper)
        if result.records and result.records[-1]["status"] != "ok":
            failed.add(point)
        if stop and _goes_on_at_its_count(runs.failure, point, todo, failed, result, echo):
            stop = None
        if stop:
            result.stopped = stop
            echo(stop)
            break
        if runs.failure is not None and runs.failure.kind == TIMEOUT_KIND:
            _after_timeout(plan, point, [p for _, p in schedule[at + 1:]], failed, result, echo, ask)
        if out_of_memory.larger_cannot_fit(runs.failure, plan.workload.name, result.records[-1]):
            _after_out_of_memory(point, [p for _, p in schedule[at + 1:]], failed, result, echo,
                                 runs.failure.kind)
    for line in keeper.summary():
        echo(line)
    return result


def _keep_prepare_log(launcher: Launcher, store: ResultsStore, plan: SweepPlan) -> None:
    """What preparing the machine printed (requirements installed, the setup step), in
    the run's logs beside its counts' (logs/<run id>/prepare.log), outside any figure."""
    # a launcher of tests or plug-ins that does not subclass Launcher may lack it
    lines = launcher.prepare_log() if hasattr(launcher, "prepare_log") else []
    directory = getattr(store, "directory", None)
    if lines and directory is not None:
        log = runlogs.RunLog([f"# gpubench: preparing the machine for {plan.workload.name}, "
                              f"run {plan.run_id}"])
        for line in lines:
            log.add(line)
        log.write(directory, runlogs.relative_path(plan.run_id, PREPARE_LOG), [], [])


def _after_out_of_memory(point: SweepPoint, later: list[SweepPoint], failed: set[SweepPoint],
                         result: SweepResult, echo: Callable[[str], None], kind: str) -> None:
    """The larger counts that would hold as much memory or more are not run; the sweep
    goes on with the others (sweep/out_of_memory.py)."""
    ahead = larger_ahead(point, later, failed | set(result.dropped))
    if not ahead:
        return
    for other in ahead:
        result.dropped[other] = out_of_memory.skipped(other, point, kind)
    echo(out_of_memory.stop_line(point, ahead))


def _after_timeout(plan: SweepPlan, point: SweepPoint, later: list[SweepPoint], failed: set[SweepPoint],
                   result: SweepResult, echo: Callable[[str], None], ask: Ask | None) -> None:
    """A run that hit the timeout: the larger counts still to run would most likely spend
    the same limit each. They run if the user says so; else they are dropped in one line,
    and the sweep goes on only with the smaller counts' repeats, if any."""
    timed_out = TimedOut(plan.workload.name, point, plan.timeout,
                         larger_ahead(point, later, failed | set(result.dropped)))
    if not timed_out.ahead or goes_on(timed_out, ask):
        return
    for other in timed_out.ahead:
        result.dropped[other] = timed_out.skipped(other)
    result.stopped = timed_out.stop_line()
    echo(result.stopped)


def _run_one(launcher: Launcher, plan: SweepPlan, workload: WorkloadRef, machine: Machine,
             point: SweepPoint, repeat: int, identity: dict, store: ResultsStore,
             echo: Callable[[str], None], result: SweepResult, warned: set[str],
             runs: "_Runs | None" = None, keeper: OutputKeeper | None = None) -> str | None:
    """Run one point once, record it and keep its output; returns why the sweep must
    stop, or None. What it says goes to `echo`, the run's start, progress and end as
    events (gpubench.sweep.events) a live display reads."""
    where = point.describe() + (f", run {repeat} of {plan.repeat}" if plan.repeat > 1 else "")
    prefix = f"[{where}] "
    name = runlogs.label(point, repeat, plan.repeat)
    log = runlogs.RunLog([f"# gpubench {plan.workload.name} at {where} on {machine.provider} "
                          f"({machine.gpu_name}), run {plan.run_id}, "
                          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"])

    reports = None if plan.workload.in_suite else ProbeReports()
    quiet = QuietWatch(echo, f"{plan.workload.name} at {where}", plan.quiet_after, plan.timeout)

    chatter = traces.ProfilerChatter()  # torch.profiler's own lines under --trace

    def on_line(line: str) -> None:
        line = chatter.keep(line)
        if line is None:
            return
        sample = events.gpu_from_line(line)
        if sample is not None:  # the GPUs watched beside the run: shown, not kept, and no
            echo(sample)        # sign that the run itself is not stuck
            return
        quiet.heard()  # any line, the probe's too: the run is not stuck
        if reports is not None and reports.take(line):
            return  # what a process of the script did, for the verdict below: not its output
        step = events.step_from_line(line, prefix)
        if step is not None:  # the workload's progress line: shown, not kept
            echo(step)
            return
        log.add(line)
        echo(prefix + line)

    runs = runs or _Runs(1, 1)
    echo(events.RunStarted(f"{prefix}{plan.workload.name} on {machine.provider} ({machine.gpu_name})",
                           workload=plan.workload.name, where=where, index=runs.index,
                           total=runs.total, provider=machine.provider, gpu_name=machine.gpu_name,
                           price_per_hour=machine.price_per_hour, accelerator=machine.accelerator))
    directory = getattr(store, "directory", None)  # a store of records only keeps no logs
    run_as = traces.for_run(workload, directory, plan.run_id, point, runs.traced)  # --trace
    started = time.perf_counter()
    if keeper is not None:
        keeper.before(name)
    try:
        with quiet:
            outcome = launcher.run(run_as, point, plan.workload_args, on_line, plan.timeout)
    except BaseException as e:  # Ctrl-C above all: what the run said so far is kept
        if keeper is not None:
            keeper.stopped()
        _keep_interrupted(log, store, plan, name, point, time.perf_counter() - started, e, echo,
                          prefix)
        raise
    if keeper is not None:
        keeper.after(name, prefix, outcome)
    if reports is not None:
        outcome = judged(outcome, reports, point)
    runs.failure = outcome.failure
    log_file = runlogs.relative_path(plan.run_id, name) if directory is not None else None
    record = finish_record(outcome, plan, machine, point, repeat, identity, log_file)
    record.update(traces.record_fields(directory, run_as))
    if log_file is not None:
        log.write(directory, log_file, outcome.output_tail, _log_footer(outcome, record))
    store.append(plan.run_id, record)
    result.records.append(record)
    ok = record["status"] == "ok"
    echo(events.RunEnded(f"{prefix}{'done' if ok else 'ended'} after {outcome.elapsed_seconds:.1f} s",
                         ok=ok))
    if record["status"] != "ok":
        echo(f"{prefix}failed: {record['error']}")
        if directory is not None:
            echo(f"{prefix}its whole output: gpubench logs {plan.run_id} {point.world_size}")
    if record.get("machine_busy"):
        echo(f"{prefix}note: the machine was busy: {record['machine_busy']}")
    return _stop_after(outcome, point, prefix, where, echo, warned)


def _keep_interrupted(log: runlogs.RunLog, store: ResultsStore, plan: SweepPlan, name: str,
                      point: SweepPoint, elapsed: float, error: BaseException,
                      echo: Callable[[str], None], prefix: str) -> None:
    """A run that did not come back (Ctrl-C, a lost machine): its output so far
    written to its log, with how it ended, and where to read it. It gets no record,
    so a sweep run again runs it again."""
    directory = getattr(store, "directory", None)
    if directory is None:
        return
    how = ("interrupted (Ctrl-C)" if isinstance(error, KeyboardInterrupt)
           else f"stopped: {type(error).__name__}: {error}")
    try:
        log.write(directory, runlogs.relative_path(plan.run_id, name), [],
                  [f"# {how} after {elapsed:.1f}s; no record was written"])
    except GpubenchError:
        return  # the interruption is what the user hears of, not a log it could not write
    echo(f"{prefix}{how}; its output so far: gpubench logs {plan.run_id} {point.world_size}")


def _stop_after(outcome: RunOutcome, point: SweepPoint, prefix: str, where: str,
                echo: Callable[[str], None], warned: set[str]) -> str | None:
    """Why the sweep must stop after this run (files it changed, a failure that will
    repeat, processes that did not train together), or None."""
    stop = _files_left(outcome, prefix, where, echo, warned)
    if stop:
        return stop
    if outcome.failure is not None and outcome.failure.repeats:
        return stop_reason(outcome.failure, point.describe())
    if outcome.failure is not None and outcome.failure.kind == ALONE:
        return (f"stopping the sweep at {point.describe()}: its processes did not train together, "
                "and at a larger count they would not either")
    if outcome.failure is not None and outcome.failure.kind == NO_STEP:
        return (f"stopping the sweep at {point.describe()}: its processes took no training step, "
                "and at a larger count they would not either")
    return None


def judged(outcome: RunOutcome, reports: ProbeReports, point: SweepPoint) -> RunOutcome:
    """A user's script's outcome with what its processes did (process group, models
    wrapped, their training steps); one whose processes did not train together, or
    took no training step, fails, and so would every larger count."""
    measured = {**outcome.measured, **reports.record_fields()}
    steps = reports.step_fields()
    found = None
    if outcome.error is None:
        own = bool((outcome.record or {}).get("throughput"))
        found = judge(reports, point.world_size, last_words(outcome.output_tail), own)
    if found is None:
        return replace(outcome, measured=measured, steps=steps)
    kind, why = found
    return replace(outcome, measured=measured, steps=steps, error=why, failure=Failure(why, kind))


@dataclass
class _Runs:
    """This sweep's runs (the skipped left out), which of them is running, and how the
    last one failed."""

    total: int
    index: int = 0
    failure: Failure | None = None
    traced: set[SweepPoint] = field(default_factory=set)  # points whose run was traced (--trace)


def _goes_on_at_its_count(failure: Failure | None, point: SweepPoint, todo: list[SweepPoint],
                          failed: set[SweepPoint], result: SweepResult, echo: Callable[[str], None]) -> bool:
    """A script that runs at one process count only (Lightning's fixed `devices`): where
    the plan has that count still to run, every other count is dropped, saying why, and
    the sweep goes on to it (True); else the sweep stops as for any repeating failure."""
    only = failure.runs_only_at if failure is not None else None
    ahead = [p for p in todo if p != point and p not in failed and p not in result.dropped]
    if only is None or not any(p.world_size == only for p in ahead):
        return False
    for other in ahead:
        if other.world_size != only:
            result.dropped[other] = (f"skipping {other.describe()}: the script runs only at "
                                     f"{only} process{'es' if only != 1 else ''}")
            echo(result.dropped[other])
    return True


def _files_left(outcome: RunOutcome, prefix: str, where: str, echo: Callable[[str], None],
                warned: set[str]) -> str | None:
    """Say what a user's script left in its working directory; a file it changed
    stops the sweep (the next run would start from it)."""
    files = outcome.files
    if files is None:
        return None
    if not files.watched:
        if "unwatched" not in warned:
            warned.add("unwatched")
            echo(f"note: files the runs leave in their working directory are not moved aside "
                 f"({files.why_unwatched}): a checkpoint one run writes may change what the next "
                 "does; --workdir DIR runs them in a project directory that is watched")
        return None
    if files.left_behind:
        shown = ", ".join(files.left_behind[:5]) + (" ..." if len(files.left_behind) > 5 else "")
        echo(f"{prefix}the run left {len(files.left_behind)} file(s) in its working directory "
             f"({shown}); moved to {files.kept_in}, so that the next run starts from the same files")
    if files.changed:
        shown = ", ".join(files.changed[:5]) + (" ..." if len(files.changed) > 5 else "")
        return (f"stopping the sweep: the run at {where} changed files that were in its working "
                f"directory before it ({shown}); the next run would start from them. Put them "
                "back or move them out, then run the sweep again")
    return None


def _log_footer(outcome: RunOutcome, record: dict) -> list[str]:
    lines = [f"# command: {record.get('launch_command')}",
             f"# exit code {outcome.returncode} after {outcome.elapsed_seconds:.1f}s: "
             f"{record['status']}" + (f": {record['error']}" if record.get("error") else "")]
    return lines


def _store_paths(store) -> tuple:
    """The results directory, which a run's file guard leaves alone."""
    directory = getattr(store, "directory", None)
    return (directory.resolve(),) if directory is not None else ()


def run_sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
              echo: Callable[[str], None]) -> list[dict]:
    """Run every point of the plan, recorded or not, and return the new records."""
    return sweep(launcher, replace(plan, force=True), store, echo).records


class NothingFitsError(GpubenchError):
    """No point of a sweep fits the machine, so nothing ran and nothing was recorded."""


def sweep_new_run(launcher: Launcher, workload: WorkloadRef, points: list[SweepPoint] | None,
                  workload_args: list[str], store: ResultsStore, echo: Callable[[str], None],
                  timeout: float = DEFAULT_TIMEOUT_S, force: bool = False,
                  repeat: int | None = None, ask: Ask | None = None) -> tuple[SweepPlan, SweepResult]:
    """Sweep `workload` as a new run over `points` (None: the machine's default
    points), `repeat` times each (None: default_repeats), and return the plan (its
    run id) and what was recorded. A sweep whose every point was already recorded
    runs nothing and is no error; one whose no point fits the machine raises
    NothingFitsError. `ask`: as for sweep."""
    machine = launcher.machine()
    chosen = points or sweep_points(machine)
    plan = SweepPlan(workload, chosen, list(workload_args), new_run_id(), timeout, force=force,
                     repeat=repeat or default_repeats(machine))
    result = sweep(launcher, plan, store, echo, ask)
    if not result.records and not result.skipped:
        raise NothingFitsError("no GPU count of the sweep fits this machine")
    return plan, result
