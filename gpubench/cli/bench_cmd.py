"""`gpubench bench`: rent a machine, sweep workloads on it, report, give it back."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpubench.cli.confirm import confirm_or_stop
from gpubench.cli.options import (AttemptsOpt, BootTimeoutOpt, BudgetOpt, DiskOpt, ForceOpt, GpuTypeOpt, ImageOpt,
                                  MachineGpusOpt, MaxHoursOpt, MaxPriceOpt, NameOpt, NoPreflightOpt, ProviderArg,
                                  QuietOpt, RemotePythonOpt, RepeatOpt, ResultsOpt, RunTimeoutOpt, SshTimeoutOpt,
                                  WorkdirOpt, WorkloadArgsArg, YesOpt)
from gpubench.cli.render import err, out


def bench(
    provider: ProviderArg,
    gpus: MachineGpusOpt,
    workload: Annotated[str, typer.Option(
        "--workload", help="Workloads to sweep, e.g. mnist-ddp,gpt-ddp.")],
    workload_args: WorkloadArgsArg = None,
    counts: Annotated[Optional[str], typer.Option(
        "--counts", help="GPU counts to sweep [default: 1 and powers of two up to --gpus].")] = None,
    gpu_type: GpuTypeOpt = None,
    max_price: MaxPriceOpt = None,
    disk: DiskOpt = 100,
    image: ImageOpt = None,
    name: NameOpt = None,
    keep: Annotated[bool, typer.Option("--keep", help="Leave the machine running afterwards.")] = False,
    yes: YesOpt = False,
    force: ForceOpt = False,
    remote_python: RemotePythonOpt = "python3",
    workdir: WorkdirOpt = None,
    results: ResultsOpt = None,
    timeout: RunTimeoutOpt = 3600.0,
    attempts: AttemptsOpt = 3,
    boot_timeout: BootTimeoutOpt = 900.0,
    ssh_timeout: SshTimeoutOpt = 300.0,
    max_hours: MaxHoursOpt = None,
    budget: BudgetOpt = None,
    no_preflight: NoPreflightOpt = False,
    repeat: RepeatOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Rent a machine with GPUS GPUs, sweep each workload, print the report, terminate it."""
    from gpubench import suite
    from gpubench.bench import BenchRequest, bench as run_bench, plan_bench
    from gpubench.cli.progress import Progress
    from gpubench.results import ResultsStore
    from gpubench.sweep import parse_counts

    refs = suite.resolve_list(workload, workdir)
    for ref in refs:  # before anything is rented
        suite.check_args(ref, list(workload_args or []))
    store = ResultsStore.for_writing(results)
    req = BenchRequest(provider, gpus, refs, list(workload_args or []),
                       parse_counts(counts) if counts else None, gpu_type, max_price, disk, image,
                       name, keep, force, timeout, remote_python, attempts=attempts,
                       boot_timeout=boot_timeout, ssh_timeout=ssh_timeout, max_hours=max_hours,
                       budget=budget, preflight=not no_preflight, repeat=repeat)
    plan = plan_bench(req)      # refuses a plan over the budget before anything is rented
    confirm_or_stop(f"Rent a {gpus}-GPU machine on {provider} for this bench ({plan.describe()}; "
                    "terminated at the end unless --keep)?",
                    "nothing rented: pass --yes to rent without a terminal to confirm on", yes=yes)
    with Progress(quiet=quiet) as say:
        result = run_bench(req, store, say, plan=plan)

    from gpubench.report.render import render_report

    records = store.load().records
    for ref in refs:
        out("")
        out(render_report(records, "table", workload=ref.name))
    if result.budget_stop:
        err(f"error: {result.budget_stop}")
    if not result.all_ok or result.budget_stop:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
