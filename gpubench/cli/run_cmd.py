"""`gpubench run`: sweep a workload over GPU counts, here or on a machine over
SSH (--on), record, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from gpubench.cli.render import err, out

if TYPE_CHECKING:
    from gpubench.launch.base import SweepPoint


def run(
    workload: str = typer.Argument(..., help="A suite workload (see 'gpubench workloads') or a .py script."),
    workload_args: Optional[List[str]] = typer.Argument(None, metavar="[-- WORKLOAD_ARGS]",
                                                        help="Arguments after -- go to the workload."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU counts to sweep, e.g. 1,2,4 "
                                       "[default: 1 and powers of two up to the GPUs present]."),
    on: Optional[str] = typer.Option(None, "--on", help="Run on an instance from the ledger (its name) "
                                     "or on your own machine: user@host[:port] with --key."),
    key: Optional[Path] = typer.Option(None, "--key", help="SSH private key for --on user@host "
                                       "[default: gpubench's own key]."),
    price: Optional[float] = typer.Option(None, "--price", help="$/h of the --on machine, for the cost "
                                          "columns [default: the ledger's price; unknown for user@host]."),
    remote_python: str = typer.Option("python3", "--remote-python",
                                      help="The Python with torch on the --on machine."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Your script's project directory: "
                                           "sent whole to an --on machine (less what its .gitignore "
                                           "names) and the directory runs start in."),
    remote_dir: str = typer.Option("gpubench", "--remote-dir",
                                   help="Working directory on the --on machine (relative to its home)."),
    connect_wait: float = typer.Option(30.0, "--connect-wait", min=1,
                                       help="Seconds to keep trying an --on machine that does not answer."),
    results: Optional[Path] = typer.Option(None, "--results", help="Results directory [default: ./results]."),
    force: bool = typer.Option(False, "--force", help="Run counts that already have an ok record again."),
    timeout: float = typer.Option(3600.0, "--timeout", min=1, help="Seconds allowed for each run."),
) -> None:
    """Run WORKLOAD at each GPU count with torchrun and print the speedup/cost table."""
    from gpubench import suite
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.results import ResultsStore

    ref = suite.resolve(workload)
    if workdir is not None:
        ref = suite.with_workdir(ref, workdir)
    points = _points(gpus)
    store = ResultsStore.for_writing(results)
    args = list(workload_args or [])
    options = LaunchOptions(key=key, price=price, remote_python=remote_python, remote_dir=remote_dir,
                            connect_wait=connect_wait, echo=out)
    with open_launcher(on, options) as launcher:
        _sweep_and_report(launcher, ref, points, args, store, timeout, force)


def _points(gpus: str | None) -> list[SweepPoint] | None:
    """--gpus 1,2,4: those counts on one node; None: the machine's default points."""
    from gpubench.sweep import on_one_node, parse_counts

    return on_one_node(parse_counts(gpus)) if gpus is not None else None


def _sweep_and_report(launcher, ref, points, args, store, timeout, force) -> None:
    from gpubench.results import new_run_id
    from gpubench.sweep import SweepPlan, default_points, sweep

    machine = launcher.machine()
    plan = SweepPlan(ref, points or default_points(machine), args, new_run_id(), timeout, force=force)
    result = sweep(launcher, plan, store, out)
    if not result.records and not result.skipped:
        err("error: no GPU count of the sweep fits this machine")
        raise typer.Exit(1)
    if result.records:
        out(f"\n{len(result.records)} record(s) of run {plan.run_id} appended to "
            f"{store.directory}/{plan.run_id}.jsonl\n")
    else:
        out("\nevery count of the sweep was already recorded; nothing ran (--force runs them again)\n")

    from gpubench.report.render import render_report

    out(render_report(store.load().records, "table", workload=ref.name))
    if any(r["status"] != "ok" for r in result.records):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
