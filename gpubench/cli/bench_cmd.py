"""`gpubench bench`: rent a machine, sweep workloads on it, report, give it back."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from gpubench.cli.confirm import confirm_or_stop
from gpubench.cli.render import out


def bench(
    provider: str = typer.Argument(..., help="lambda, vast or runpod."),
    workload_args: Optional[List[str]] = typer.Argument(None, metavar="[-- WORKLOAD_ARGS]",
                                                        help="Arguments after -- go to every workload."),
    gpus: int = typer.Option(..., "--gpus", help="GPUs on the machine to rent."),
    workload: str = typer.Option(..., "--workload", help="Workloads to sweep, e.g. mnist-ddp,gpt-ddp."),
    counts: Optional[str] = typer.Option(None, "--counts", help="GPU counts to sweep "
                                         "[default: 1 and powers of two up to --gpus]."),
    gpu_type: Optional[str] = typer.Option(None, "--gpu-type", help="e.g. H100, A100, 'RTX 4090'."),
    max_price: Optional[float] = typer.Option(None, "--max-price", help="Highest $/h for the machine."),
    disk: int = typer.Option(100, "--disk", help="Disk in GB."),
    image: Optional[str] = typer.Option(None, "--image", help="Container image (Vast.ai, RunPod)."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name [default: PROVIDER-xxxxxx]."),
    keep: bool = typer.Option(False, "--keep", help="Leave the machine running afterwards."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before spending money."),
    force: bool = typer.Option(False, "--force", help="Run counts that already have an ok record again."),
    remote_python: str = typer.Option("python3", "--remote-python", help="The Python with torch there."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="The project directory of your own "
                                           "script(s) in --workload: sent whole, and runs start in it."),
    results: Optional[Path] = typer.Option(None, "--results", help="Results directory [default: ./results]."),
    timeout: float = typer.Option(3600.0, "--timeout", min=1, help="Seconds allowed for each run."),
    attempts: int = typer.Option(3, "--attempts", help="Launches to try before giving up."),
    boot_timeout: float = typer.Option(900.0, "--boot-timeout", help="Seconds to reach running."),
    ssh_timeout: float = typer.Option(300.0, "--ssh-timeout", help="Seconds for SSH to answer."),
) -> None:
    """Rent a machine with GPUS GPUs, sweep each workload, print the report, terminate it."""
    from gpubench import suite
    from gpubench.bench import BenchRequest, bench as run_bench
    from gpubench.errors import UsageError
    from gpubench.results import ResultsStore
    from gpubench.sweep import parse_counts

    refs = [suite.resolve(w.strip()) for w in workload.split(",") if w.strip()]
    if not refs:
        raise UsageError("--workload: name at least one workload (see 'gpubench workloads')")
    if workdir is not None:
        if all(ref.in_suite for ref in refs):
            raise UsageError("--workdir is for your own scripts; --workload names only suite workloads")
        refs = [ref if ref.in_suite else suite.with_workdir(ref, workdir) for ref in refs]
    store = ResultsStore.for_writing(results)
    confirm_or_stop(f"Rent a {gpus}-GPU machine on {provider} for this bench "
                    "(terminated at the end unless --keep)?",
                    "nothing rented: pass --yes to rent without a terminal to confirm on", yes=yes)
    req = BenchRequest(provider, gpus, refs, list(workload_args or []),
                       parse_counts(counts) if counts else None, gpu_type, max_price, disk, image,
                       name, keep, force, timeout, remote_python, attempts=attempts,
                       boot_timeout=boot_timeout, ssh_timeout=ssh_timeout)
    result = run_bench(req, store, out)

    from gpubench.report.render import render_report

    records = store.load().records
    for ref in refs:
        out("")
        out(render_report(records, "table", workload=ref.name))
    if any(r["status"] != "ok" for r in result.records):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
