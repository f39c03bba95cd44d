"""`gpubench run`: sweep a workload over GPU counts, here or on a machine over
SSH (--on), or over nodes on a Slurm cluster (--on slurm) or a cluster of rented
machines (--on CLUSTER), record, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from gpubench.cli.options import (DocumentFormatOpt, ForceOpt, GpuCountsOpt, PreflightOpt, ProceedOpt,
                                  QuietOpt, RemotePythonOpt, RepeatOpt, ResultsOpt, RunTimeoutOpt, WorkdirOpt,
                                  WorkloadArgsArg)
from gpubench.cli.output import output_for, run_document, say_load_warnings
from gpubench.cli.completion import workload_names
from gpubench.cli.settings import flags_or_defaults
from gpubench.errors import UsageError



def run(
    ctx: typer.Context,
    workload: Annotated[str, typer.Argument(
        help="A suite workload (see 'gpubench workloads') or a .py script.",
        autocompletion=workload_names)],
    workload_args: WorkloadArgsArg = None,
    gpus: GpuCountsOpt = None,
    on: Annotated[Optional[str], typer.Option(
        "--on", help="Run on an instance from the ledger (its name), on a cluster from the "
                     "ledger (its name: torchrun across its nodes; NAME:I for one member), on "
                     "your own machine: user@host[:port] with --key, or on a Slurm cluster: "
                     "slurm (sbatch on this machine) or slurm:[user@]LOGIN[:port] (its login "
                     "node over SSH).")] = None,
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
    nodes: Annotated[Optional[str], typer.Option(
        "--nodes", help="Node counts to sweep, e.g. 1,2,4 [default on Slurm: "
        "1 and 2; on a cluster: 1, powers of two and all its nodes]; with --gpus on a "
        "cluster, the GPUs per node.")] = None,
    gpus_per_node: Annotated[Optional[str], typer.Option(
        "--gpus-per-node", help="GPUs (processes) per node to sweep, e.g. 4 "
        "or 1,4 [default on Slurm: all of a node's].")] = None,
    partition: Annotated[Optional[str], typer.Option(
        "--partition", help="Slurm partition [default: the cluster's].")] = None,
    account: Annotated[Optional[str], typer.Option(
        "--account", help="Slurm account the jobs are charged to.")] = None,
    reservation: Annotated[Optional[str], typer.Option(
        "--reservation", help="Slurm reservation.")] = None,
    qos: Annotated[Optional[str], typer.Option(
        "--qos", help="Slurm quality of service.")] = None,
    time_limit: Annotated[Optional[str], typer.Option(
        "--time", help="Each job's time limit, HH:MM:SS "
        "[default: the partition's].")] = None,
    constraint: Annotated[Optional[str], typer.Option(
        "--constraint", help="Slurm node features, e.g. a100.")] = None,
    sbatch_args: Annotated[Optional[List[str]], typer.Option(
        "--sbatch-arg", help="One more #SBATCH option, e.g. "
        "--sbatch-arg=--exclusive (repeatable).")] = None,
    gpu_flag: Annotated[str, typer.Option(
        "--gpu-flag", help="How jobs ask for GPUs: gres (--gres=gpu:N) or "
        "gpus-per-node (--gpus-per-node=N), whichever the cluster takes.")] = "gres",
    cpus_per_gpu: Annotated[Optional[int], typer.Option(
        "--cpus-per-gpu", help="CPU cores per GPU (sets --cpus-per-task) "
        "[default: the cluster's].")] = None,
    mem: Annotated[Optional[str], typer.Option(
        "--mem", help="Memory per node, as sbatch takes it: 64G, 0 for all "
        "[default: the cluster's].")] = None,
    launch: Annotated[str, typer.Option(
        "--launch", help="torchrun (one task per node running torchrun) or "
        "srun (one task per GPU, ranks from Slurm).")] = "torchrun",
    price_per_gpu_hour: Annotated[Optional[float], typer.Option(
        "--price-per-gpu-hour", help="$ per GPU-hour, to show cost in money "
        "[default: cost in GPU-hours and core-hours only].")] = None,
    pending_timeout: Annotated[float, typer.Option(
        "--pending-timeout", min=1, help="Seconds a job may wait in the "
        "queue before it is cancelled.")] = 3600.0,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the sbatch scripts; submit nothing.")] = False,
    preflight: PreflightOpt = False,
    yes: ProceedOpt = False,
    repeat: RepeatOpt = None,
    fmt: DocumentFormatOpt = "table",
    quiet: QuietOpt = False,
) -> None:
    """Run WORKLOAD at each GPU count (on Slurm: at each node count, one sbatch job
    each) and print the speedup/cost table."""
    from gpubench import suite
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.cli.progress import progress_for
    from gpubench.store.results import ResultsStore
    from gpubench.sweep.run import grid, on_one_node, parse_counts, sweep_new_run

    output = output_for(fmt)
    out = output.say
    results, remote_python = flags_or_defaults(ctx, results=results, remote_python=remote_python)
    on_slurm = on is not None and (on == "slurm" or on.startswith("slurm:"))
    slurm_flags = {"--partition": partition, "--account": account, "--reservation": reservation,
                   "--qos": qos, "--time": time_limit, "--constraint": constraint,
                   "--sbatch-arg": sbatch_args, "--cpus-per-gpu": cpus_per_gpu, "--mem": mem,
                   "--price-per-gpu-hour": price_per_gpu_hour, "--dry-run": dry_run or None,
                   "--launch": None if launch == "torchrun" else launch,
                   "--gpu-flag": None if gpu_flag == "gres" else gpu_flag,
                   "--pending-timeout": None if pending_timeout == 3600.0 else pending_timeout}
    given = next((flag for flag, value in slurm_flags.items() if value is not None), None)
    if given and not on_slurm:
        raise UsageError(f"{given} is for Slurm: add --on slurm or --on slurm:[user@]LOGIN")
    cluster = None if on_slurm else _cluster(on)
    on_cluster = cluster is not None
    # on a cluster --gpus may count the GPUs of each node; elsewhere it is one machine's
    if gpus is not None and (nodes or gpus_per_node) and not (on_cluster and not gpus_per_node):
        raise UsageError("--gpus is the counts on one machine; with --nodes give --gpus-per-node")
    if on_slurm and price is not None:
        raise UsageError("--price is a machine's $/h; on Slurm give --price-per-gpu-hour")
    ref = suite.resolve(workload, workdir)
    suite.check_args(ref, list(workload_args or []))  # a typo costs one line, not a run
    points = on_one_node(parse_counts(gpus)) if gpus is not None and not on_cluster else None
    node_counts = _counts("--nodes", nodes)
    per_node = _counts("--gpus-per-node", gpus_per_node)
    if on_cluster and gpus is not None:
        per_node = parse_counts(gpus)  # on a cluster, --gpus counts the GPUs of each node
    if on_cluster and node_counts and max(node_counts) > cluster.size:  # before connecting
        raise UsageError(f"--nodes {max(node_counts)}: cluster {on} has {cluster.size} "
                         f"node{'s' if cluster.size != 1 else ''}")
    store = None if dry_run else ResultsStore.for_writing(results)
    scheme_options = None
    if on_slurm:
        from gpubench.launch.slurm import SlurmOptions

        scheme_options = SlurmOptions(
            partition=partition, account=account, reservation=reservation, qos=qos, time=time_limit,
            constraint=constraint, sbatch_args=tuple(sbatch_args or ()), launch=launch,
            gpu_flag=gpu_flag, cpus_per_gpu=cpus_per_gpu, mem=mem,
            price_per_gpu_hour=price_per_gpu_hour, pending_timeout=pending_timeout,
            keep_dir=store.directory / "slurm" if store else None)
    if preflight:
        with output.prompts():
            _preflight(on, remote_python, yes, out)
    with progress_for(output.as_json, quiet) as say, open_launcher(on, LaunchOptions(
            key=key, price=price, remote_python=remote_python, remote_dir=remote_dir,
            connect_wait=connect_wait, echo=say, scheme_options=scheme_options)) as launcher:
        if on_slurm:
            from gpubench.launch.slurm.plan import dry_run_text, node_points

            points = points or node_points(launcher.machine(), node_counts, per_node)
            if dry_run:
                text = dry_run_text(launcher, ref, points, list(workload_args or []))
                out(text)
                output.emit({"dry_run": True, "sbatch": text})
                return
        elif on_cluster:
            from gpubench.launch.cluster import node_points as cluster_points

            points = cluster_points(launcher.machine(), on, node_counts, per_node)
        elif node_counts or per_node:
            points = grid(node_counts or [1], per_node or [1])
        plan, result = sweep_new_run(launcher, ref, points, list(workload_args or []), store, say,
                                     timeout, force, repeat)
    if result.records:
        out(f"\n{len(result.records)} record(s) of run {plan.run_id} appended to "
            f"{store.directory}/{plan.run_id}.jsonl; each run's output: gpubench logs {plan.run_id}\n")
    else:
        out("\nevery count of the sweep was already recorded; nothing ran (--force runs them again)\n")

    from gpubench.report.render import render_report  # pandas: only once there is a report

    loaded = store.load()
    out(render_report(loaded.records, "table", workload=ref.name))
    say_load_warnings(loaded.warnings)
    if output.as_json:  # the report again, for programs (its notes, once more, on stderr)
        output.emit(run_document([plan.run_id], result.records, store, loaded.records, [ref.name],
                                 all_ok=result.all_ok))
    if not result.all_ok:
        raise typer.Exit(1)


def _preflight(on: str | None, remote_python: str, yes: bool, out) -> None:
    """Check the --on machine; one that fails is used only if the user says so."""
    from gpubench.cli.confirm import confirm_or_stop
    from gpubench.cli.render import err
    from gpubench.lifecycle.preflight import check_named
    from gpubench.remote.target import looks_like_spec

    if on is None or on == "slurm" or on.startswith("slurm:") or looks_like_spec(on):
        raise UsageError("--preflight checks a machine gpubench rented: give its name with --on "
                         "(see 'gpubench ls')")
    report = check_named(on, remote_python)
    if report.passed:
        out(f"{on}: {report.summary()}")
        return
    err(f"warning: {on}: {report.failure_line()}")
    confirm_or_stop(f"{on} failed the preflight check; run on it anyway?",
                    f"not run: {on} failed the preflight check (pass --yes to run on it anyway)",
                    said_on_no="not run", yes=yes)


def _cluster(on: str | None):
    """The live cluster an --on value names (NAME, not NAME:I), or None."""
    from gpubench.remote.cluster import find_cluster
    from gpubench.remote.target import looks_like_spec

    return None if on is None or looks_like_spec(on) else find_cluster(on)


def _counts(flag: str, text: str | None) -> list[int] | None:
    from gpubench.sweep.run import parse_counts

    if text is None:
        return None
    try:
        return parse_counts(text)
    except UsageError as e:  # parse_counts speaks of --gpus
        raise UsageError(str(e).replace("--gpus", flag, 1).replace("GPU count", "count")) from None


def register(app: typer.Typer) -> None:
    app.command("run")(run)
