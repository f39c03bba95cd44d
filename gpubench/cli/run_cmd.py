"""`gpubench run`: sweep a workload over GPU counts, here or on a machine over
SSH (--on), record, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from gpubench.cli.options import (ForceOpt, GpuCountsOpt, RemotePythonOpt, RepeatOpt, ResultsOpt,
                                  RunTimeoutOpt, WorkdirOpt, WorkloadArgsArg)
from gpubench.cli.render import out


def run(
    workload: Annotated[str, typer.Argument(
        help="A suite workload (see 'gpubench workloads') or a .py script.")],
    workload_args: WorkloadArgsArg = None,
    gpus: GpuCountsOpt = None,
    on: Annotated[Optional[str], typer.Option(
        "--on", help="Run on an instance from the ledger (its name) or on your own machine: "
                     "user@host[:port] with --key.")] = None,
    key: Annotated[Optional[Path], typer.Option(
        "--key", help="SSH private key for --on user@host [default: gpubench's own key].")] = None,
    price: Annotated[Optional[float], typer.Option(
        "--price", help="$/h of the --on machine, for the cost columns "
                        "[default: the ledger's price; unknown for user@host].")] = None,
    remote_python: RemotePythonOpt = "python3",
    workdir: WorkdirOpt = None,
    remote_dir: Annotated[str, typer.Option(
        "--remote-dir", help="Working directory on the --on machine (relative to its home).")] = "gpubench",
    connect_wait: Annotated[float, typer.Option(
        "--connect-wait", min=1, help="Seconds to keep trying an --on machine that does not answer.")] = 30.0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    timeout: RunTimeoutOpt = 3600.0,
    repeat: RepeatOpt = None,
) -> None:
    """Run WORKLOAD at each GPU count with torchrun and print the speedup/cost table."""
    from gpubench import suite
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.results import ResultsStore
    from gpubench.sweep import on_one_node, parse_counts, sweep_new_run

    ref = suite.resolve(workload, workdir)
    suite.check_args(ref, list(workload_args or []))  # a typo costs one line, not a run
    points = on_one_node(parse_counts(gpus)) if gpus is not None else None
    store = ResultsStore.for_writing(results)
    options = LaunchOptions(key=key, price=price, remote_python=remote_python, remote_dir=remote_dir,
                            connect_wait=connect_wait, echo=out)
    with open_launcher(on, options) as launcher:
        plan, result = sweep_new_run(launcher, ref, points, list(workload_args or []), store, out,
                                     timeout, force, repeat)
    if result.records:
        out(f"\n{len(result.records)} record(s) of run {plan.run_id} appended to "
            f"{store.directory}/{plan.run_id}.jsonl; each run's output: gpubench logs {plan.run_id}\n")
    else:
        out("\nevery count of the sweep was already recorded; nothing ran (--force runs them again)\n")

    from gpubench.report.render import render_report  # pandas: only once there is a report

    out(render_report(store.load().records, "table", workload=ref.name))
    if not result.all_ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
