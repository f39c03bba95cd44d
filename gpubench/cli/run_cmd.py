"""`gpubench run`: sweep a workload over GPU counts, record, report."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from gpubench.cli.render import err, out


def run(
    workload: str = typer.Argument(..., help="A suite workload (see 'gpubench workloads') or a .py script."),
    workload_args: Optional[List[str]] = typer.Argument(None, metavar="[-- WORKLOAD_ARGS]",
                                                        help="Arguments after -- go to the workload."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU counts to sweep, e.g. 1,2,4 "
                                       "[default: 1 and powers of two up to the GPUs present]."),
    results: Optional[Path] = typer.Option(None, "--results", help="Results directory [default: ./results]."),
    timeout: float = typer.Option(3600.0, "--timeout", min=1, help="Seconds allowed for each run."),
) -> None:
    """Run WORKLOAD at each GPU count with torchrun and print the speedup/cost table."""
    from gpubench import suite
    from gpubench.launch.local import LocalLauncher, torch_python
    from gpubench.results import ResultsStore, new_run_id
    from gpubench.sweep import SweepPlan, default_counts, parse_counts, run_sweep

    ref = suite.resolve(workload)
    counts = parse_counts(gpus) if gpus is not None else None
    store = ResultsStore.for_writing(results)
    torch_python()
    launcher = LocalLauncher()
    machine = launcher.machine()
    plan = SweepPlan(ref, counts or default_counts(machine), list(workload_args or []),
                     new_run_id(), timeout)
    records = run_sweep(launcher, plan, store, out)
    if not records:
        err("error: no GPU count of the sweep fits this machine")
        raise typer.Exit(1)
    out(f"\n{len(records)} record(s) of run {plan.run_id} appended to {store.directory}/{plan.run_id}.jsonl\n")

    from gpubench.cli.report_cmd import render_report

    out(render_report(store.load().records, "table", workload=ref.name))
    if any(r["status"] != "ok" for r in records):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
