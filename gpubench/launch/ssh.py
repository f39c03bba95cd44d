"""Launch workloads with torchrun on a machine over SSH (the `ssh` provider and
every rented instance).

Each run gets an id, carried in the environment of every process it starts
(GPUBENCH_RUN=<id>: the `timeout` that bounds it, torchrun, and torchrun's
workers, which sit in sessions of their own), and a marker file in the remote
runs directory while it lasts. Ctrl-C, a timeout, or a dropped connection then
stops exactly the processes carrying that id, instead of leaving them on a paid
GPU; a run orphaned by a connection that never came back is stopped when the
next session opens. A dropped connection is re-established and the same point
runs again from the start.

Around each run the machine does what a local run does here: it measures its
load before and while the run lasts (machine_load, beside the run, tagged like
it), keeps the exit status and the CPU time of the run in files of the run,
and moves aside what a user's script left in its working directory
(workdir_guard); on a GPU, NCCL writes what it chose into files of the run, one per
process (nccl_log); one remote call after the run collects all of it. A run whose
remote shell was killed leaves no exit status: the failure says so.

On a machine with GPUs (nvidia-smi answered the environment check), a sampler runs
beside the run (gpu_sampling.main): each GPU's figures as lines of the run's output,
for the live display, and for a user's script nvidia-smi's lines for the record. It
starts with the run, is stopped and waited for as soon as the run ends (so that the
channel closes), and carries the run's tag like the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import time
import uuid
from pathlib import Path, PurePosixPath

from gpubench.launch import cpu_policy, gpu_sampling, nccl_log
from gpubench.onhost import leases
from gpubench.onhost import machine_load
from gpubench.onhost import stop_tagged
from gpubench.onhost import workdir_guard
from gpubench.launch.base import (PROBE, RECORD_ENV, FileChanges, Launcher, LineSink, Machine, RunOutcome,
                                  SweepPoint, cpu_threads_per_process, one_node_procs, record_args,
                                  script_argv, shown_command, visible_gpus)
from gpubench.launch.failures import RunFacts, explain
from gpubench.remote import deps, setup_step
from gpubench.remote.envcheck import RemoteEnv
from gpubench.remote.pull import PullError, RunFiles, pull
from gpubench.providers.common import VOLUME_MOUNT
from gpubench.remote.errors import ConnectionLostError, SshError
from gpubench.remote.session import WORKDIR, RemoteSession, SessionOptions
from gpubench.remote.targets import SSH_PROVIDER, RemoteHost
from gpubench.suite import WorkloadRef, with_project, workloads_dir

RUN_TAG = stop_tagged.TAG_VAR
DATA_ENV = "GPUBENCH_DATA"  # a run's path to its machine's volume
KILL_GRACE_S = 5  # between SIGTERM (torchrun stops its workers) and SIGKILL
TIMEOUT_EXIT = 124  # coreutils `timeout`
LOCAL_MARGIN_S = 60  # the remote `timeout` acts first; this covers a hung link

# Module sources run by the remote python (standard library only).
KILL_RUNS = Path(stop_tagged.__file__).read_text()
LEASES = Path(leases.__file__).read_text()
FEED = Path(gpu_sampling.__file__).read_text()
LOAD = Path(machine_load.__file__).read_text()
GUARD = Path(workdir_guard.__file__).read_text()
# What a run leaves in runs/ beside its record, for _collect: name -> file suffix (a
# pattern: NCCL's files, one per process, <run>.nccl.<host>.<pid>).
RUN_FILES = {"load": ".load", "watch": ".watch", "times": ".times", "exit": ".exit",
             "files": ".left", "nccl": ".nccl.*"}
# An environment value that starts with this is a path under the remote base, which the
# run's shell knows as $B (shell_line): where a process that changes directory still finds it.
IN_BASE = "$B/"
FILE_MARK = "@gpubench-file "
# gpubench's own folders in the remote base, where a run without --workdir starts
BASE_FOLDERS = ("runs", "leases", "state", "workdir", "workloads")
TIMES = re.compile(r"(\d+)m([\d.]+)s")


def record_path(run_id: str) -> str:
    """Where a run's record goes on the machine, relative to the remote base."""
    return f"runs/{run_id}.json"


def traces_path(run_id: str) -> str:
    """Where a run's per-rank traces go on the machine (run --trace), relative to the base."""
    return f"runs/{run_id}.traces"


def samples_path(run_id: str) -> str:
    """Where nvidia-smi's samples beside a user's script go, relative to the remote base."""
    return f"runs/{run_id}.gpu"


def remote_script(workload: WorkloadRef) -> str:
    """The script's path as the run sees it: relative to the remote base, where suite
    and user scripts sit side by side, or inside the user's project (--workdir)."""
    if workload.workdir is not None:
        return workload.script.relative_to(workload.workdir).as_posix()
    return str(PurePosixPath("workloads") / workload.script.name)


def remote_probe(workload: WorkloadRef) -> str:
    """The probe's path as the run sees it: it sits with the suite (base/workloads)."""
    return f"{'../' if workload.workdir is not None else ''}workloads/{PROBE}"


def remote_cwd(workload: WorkloadRef) -> str:
    """Where the run starts, relative to the remote base: the project for --workdir."""
    return "." if workload.workdir is None else WORKDIR


def machine_for(host: RemoteHost, env: RemoteEnv) -> Machine:
    """The Machine the records describe: the provider's word first, the machine's own second.

    A user's own machine (the `ssh` provider) has no type name: it is called by its
    host, so that two different machines never pass for each other's records.
    """
    gpus = env.gpus
    count = host.gpu_count if host.gpu_count is not None else len(gpus)
    name = host.gpu_name or (gpus[0] if gpus else "cpu")
    mine = host.target.host if host.provider == SSH_PROVIDER else ""
    if count <= 0:
        itype = host.instance_type or f"{mine or host.provider}: {env.cpu_count}-core cpu"
        return Machine(host.provider, itype, "cpu", 0, host.price_per_hour, "cpu")
    itype = host.instance_type or (f"{mine}: " if mine else "") + f"{count}x {name}"
    return Machine(host.provider, itype, name, count, host.price_per_hour, "cuda")


class SshLauncher(Launcher):
    """torchrun --standalone on one machine over SSH, through a session that
    reconnects; made by `connect`, which leaves it connected and holding its lease."""

    def __init__(self, session: RemoteSession, machine: Machine) -> None:
        self._session = session
        self._machine = machine
        self._synced: set[Path] = set()
        self.controller = uuid.uuid4().hex  # this sweep, in the machine's run markers
        self._connection_number = 0
        self.lease = ""  # held while the current connection lives (begin)
        self.ledger_name: str | None = None  # the machine's name in the ledger, where gpubench rented it
        self.data_path: str | None = None  # where its volume is mounted: every run's $GPUBENCH_DATA
        self._prepare_log: list[str] = []

    def machine(self) -> Machine:
        return self._machine

    def prepare(self, workload: WorkloadRef) -> None:
        """Get the workload onto the machine with what it needs: once per session
        for the suite, once per machine for its requirements and its setup step."""
        if workload.workdir is not None:
            if workload.workdir not in self._synced:
                # the results directory, when it is inside the project, stays here
                self._session.upload_workdir(workload.workdir, workload.untouched)
                self._synced.add(workload.workdir)
            if workloads_dir() not in self._synced:  # the probe a user's script runs under
                self._session.upload(workloads_dir(), None)
                self._synced.add(workloads_dir())
        elif workload.script not in self._synced:
            suite = workloads_dir()
            script = None if workload.script.parent == suite else workload.script
            self._session.upload(suite, script)
            self._synced |= {p for p in suite.glob("*.py")} | ({script} if script else set())
        plan = workload.project or with_project(workload).project
        cwd = self.run_dir(workload)
        if plan.requirements is not None:
            installed = deps.ensure(self._session.conn, self._session.options.python,
                                    self._session.layout.state, plan.requirements, cwd, self._session.echo)
            if installed.python != self._session.options.python:
                self._session.project_python = installed.python
            self._prepare_log += installed.log
        if plan.setup:   # with the environment of a run on the whole machine
            env = self.environment(max(self._machine.gpu_count, 1))
            # with a volume, once per volume: the marker lives on it, for every machine rented with it
            markers = f"{self.data_path}/.gpubench" if self.data_path else self._session.layout.state
            done = setup_step.ensure_setup(self._session.conn, plan.setup, self._session.python,
                                           markers, cwd, env, self._session.echo,
                                           per="volume" if self.data_path else "machine")
            self._prepare_log += done.log

    def run_dir(self, workload: WorkloadRef) -> str:
        """Where a run of `workload` starts on the machine (relative to its home, or absolute)."""
        cwd, base = remote_cwd(workload), self._session.layout.base
        return base if cwd == "." else f"{base}/{cwd}"

    def files_at(self, workload: WorkloadRef) -> RunFiles:
        return RunFiles(self.run_dir(workload), self._session.target, self._session.known_hosts,
                        self.ledger_name)

    def prepare_log(self) -> list[str]:
        lines, self._prepare_log = self._prepare_log, []
        return lines

    def close(self) -> None:
        """Close the connection, and with it the lease: its runs are left to the
        next sweep to stop should any still run."""
        self._session.close()

    # ------------------------------------------------------------------ commands
    def command(self, workload: WorkloadRef, procs: int, record_file: str,
                workload_args: list[str]) -> list[str]:
        """The torchrun command as the machine runs it, paths relative to the remote base."""
        return [*shlex.split(self._session.python), "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={procs}",
                *script_argv(workload, remote_script(workload), remote_probe(workload)),
                *record_args(workload, record_file), *workload_args]

    def environment(self, procs: int) -> dict[str, str]:
        env = {"PYTHONUNBUFFERED": "1", **({DATA_ENV: self.data_path} if self.data_path else {})}
        remote = self._session.env
        if remote is not None and remote.cuda_available:
            env["CUDA_VISIBLE_DEVICES"] = visible_gpus(procs)
        elif remote is not None:
            env["OMP_NUM_THREADS"] = cpu_threads_per_process(remote.cpu_count, procs)
        return env

    def nccl_environment(self, run_id: str, machine_env: dict[str, str] | None = None) -> dict[str, str]:
        """NCCL's debug output into runs/<run_id>.nccl.<host>.<pid> on a machine whose torch
        sees CUDA (nccl_log.environment); nothing where the user set NCCL_DEBUG, in gpubench's
        environment or (`machine_env`: its NCCL_* variables) the machine's own."""
        remote = self._session.env
        cuda = remote is not None and remote.cuda_available
        return nccl_log.environment(f"{IN_BASE}runs/{run_id}.nccl", cuda,
                                    {**os.environ, **(machine_env or {})})

    def trace_environment(self, workload: WorkloadRef, run_id: str) -> dict[str, str]:
        """run --trace: each rank's trace into runs/<run_id>.traces/ on the machine."""
        return workload.trace.environment(IN_BASE + traces_path(run_id)) if workload.trace else {}

    def bring_traces(self, workload: WorkloadRef, run_id: str, on_line: LineSink,
                     said: bool = True) -> None:
        """run --trace: the run's traces pulled into the folder the sweep gave, then removed
        from the machine; a pull that fails is said (when `said`: the run went well) and
        costs the run nothing."""
        if workload.trace is None or workload.trace.directory is None:
            return
        base, rel = self._session.layout.base, traces_path(run_id)
        files = RunFiles(base, self._session.target, self._session.known_hosts)
        dest = Path(workload.trace.directory)
        try:
            pull(files, rel, (), dest, check=False)
        except PullError as e:
            if said:
                on_line(f"warning: the traces were not brought back: {e}")
            with contextlib.suppress(OSError):
                dest.rmdir()  # the folder the pull made, where nothing came
        try:
            self._session.conn.capture(f"rm -rf {shlex.quote(base)}/{rel}", 30)
        except (SshError, OSError):
            pass  # left in runs/: the next session's leftovers are cleared there

    def watched_gpus(self, procs: int) -> list[int] | None:
        """The GPUs a run of `procs` processes uses (CUDA_VISIBLE_DEVICES, environment),
        where nvidia-smi named the machine's GPUs; None where it has none to watch."""
        remote = self._session.env
        return list(range(procs)) if remote is not None and remote.gpus else None

    def shell_line(self, run_id: str, cmd: list[str], env: dict[str, str], timeout: float,
                   cwd: str = ".", watch_gpus: list[int] | None = None,
                   guard_files: str | None = None, keep_samples: bool = False) -> str:
        """cd to the base, mark the run, read the machine's load, then (from `cwd`,
        relative to the base) start it tagged, in a session of its own, under
        `timeout` (which also bounds a run whose controller has gone). Beside it the
        machine's load is watched; with `watch_gpus`, the GPU sampler says those GPUs'
        figures in the run's output (and with `keep_samples` keeps nvidia-smi's lines for
        the record), tagged and bounded the same way, and stopped and waited for as the
        run ends: its output is the channel's, which closes only once it is gone. After
        the run, its exit status and CPU time go to files of the run; with `guard_files`
        (a name under the left-behind folder), what it left in `cwd` is moved aside."""
        q = shlex.quote
        py = self._session.python
        assignments = " ".join(f"{k}={_shell_value(v)}" for k, v in env.items())
        limit = max(1, int(timeout))
        run = f'"$B"/runs/{run_id}'
        start = feed = stop_feed = ""
        if watch_gpus:   # in braces: `&` backgrounds the sampler alone, $! stays in this shell
            keep = samples_path(run_id) if keep_samples else None
            start = "gpubench_feed=; "
            feed = (f"{{ env {RUN_TAG}={run_id} timeout {limit + 30} {py} -c {q(FEED)} "
                    f"{shlex.join(gpu_sampling.feed_args(watch_gpus, keep=keep))} "
                    f"< /dev/null 2>/dev/null & gpubench_feed=$!; }} && ")
            # after `times`: the sampler's CPU time is not the run's
            stop_feed = ('if [ -n "$gpubench_feed" ]; then kill "$gpubench_feed" 2>/dev/null; '
                         'wait "$gpubench_feed" 2>/dev/null; fi; ')
        # what only informs the record may fail without stopping the run: { ...; true; }
        watch = (f"{{ {py} -c {q(LOAD)} before runs/{run_id}.load 2>/dev/null; true; }} && "
                 f"(env {RUN_TAG}={run_id} timeout {limit + 30} {py} -c {q(LOAD)} watch {run_id} "
                 f"runs/{run_id}.watch < /dev/null > /dev/null 2>&1 &) && ")
        skip = " ".join(BASE_FOLDERS) if cwd == "." else ""
        snapshot = settle = ""
        if guard_files:
            snapshot = f"{{ {py} -c {q(GUARD)} snapshot . {run}.snap {skip} 2>/dev/null; true; }} && "
            settle = (f"{py} -c {q(GUARD)} settle . {run}.snap {q(guard_files)} {skip} "
                      f"> {run}.left 2>/dev/null; rm -f {run}.snap; ")
        return (f"{start}cd {q(self._session.layout.base)} && mkdir -p runs && B=$PWD && "
                f"printf %s {q(self.lease)} > runs/{run_id}.running && {feed}{watch}"
                f"export {RECORD_ENV}=\"$B/{record_path(run_id)}\" && cd {q(cwd)} && {snapshot}"
                f"setsid -w env {RUN_TAG}={run_id} "
                f"timeout -k 10 {limit} env {assignments} {shlex.join(cmd)}; code=$?; "
                f"times > {run}.times 2>/dev/null; {stop_feed}{settle}"
                f"echo $code > {run}.exit; exit $code")

    # ------------------------------------------------------------------ running
    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        """Run one point; after a dropped connection, reconnect and run it again.

        The point has no record yet, so running it again from the start is resuming
        the sweep at its first point without one. The session's reconnect budget
        bounds the retries; once it is spent, ConnectionLostError reaches the caller.
        """
        procs = one_node_procs(point)
        for _ in range(self._session.reconnects_left + 1):
            try:
                return self._run_once(workload, procs, workload_args, on_line, timeout)
            except ConnectionLostError:
                self._session.reconnect()  # raises once the reconnects are spent
                self.begin()  # also stops the run the lost connection orphaned
                on_line("reconnected; running this count again from the start")
        raise ConnectionLostError(f"lost the SSH connection to {self._session.target} too often")

    def _run_once(self, workload: WorkloadRef, procs: int, workload_args: list[str],
                  on_line: LineSink, timeout: float) -> RunOutcome:
        run_id = uuid.uuid4().hex
        record_file = record_path(run_id)
        cmd = self.command(workload, procs, record_file, workload_args)
        cwd = remote_cwd(workload)
        # every run's GPUs watched live; a suite workload samples them itself for the
        # record, a user's script is sampled from outside
        gpus = self.watched_gpus(procs)
        sample = gpus is not None and not workload.in_suite
        guard = None if workload.in_suite else f"{time.strftime('%Y%m%d-%H%M%S')}-{procs}gpu"
        env = {**self.environment(procs), **self.nccl_environment(run_id),
               **self.trace_environment(workload, run_id)}
        line = self.shell_line(run_id, cmd, env, timeout, cwd, gpus, guard, keep_samples=sample)
        start = time.perf_counter()
        try:
            result = self._session.conn.stream(line, on_line, timeout + LOCAL_MARGIN_S,
                                               untailed=gpu_sampling.is_live_line)
        except ConnectionLostError:
            raise
        except BaseException:  # Ctrl-C: the run must not outlive us
            self._stop_quietly(run_id)
            raise
        elapsed = time.perf_counter() - start
        if result.timed_out:
            self._stop_quietly(run_id)
        timed_out = result.timed_out or result.exit_code == TIMEOUT_EXIT
        code = -9 if timed_out else result.exit_code
        self.bring_traces(workload, run_id, on_line, said=code == 0)
        # the watcher (and a GPU sampler) are all that still carry the run's tag
        found = self._collect(run_id, wanted=code == 0, stop=True)
        exit_text = found.get("exit", "").strip()
        if not timed_out and code == -1 and exit_text.lstrip("-").isdigit():
            code = int(exit_text)  # the shell saw the run's status; the channel lost it
        measured = self._measured(workload, env, found)
        failure = None
        if code != 0:
            failure = explain(result.tail, RunFacts(
                code if code is not None else -9, timed_out, timeout,
                exit_status_known=timed_out or code != -1,
                peak_rss_bytes=measured.get("peak_rss_bytes"),
                memory_total_bytes=measured.get("memory_total_bytes"),
                memory_available_min_bytes=measured.get("memory_available_min_bytes"), remote=True))
        error = failure.error if failure else None
        if error and "ModuleNotFoundError" in error and not workload.in_suite and workload.workdir is None:
            error += " (only the script itself was sent: --workdir DIR sends its project)"
        script = remote_script(workload)
        where = self.run_dir(workload)
        shown = shown_command([f"{where}/{arg}" if arg == script else arg for arg in cmd],
                              record_file)
        beside = gpu_sampling.summarise(found.get("samples", "")) if sample else None
        files = _file_changes(found.get("files", "")) if guard else None
        return RunOutcome(code if code is not None else -9, found.get("record"), shown, elapsed,
                          error, result.tail, beside, measured, failure, files)

    def _measured(self, workload: WorkloadRef, env: dict[str, str], found: dict) -> dict:
        """The record fields read on the machine around the run (record_schema)."""
        before, watched = _json(found.get("load")), _json(found.get("watch"))
        figures = {k: before.get(k) for k in ("cpu_cores", "load_before", "busy_before",
                                              "memory_total_bytes", "mock_instance") if k in before}
        figures.update({k: watched.get(k) for k in ("peak_rss_bytes", "memory_available_min_bytes")
                        if k in watched})
        if before and watched:
            figures.update(machine_load.during(before, watched, _cpu_seconds(found.get("times", ""))))
        figures["machine_busy"] = machine_load.busy_verdict(figures)
        remote = self._session.env
        cuda = remote is not None and remote.cuda_available
        figures["device"] = "cuda" if cuda else "cpu"
        figures["cpu_pinning"] = cpu_policy.NOT_PINNED if cuda else cpu_policy.pinning()
        if not workload.in_suite and "OMP_NUM_THREADS" in env:
            figures["threads_per_process"] = int(env["OMP_NUM_THREADS"])
        figures.update(nccl_log.collected({"": found.get("nccl", "")}))
        return figures

    def _collect(self, run_id: str, wanted: bool, stop: bool = False) -> dict:
        """What the run left on the machine, and its files removed from there: its
        record and GPU samples (when `wanted`), its load figures, exit status, CPU time,
        NCCL's files and the files it left behind. With `stop`, what still carries the run's tag
        (the watchers beside it) is stopped first, so that they write their last word."""
        q = shlex.quote
        base = self._session.layout.base
        qb = q(base)
        names = {"record": record_path(run_id), "samples": samples_path(run_id),
                 **{key: f"runs/{run_id}{suffix}" for key, suffix in RUN_FILES.items()}}
        shown = [key for key in names if wanted or key not in ("record", "samples")]
        parts = [f"{self._session.python} -c {q(KILL_RUNS)} 1 {run_id} > /dev/null 2>&1; "
                 if stop else ""]
        parts += [f"echo {q(FILE_MARK + key)}; cat {qb}/{names[key]} 2>/dev/null; " for key in shown]
        files = [*names.values(), f"runs/{run_id}.running", f"runs/{run_id}.snap"]
        _, text = self._session.conn.capture(
            "".join(parts) + f"rm -f {' '.join(f'{qb}/{f}' for f in files)}", 60)
        found: dict = {}
        for chunk in text.split(FILE_MARK)[1:]:
            key, _, body = chunk.partition("\n")
            found[key.strip()] = body
        record_text = found.pop("record", "")
        try:
            record = json.loads(record_text) if record_text.strip() else None
        except ValueError:
            record = None
        found["record"] = record if isinstance(record, dict) else None
        return found

    def begin(self) -> None:
        """On a new connection: hold a lease on the machine for as long as it lives,
        so that another sweep there leaves this one's runs alone, and stop the runs
        whose sweep is gone (its connection lost, or gpubench killed), this one's
        earlier connections included. One remote call does both."""
        q = shlex.quote
        layout = self._session.layout
        self._connection_number += 1
        lease = f"{self.controller}.{self._connection_number}"
        said = self._session.conn.hold(f"{self._session.python} -c {q(LEASES)} hold "
                                       f"{q(layout.leases)} {lease} {q(layout.runs)}", leases.HELD)
        self.lease = lease
        line = next((ln for ln in said.splitlines() if ln.startswith(leases.ORPHANS)), "")
        self.clear_leftovers([t for t in line.split()[1:] if t.isalnum()])

    def clear_leftovers(self, run_ids: list[str]) -> int:
        """Stop the given left-over runs and remove their markers; returns how many
        processes were still running."""
        if not run_ids:
            return 0
        q = shlex.quote
        runs = self._session.layout.runs
        stopped = self.kill(run_ids)
        # the marker and whatever else the run left there (its load figures, exit status)
        self._session.conn.capture(" ".join(["rm", "-f", *[f"{q(runs)}/{i}.*" for i in run_ids]]), 30)
        self._session.echo(f"{self._session.target}: cleared {len(run_ids)} run(s) left over from a "
                           f"lost connection ({stopped} process(es) still running, now stopped)")
        return stopped

    def kill(self, run_ids: list[str]) -> int:
        """Stop every process of the given runs on the machine; returns how many there were."""
        q = shlex.quote
        _, text = self._session.conn.capture(
            f"{self._session.python} -c {q(KILL_RUNS)} {KILL_GRACE_S} {' '.join(run_ids)}",
            KILL_GRACE_S + 20)
        last = (text.split() or ["0"])[-1]
        return int(last) if last.isdigit() else 0

    def _stop_quietly(self, run_id: str) -> None:
        try:
            self.kill([run_id])
            self._collect(run_id, wanted=False)
        except (SshError, OSError):
            pass  # the link is gone too: the next session stops it, `timeout` bounds it


def _shell_value(value: str) -> str:
    """A value for the run's shell: quoted, a path under the base (IN_BASE) from $B."""
    if value.startswith(IN_BASE):
        return f'"$B"/{shlex.quote(value[len(IN_BASE):])}'
    return shlex.quote(value)


def _json(text: str | None) -> dict:
    try:
        value = json.loads(text) if text and text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _cpu_seconds(times_output: str) -> float | None:
    """The children's user + system time from the shell's `times` (its second line)."""
    lines = [line for line in times_output.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    found = TIMES.findall(lines[1])
    if len(found) != 2:
        return None
    return sum(int(m) * 60 + float(s) for m, s in found)


def _file_changes(settled: str) -> FileChanges:
    line = next((ln for ln in settled.splitlines() if ln.startswith(workdir_guard.MARK)), "")
    found = _json(line[len(workdir_guard.MARK):])
    if not found:
        return FileChanges(False, why_unwatched="its working directory could not be listed")
    return FileChanges(bool(found.get("watched")), list(found.get("created", [])),
                       found.get("kept_in"), list(found.get("changed", [])),
                       None if found.get("watched") else "the working directory is shared with "
                       "other programs, or holds too many files to list")


def data_path(session: RemoteSession) -> str:
    """Where the machine's volume is mounted: VOLUME_MOUNT, under the machine's root (the
    mock cloud's machines share this host's /, and say where theirs is)."""
    _, prefix = session.conn.capture('printf %s "${GPUBENCH_MOCK_ROOT:-}"', 30)
    return prefix.strip() + VOLUME_MOUNT


def connect(host: RemoteHost, known_hosts: Path, options: SessionOptions,
            echo: LineSink) -> SshLauncher:
    """Connect to `host`, check its environment once, and return a launcher for it.
    The caller closes the launcher (a `with` on it does)."""
    session = RemoteSession(host.target, known_hosts, options, echo)
    try:
        env = session.open()
        launcher = SshLauncher(session, machine_for(host, env))
        launcher.ledger_name = host.name if host.provider != SSH_PROVIDER else None
        if host.volume:
            launcher.data_path = data_path(session)
        launcher.begin()
    except BaseException:
        session.close()
        raise
    return launcher
