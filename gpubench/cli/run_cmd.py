"""`gpubench run`: sweep a workload over GPU counts wherever --on points (this
machine, a machine over SSH, a cluster of rented machines, a Slurm cluster: the
launcher factory reads --on), record, report."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer

from gpubench.cli.completion import workload_names
from gpubench.cli.launcher_flags import with_launcher_flags
from gpubench.cli.options import (DocumentFormatOpt, ForceOpt, GpuCountsOpt, InstallProjectOpt, MaxStepsOpt,
                                  OutputsOpt, PreflightOpt, ProceedOpt, QuietOpt, RemotePythonOpt, RepeatOpt,
                                  ResultsOpt, RunTimeoutOpt, SetupOpt, TraceOpt, TraceStepsOpt, WorkdirOpt,
                                  WorkloadArgsArg)
from gpubench.cli.output import output_for, run_document, say_load_warnings
from gpubench.cli.settings import flags_or_defaults
from gpubench.cli.trace_table import say_traces
from gpubench.errors import UsageError

WorkloadArg = Annotated[str, typer.Argument(
    help="A suite workload (see 'gpubench workloads') or a .py script.", autocompletion=workload_names)]
OnOpt = Annotated[Optional[str], typer.Option(
    "--on", help="Run on an instance from the ledger (its name), on a cluster from the ledger (its "
                 "name: torchrun across its nodes; NAME:I for one member), on your own machine: "
                 "user@host[:port] with --key, or on a Slurm cluster: slurm (sbatch on this machine) "
                 "or slurm:[user@]LOGIN[:port] (its login node over SSH).")]
KeyOpt = Annotated[Optional[Path], typer.Option(
    "--key", help="SSH private key for --on user@host [default: gpubench's own key].")]
PriceOpt = Annotated[Optional[float], typer.Option(
    "--price", help="$/h of the --on machine, for the cost columns "
                    "[default: the ledger's price; unknown for user@host].")]
RemoteDirOpt = Annotated[str, typer.Option(
    "--remote-dir", help="Working directory on the --on machine (relative to its home).")]
ConnectWaitOpt = Annotated[float, typer.Option(
    "--connect-wait", min=1, help="Seconds to keep trying an --on machine that does not answer.")]
NodesOpt = Annotated[Optional[str], typer.Option(
    "--nodes", help="Node counts to sweep, e.g. 1,2,4 [default on Slurm: 1 and 2; on a cluster: 1, "
                    "powers of two and all its nodes]; with --gpus on a cluster, the GPUs per node.")]
GpusPerNodeOpt = Annotated[Optional[str], typer.Option(
    "--gpus-per-node", help="GPUs (processes) per node to sweep, e.g. 4 or 1,4 "
                            "[default on Slurm: all of a node's].")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the sbatch scripts; submit nothing.")]


@with_launcher_flags(before="dry_run")
def run(ctx: typer.Context, workload: WorkloadArg, workload_args: WorkloadArgsArg = None,
        gpus: GpuCountsOpt = None, on: OnOpt = None, key: KeyOpt = None, price: PriceOpt = None,
        remote_python: RemotePythonOpt = "python3", workdir: WorkdirOpt = None,
        remote_dir: RemoteDirOpt = "gpubench", connect_wait: ConnectWaitOpt = 30.0,
        results: ResultsOpt = None, force: ForceOpt = False, timeout: RunTimeoutOpt = 3600.0,
        max_steps: MaxStepsOpt = None, outputs: OutputsOpt = None, setup: SetupOpt = None,
        install_project: InstallProjectOpt = False, nodes: NodesOpt = None, gpus_per_node: GpusPerNodeOpt = None, dry_run: DryRunOpt = False,
        preflight: PreflightOpt = False, yes: ProceedOpt = False, repeat: RepeatOpt = None,
        trace: TraceOpt = False, trace_steps: TraceStepsOpt = None,
        fmt: DocumentFormatOpt = "table", quiet: QuietOpt = False,
        launcher_flags: dict | None = None) -> None:
    """Run WORKLOAD at each GPU count (on Slurm: at each node count, one sbatch job
    each) and print the speedup/cost table."""
    from dataclasses import replace

    from gpubench import suite
    from gpubench.onhost import machine_load
    from gpubench.cli.confirm import asker
    from gpubench.cli.progress import progress_for
    from gpubench.launch.factory import LaunchOptions, open_launcher, read_on, scheme_options
    from gpubench.launch.points import check_asked, counts_asked, sweep_points
    from gpubench.store.results import ResultsStore
    from gpubench.sweep.run import sweep_new_run

    output = output_for(fmt)
    results, remote_python = flags_or_defaults(ctx, results=results, remote_python=remote_python)
    target = read_on(on, launcher_flags, dry_run, key, price)   # connects nothing
    asked = counts_asked(gpus, nodes, gpus_per_node)
    check_asked(asked, target.span, target.max_nodes)            # before connecting
    ref = suite.with_max_steps(suite.resolve(workload, workdir), max_steps)
    ref = _project_for(suite.with_project(ref, outputs, setup, install_project), target, setup)
    ref = suite.with_trace(ref, suite.trace_steps(trace, trace_steps))
    args = list(workload_args or [])
    suite.check_args(ref, args)  # a typo costs one line, not a run
    store = None if dry_run else ResultsStore.for_writing(results)
    options = LaunchOptions(key=key, price=price, remote_python=remote_python, remote_dir=remote_dir,
                            connect_wait=connect_wait, dry_run=dry_run,
                            idle_since=machine_load.first_mark(),  # gpubench's start
                            scheme_options=scheme_options(target, price, store and store.directory))
    if preflight:
        with output.prompts():
            _preflight(target, remote_python, yes, output.say)
    from gpubench.report import preload

    # the table's pandas is imported while the runs go on
    with progress_for(output.as_json, quiet, on_run_start=preload.in_background) as say, \
            open_launcher(target, replace(options, echo=say)) as launcher:
        points = sweep_points(launcher.machine(), asked)
        if dry_run:
            text = launcher.dry_run(ref, points, args)
            output.say(text)
            output.emit({"dry_run": True, "sbatch": text})
            return
        # after a run that hit --timeout: ask before the larger counts (none asked under --yes)
        ask = asker(yes, lambda: _asking(say, output))
        if target.cluster is not None and target.member is None:   # before the first run is paid
            from gpubench.sweep.link_check import points_to_run

            points = points_to_run(target.cluster, launcher.machine(), points, [(ref.name, args)],
                                   store.directory, yes, ask, say)
        from gpubench.sweep.predicted import WithPredictions   # each record with its forecast

        plan, result = sweep_new_run(launcher, ref, points, args, WithPredictions(store), say, timeout,
                                     force, repeat, ask)
    _report(output, store, plan, result, ref.name)


def _project_for(ref, target, setup_flag: str | None):
    """The script's project plan as the launcher --on names can follow it: a setup step
    and requirements are for a machine gpubench prepares (one over SSH, a rented one, a
    cluster); this machine has what it has, and a Slurm job prepares itself."""
    from dataclasses import replace

    from gpubench.cli.render import err

    plan = ref.project
    if plan is None or not plan.setup:
        return ref
    if target.scheme is not None:
        raise UsageError(f"--setup has no meaning on {target.scheme.title or target.scheme.name}: its jobs start on nodes "
                         "gpubench does not prepare; put the step in your job or run it on the "
                         "cluster's filesystem first")
    if target.on is None and setup_flag:
        raise UsageError("--setup runs once on a machine gpubench prepares (--on); on this machine, "
                         f"run it yourself first: {plan.setup}")
    if target.on is None:
        err(f"note: [tool.gpubench] setup is run on remote machines only; not run here: {plan.setup}")
        return replace(ref, project=replace(plan, setup=None))
    return ref


def _report(output, store, plan, result, workload: str) -> None:
    """What the sweep appended, the workload's table, and exit 1 if any run failed."""
    if result.records:
        output.say(f"\n{len(result.records)} record(s) of run {plan.run_id} appended to "
                   f"{store.directory}/{plan.run_id}.jsonl; each run's output: gpubench logs {plan.run_id}\n")
    else:
        output.say("\nevery count of the sweep was already recorded; nothing ran (--force runs them again)\n")

    from gpubench.report import preload

    preload.finished()  # its import of pandas, not a second one beside it
    from gpubench.report.render import render_report  # pandas: only once there is a report

    loaded = store.load()
    output.say(render_report(loaded.records, "table", workload=workload))
    say_load_warnings(loaded.warnings)
    say_traces(output.say, store.directory, result.records, [plan.run_id])  # run --trace's
    if output.as_json:  # the report again, for programs (its notes, once more, on stderr)
        output.emit(run_document([plan.run_id], result.records, store, loaded.records, [workload],
                                 all_ok=result.all_ok))
    if not result.all_ok:
        raise typer.Exit(1)


@contextlib.contextmanager
def _asking(progress, output) -> Iterator[None]:
    """A question in the middle of the sweep: the live display paused, the prompt off a
    JSON stdout."""
    with progress.paused(), output.prompts():
        yield


def _preflight(target, remote_python: str, yes: bool, out) -> None:
    """Check the --on machine; one that fails is used only if the user says so."""
    from gpubench.cli.confirm import confirm_or_stop
    from gpubench.cli.render import err
    from gpubench.lifecycle.preflight import check_named

    if not target.rented:
        raise UsageError("--preflight checks a machine gpubench rented: give its name with --on "
                         "(see 'gpubench ls')")
    report = check_named(target.on, remote_python)
    if report.passed:
        out(f"{target.on}: {report.summary()}")
        return
    err(f"warning: {target.on}: {report.failure_line()}")
    confirm_or_stop(f"{target.on} failed the preflight check; run on it anyway?",
                    f"not run: {target.on} failed the preflight check (pass --yes to run on it anyway)",
                    said_on_no="not run", yes=yes)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
