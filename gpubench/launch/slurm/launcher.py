"""The Slurm launcher: each sweep point is one sbatch job on the cluster, its
record collected from the shared filesystem with what Slurm says of the job.

On the cluster, under the base directory (--remote-dir, relative to the home):
    <base>/workloads/        the suite (and a user's script), copied before the first job
    <base>/workdir/          a user's project (--workdir), over SSH
    <base>/slurm/<job dir>/  one per job: job.sbatch, slurm-<id>.out/.err, record.json, exit-code,
                             and on GPU nodes the GPU sampler its tasks run (gpu_sampling.py)
Beside the local records (SlurmOptions.keep_dir) each job's script and output
files are kept as <job id>.sbatch, .out and .err.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from gpubench.format import fill
from gpubench.launch import gpu_sampling
from gpubench.launch.base import (PROBE, Launcher, LineSink, Machine, NodeSpan, RunOutcome, SweepPoint,
                                  record_args, script_argv)
from gpubench.launch.failures import Failure, RunFacts, explain
from gpubench.launch.slurm import script as scripts
from gpubench.launch.slurm import states
from gpubench.launch.slurm.commands import Shell, Slurm
from gpubench.launch.slurm.errors import SlurmError, SlurmUsageError
from gpubench.launch.slurm.follow import Followed, Follower
from gpubench.launch.slurm.options import SlurmOptions
from gpubench.launch.slurm.script import JobSpec
from gpubench.launch.slurm.states import JobState, Partition
from gpubench.remote.pull import PullError, RunFiles, pull
from gpubench.suite import WorkloadRef, workloads_dir
from gpubench.workloads.script_probe import PREFIX as PROBE_PREFIX

PROVIDER = "slurm"
DEFAULT_NODES = (1, 2)  # a sweep's node counts unless --nodes says otherwise
ERROR_TAIL_LINES = 5
SLURM_SAYS = ("srun: ", "slurmstepd: ")  # Slurm's lines in a job's error file, not the workload's
SUITE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
SAMPLER = Path(gpu_sampling.__file__).read_text()   # standard library only: runs on the nodes


class SlurmLauncher(Launcher):
    """sbatch on a Slurm cluster, through a shell on its login node (here or over
    SSH); opened by open_launcher in gpubench.launch.slurm."""

    def __init__(self, shell: Shell, cluster: str, base: str, python: str, options: SlurmOptions,
                 partition: Partition, upload=None, closer=None, unasked: str | None = None) -> None:
        self.shell = shell
        self.slurm = Slurm(shell)
        self.cluster = cluster      # the login node, for the records' instance type
        self.base = base            # absolute, on the cluster
        self.python = python
        self.options = options
        self.partition = partition
        self._upload = upload       # (workload) -> None over SSH; None: copy here
        self._closer = closer
        self._prepared: set[Path] = set()
        self.unasked = unasked      # why sinfo could not be asked (a dry run without a controller)
        self.follower = Follower(self.slurm, options.poll_seconds, options.pending_timeout)

    # ------------------------------------------------------------------ contract
    def machine(self) -> Machine:
        p = self.partition
        itype = f"{self.cluster}:{p.name}"
        if self.unasked is not None:  # any count the user gives; 1 GPU per node unless told
            itype = f"{itype} (not asked: sinfo failed)"
            return _UnaskedMachine(PROVIDER, itype, "gpu", 1, None, "cuda", max_nodes=UNASKED_NODES,
                                   span=self._span(itype))
        if p.gpus_per_node == 0:
            itype = f"{itype} ({p.cpus_per_node}-cpu nodes)"
            return Machine(PROVIDER, itype, "cpu", 0, None, "cpu", max_nodes=p.nodes,
                           span=self._span(itype))
        gpu = p.gpu_type or "gpu"
        price = (self.options.price_per_gpu_hour * p.gpus_per_node
                 if self.options.price_per_gpu_hour is not None else None)
        itype = f"{itype} ({p.gpus_per_node}x {gpu} nodes)"
        return Machine(PROVIDER, itype, gpu, p.gpus_per_node, price, "cuda", max_nodes=p.nodes,
                       span=self._span(itype))

    @staticmethod
    def _span(itype: str) -> NodeSpan:
        """Whole nodes, by default 1 and 2 of them: a sweep to the partition's every
        node would queue for ever on a busy cluster."""
        return NodeSpan(itype, default_nodes=DEFAULT_NODES)

    def prepare(self, workload: WorkloadRef) -> None:
        """Put the suite (or the user's project) on the cluster's filesystem once."""
        key = workload.workdir or workload.script
        if key in self._prepared:
            return
        if self._upload is not None:
            self._upload(workload)
        else:  # on the login node: a copy the compute nodes see (a project's script runs
            #     from --workdir, under the suite's probe)
            target = Path(self.base) / "workloads"
            suite = workloads_dir()
            own = workload.workdir is None and not workload.in_suite and workload.script.parent != suite
            if own and (suite / workload.script.name).exists():
                raise SlurmUsageError(f"{workload.script.name} has the name of a file of the "
                                      "workload suite; rename it")
            shutil.copytree(suite, target, dirs_exist_ok=True, ignore=SUITE_IGNORE)
            if own:
                shutil.copy2(workload.script, target / workload.script.name)
        self._prepared.add(key)

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
            self._closer = None

    # ------------------------------------------------------------------ scripts
    def job_spec(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
                 job_dir: str) -> JobSpec:
        if workload.workdir is not None:
            here = self._upload is None
            workdir = str(workload.workdir) if here else f"{self.base}/workdir"
            script = workload.script.relative_to(workload.workdir).as_posix()
        else:
            workdir = f"{self.base}/workloads"
            script = workload.script.name
        # a user's script runs under the probe, which sits with the suite (base/workloads)
        script, *probed = script_argv(workload, script, f"{self.base}/workloads/{PROBE}")
        spec = JobSpec(workload.name, point.nodes, point.procs_per_node, job_dir, workdir,
                       self.python, script, gpus=self.partition.gpus_per_node > 0,
                       env=workload.trace.environment(traces_dir(job_dir)) if workload.trace else {})
        return replace(spec, script_args=[*probed, *record_args(workload, spec.record_path),
                                          *workload_args])

    def script(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
               job_dir: str | None = None) -> tuple[JobSpec, str]:
        """The sbatch script of one point (for --dry-run: in a directory named so)."""
        spec = self.job_spec(workload, point, workload_args,
                             job_dir or f"{self.base}/slurm/dry-run-{_point_tag(workload, point)}")
        return spec, scripts.render(spec, self.options)


    def dry_run(self, workload: WorkloadRef, points: list[SweepPoint], workload_args: list[str]) -> str:
        """The script of every point, as it would be submitted (--dry-run); nothing is.
        Where Slurm could not be asked, the first lines say so and what was assumed."""
        parts = [] if self.unasked is None else [fill(self.unasked_line(), 88, "# ", "# ")]
        for point in points:
            spec, text = self.script(workload, point, workload_args)
            parts.append(f"# ---- {point.describe()}: would be submitted as sbatch {spec.script_path}\n{text}")
        return "\n".join(parts) + "# --dry-run: nothing was submitted\n"
    def unasked_line(self) -> str:
        """What a dry run could not ask Slurm, and what its scripts assume instead."""
        partition = (f"partition {self.options.partition}" if self.options.partition
                     else "the default partition")
        return (f"Slurm could not be asked: {self.unasked}. These scripts assume {partition} "
                "and the GPUs per node of --gpus-per-node (1 unless given); Slurm has not "
                "checked them (no sbatch --test-only)")

    def check(self) -> None:
        """Ask Slurm whether it would take a job of this sweep (one node), submitting
        nothing: an unknown partition, account, QOS or reservation is refused here,
        in Slurm's own words."""
        spec = JobSpec("check", 1, 1, self.base, self.base, self.python, "-",
                       gpus=self.partition.gpus_per_node > 0)
        flags = [f for f in scripts.sbatch_lines(spec, self.options)
                 if not f.startswith(("--output=", "--error="))]
        self.slurm.test_only(flags)

    # ------------------------------------------------------------------ running
    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        if point.nodes > self.partition.nodes:
            raise ValueError(f"{point.nodes} nodes: partition {self.partition.name} has "
                             f"{self.partition.nodes}")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        job_dir = f"{self.base}/slurm/{stamp}-{_point_tag(workload, point)}-{uuid.uuid4().hex[:6]}"
        spec, text = self.script(workload, point, workload_args, job_dir)
        self.shell.write(spec.script_path, text)
        if spec.gpus:   # each node's GPUs watched beside its tasks (script._gpu_watch)
            self.shell.write(spec.sampler_path, SAMPLER)
        start = time.perf_counter()
        job_id = self.slurm.submit(spec.script_path, cwd=job_dir)
        kept = self._keep(job_id, "sbatch", text)
        on_line(f"submitted job {job_id}: {spec.script_path}")
        followed = self.follower.follow(job_id, scripts.output_file(job_dir, job_id), on_line, timeout)
        waited = time.perf_counter() - start
        return self._outcome(workload, point, spec, job_id, followed, kept, waited, on_line)

    def _outcome(self, workload: WorkloadRef, point: SweepPoint, spec: JobSpec, job_id: str,
                 followed: Followed, kept: str | None, waited: float, on_line: LineSink) -> RunOutcome:
        job_dir = spec.job_dir
        err_text = self.shell.read(scripts.error_file(job_dir, job_id)) or ""
        out_text = self.shell.read(scripts.output_file(job_dir, job_id)) or ""
        self._keep(job_id, "out", out_text)
        self._keep(job_id, "err", err_text)
        for line in err_text.splitlines():  # the probe writes to stderr, which Slurm keeps apart
            if PROBE_PREFIX in line:
                on_line(line)
        error_tail = [ln for ln in err_text.splitlines()
                      if ln.strip() and PROBE_PREFIX not in ln][-ERROR_TAIL_LINES:]
        state = followed.state
        if state.source == states.FROM_SQUEUE:
            exit_text = self.shell.read(spec.exit_path)
            if not state.finished:  # the controller forgot it: the files say how it ended
                name, code = states.state_from_files(job_id, exit_text, err_text.splitlines()[-50:])
                state = JobState(job_id, name, exit_code=code, source=states.FROM_SQUEUE)
            elif exit_text and exit_text.strip().isdigit():
                state = state.with_exit_code(f"{int(exit_text.strip())}:0")
        record_text = self.shell.read(spec.record_path) if state.ok else None
        self._bring_traces(workload, spec, on_line, said=state.ok)
        record = _json(record_text)
        fields = self._slurm_fields(spec, job_id, state, kept, error_tail)
        elapsed = state.elapsed_s if state.elapsed_s is not None else waited
        wait = f", {fields['queue_wait_s']:.0f}s in the queue" if fields["queue_wait_s"] is not None else ""
        on_line(f"job {job_id} {state.state} after {elapsed:.0f}s{wait} "
                f"(exit {state.exit_code or 'unknown'}; state from {state.source})")
        error = None
        if followed.timed_out:
            error = (f"ran past --timeout; cancelled job {job_id} with scancel "
                     f"(Slurm state {state.state})")
        elif not state.ok:
            error = (f"Slurm state {state.state}, exit code {state.exit_code or 'unknown'}: "
                     f"{_telling_line(followed.output_tail + err_text.splitlines())}")
        code = 0 if error is None else _exit_number(state.exit_code)
        command = ["sbatch", spec.script_path]
        output_tail = followed.output_tail + err_text.splitlines()[-50:]
        failure = Failure(error, "timeout") if followed.timed_out else None   # the sweep asks before larger counts
        return RunOutcome(code, {**(record or {}), **fields}, command, elapsed, error, output_tail,
                          failure=failure)

    def _bring_traces(self, workload: WorkloadRef, spec: JobSpec, on_line: LineSink,
                      said: bool) -> None:
        """run --trace: the job's per-rank traces (its folder on the shared filesystem)
        copied into the folder the sweep gave: over SSH with rsync, on the login node itself
        as files. One that fails is said (when `said`: the job went well)."""
        if workload.trace is None or workload.trace.directory is None:
            return
        source, dest = traces_dir(spec.job_dir), Path(workload.trace.directory)
        session = getattr(self.shell, "session", None)  # SshShell's; a LocalShell has none
        try:
            if session is not None:
                pull(RunFiles(source, session.target, session.known_hosts), "", (), dest, check=False)
            elif Path(source).is_dir():
                shutil.copytree(source, dest, dirs_exist_ok=True)
        except (PullError, OSError) as e:
            if said:
                on_line(f"warning: the traces were not brought back from {source}: {e}")

    def _slurm_fields(self, spec: JobSpec, job_id: str, state: JobState, kept: str | None,
                      error_tail: list[str]) -> dict:
        elapsed = state.elapsed_s
        hours = elapsed / 3600.0 if elapsed is not None else None
        gpus = spec.nodes * spec.procs_per_node if spec.gpus else None
        gpu_hours = gpus * hours if gpus is not None and hours is not None else None
        price = self.options.price_per_gpu_hour
        return {
            "slurm_job_id": job_id,
            "slurm_partition": state.partition or self.partition.name,
            "slurm_account": state.account or self.options.account,
            "slurm_nodelist": state.nodelist or None,
            "slurm_state": state.state,
            "slurm_exit_code": state.exit_code,
            "slurm_state_source": state.source,
            "slurm_launch": self.options.launch,
            "slurm_script": kept or spec.script_path,
            "slurm_job_dir": spec.job_dir,
            "slurm_error_tail": error_tail,
            "slurm_elapsed_s": elapsed,
            "queue_wait_s": state.queue_wait_s,
            "gpu_hours": gpu_hours,
            "core_hours": state.cpus * hours if state.cpus and hours is not None else None,
            "allocation_cost": gpu_hours * price if gpu_hours is not None and price is not None else None,
        }

    def _keep(self, job_id: str, suffix: str, text: str) -> str | None:
        """A local copy of a job's file beside the records; its path, or None."""
        if self.options.keep_dir is None:
            return None
        path = Path(self.options.keep_dir) / f"{job_id}.{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)


UNASKED_NODES = 1 << 16  # a dry run that could not ask sinfo takes any --nodes


@dataclass(frozen=True)
class _UnaskedMachine(Machine):
    """A partition sinfo could not be asked about (a dry run): any count per node."""

    @property
    def max_procs(self) -> int | None:
        return None


def _unasked(options: SlurmOptions) -> Partition:
    """The partition a dry run assumes where sinfo could not be asked: the one named,
    with GPUs (how many per node: the sweep's --gpus-per-node)."""
    return Partition(options.partition or "default", UNASKED_NODES, 1, "", 1, "unknown",
                     options.partition is None)


def traces_dir(job_dir: str) -> str:
    """Where a job's ranks write their traces (run --trace), beside its record."""
    return f"{job_dir}/traces"


def _point_tag(workload: WorkloadRef, point: SweepPoint) -> str:
    name = scripts.job_name(workload.name).removeprefix("gpubench-")
    return f"{name}-{point.nodes}n{point.procs_per_node}g"


def _telling_line(tail: list[str]) -> str:
    """The workload's own error line, else its last line, without an 'exit code N'
    prefix: Slurm's exit code is said already."""
    own = [ln for ln in tail if not ln.startswith(SLURM_SAYS)]
    if not (own or tail):
        return "no output"
    line = explain(own or tail, RunFacts(returncode=1)).error
    return line.split(": ", 1)[1] if line.startswith("exit code 1: ") else line


def _json(text: str | None) -> dict | None:
    try:
        record = json.loads(text) if text and text.strip() else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _exit_number(code: str | None) -> int:
    """'3:0' -> 3; a job killed by a signal or of unknown end -> 1 (never 0)."""
    head = (code or "").split(":")[0]
    return int(head) if head.isdigit() and int(head) != 0 else 1


# ---------------------------------------------------------------------- opening
def open_local(python: str, base: str, options: SlurmOptions, echo: LineSink,
               dry_run: bool = False) -> SlurmLauncher:
    """gpubench on the login node itself: sbatch must be on PATH."""
    from gpubench.launch.slurm.commands import LocalShell, local_env

    if shutil.which("sbatch") is None:
        raise SlurmUsageError("--on slurm: no sbatch on this machine's PATH; give the cluster's "
                              "login node: --on slurm:[user@]LOGIN[:port]")
    path = Path(base).expanduser()
    if not path.is_absolute():
        path = Path.home() / path
    return _opened(LocalShell(local_env()), socket.gethostname(), str(path), python, options,
                   None, None, echo, dry_run)


def open_ssh(spec: str, key: Path | None, known_hosts: Path, python: str, base: str,
             connect_wait: float, options: SlurmOptions, echo: LineSink,
             dry_run: bool = False) -> SlurmLauncher:
    """The login node over gpubench's SSH layer (pinned host keys, rsync)."""
    from gpubench.launch.slurm.commands import SshShell
    from gpubench.launch.slurm.login import login_target
    from gpubench.remote.connection import ConnectOptions
    from gpubench.remote.session import RemoteLayout, RemoteSession, SessionOptions

    target = login_target(spec, key)
    relative = base[2:] if base.startswith("~/") else base
    session = RemoteSession(target, known_hosts,
                            SessionOptions(python, RemoteLayout(relative), ConnectOptions(wait=connect_wait)),
                            echo)
    try:
        session.conn.open()
        code, home = session.conn.capture('printf "%s" "$HOME"', 30)
        absolute = relative if relative.startswith("/") else f"{home.strip()}/{relative}"
        shell = SshShell(session)

        def upload(workload: WorkloadRef) -> None:
            if workload.workdir is not None:
                session.upload_workdir(workload.workdir, workload.untouched)
                session.upload(workloads_dir(), None)  # the probe a user's script runs under
            else:
                suite = workloads_dir()
                session.upload(suite, None if workload.script.parent == suite else workload.script)

        return _opened(shell, target.host, str(PurePosixPath(absolute)), python, options, upload,
                       session.close, echo, dry_run)
    except BaseException:
        session.close()
        raise


def _opened(shell: Shell, cluster: str, base: str, python: str, options: SlurmOptions,
            upload, closer, echo: LineSink, dry_run: bool = False) -> SlurmLauncher:
    slurm = Slurm(shell)
    try:
        partition = slurm.partition(options.partition)
    except SlurmError as e:  # no controller to ask: a dry run still shows its scripts
        if not dry_run:
            raise
        launcher = SlurmLauncher(shell, cluster, base, python, options, _unasked(options),
                                 upload, closer, unasked=str(e))
        echo(f"slurm on {shell.where}: {e}; --dry-run shows the scripts without what sinfo "
             "would have said")
        return launcher
    if partition is None:
        if options.partition is None:
            raise SlurmError(f"sinfo on {shell.where} lists no default partition; name one with --partition")
        # Slurm's own words for a partition it does not know
        slurm.test_only([f"--partition={options.partition}"])
        raise SlurmError(f"sinfo on {shell.where} lists no partition '{options.partition}'")
    if partition.gpus_per_node == 0 and options.price_per_gpu_hour is not None:
        raise SlurmUsageError(f"--price-per-gpu-hour: partition {partition.name} has no GPUs "
                              "(no gres gpu in sinfo)")
    launcher = SlurmLauncher(shell, cluster, base, python, options, partition, upload, closer)
    launcher.check()
    gpus = (f"{partition.gpus_per_node}x {partition.gpu_type or 'gpu'}" if partition.gpus_per_node
            else f"{partition.cpus_per_node} CPUs, no GPU")
    echo(f"slurm on {shell.where}: partition {partition.name}, {partition.nodes} node(s) of {gpus}; "
         f"jobs in {base}/slurm")
    return launcher
