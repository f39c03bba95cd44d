"""`gpubench bench`: rent a machine, sweep workloads on it, report, give it back."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from gpubench.cli.across_cmd import bench_across_cli, check_flags, is_across
from gpubench.cli.confirm import ask, confirm_or_stop
from gpubench.cli.options import (AnyGpuOpt, AttemptsOpt, BootTimeoutOpt, BudgetOpt, DiskOpt,
                                  DocumentFormatOpt, ForceOpt, GpuTypeOpt, ImageOpt, InstallProjectOpt,
                                  MachineGpusOpt, MaxHoursOpt, MaxPriceOpt, MaxStepsOpt, NameOpt,
                                  NoPreflightOpt, OutputsOpt, ProviderArg, PublicNetworkOpt, QuietOpt,
                                  RemotePythonOpt, RepeatOpt, ResultsOpt, RunTimeoutOpt, SetupOpt,
                                  SshTimeoutOpt, TraceOpt, TraceStepsOpt, VolumeOpt, WorkdirOpt,
                                  WorkloadArgsArg, YesOpt)
from gpubench.cli.output import output_for, run_document, say_load_warnings
from gpubench.cli.render import err
from gpubench.cli.completion import workload_arg_names, workload_list
from gpubench.cli.settings import flags_or_defaults
from gpubench.cli.trace_table import say_traces


WorkloadsOpt = Annotated[str, typer.Option(
    "--workload", help="Workloads to sweep, e.g. mnist-ddp,gpt-ddp.", autocompletion=workload_list)]
PerWorkloadArgsOpt = Annotated[Optional[List[str]], typer.Option(
    "--args", metavar="NAME=ARGS", autocompletion=workload_arg_names,
    help="Arguments for one workload only, as NAME=\"ARGS\" (repeatable), e.g. --args "
         "gpt-ddp=\"--n-layer 2\"; those after -- go to every workload.")]
CountsOpt = Annotated[Optional[str], typer.Option(
    "--counts", help="GPU counts to sweep [default: 1 and powers of two up to --gpus].")]
KeepOpt = Annotated[bool, typer.Option("--keep", help="Leave the machine running afterwards.")]
HostsOpt = Annotated[int, typer.Option(
    "--hosts", metavar="K", help="Run the same sweep on K machines of one GPU type, on distinct "
                                 "hosts; the report shows the spread across them.")]
ClusterNodesOpt = Annotated[Optional[str], typer.Option(
    "--nodes", help="Rent a cluster of the largest count's machines and sweep these node counts on "
                    "it, e.g. 1,2 (torchrun c10d across the machines); --counts then gives the GPUs "
                    "used on each node.")]
ParallelOpt = Annotated[bool, typer.Option(
    "--parallel", help="With --hosts: sweep the machines at once, not one after the other.")]
CandidatesOpt = Annotated[Optional[int], typer.Option(
    "--candidates", metavar="K", help="Bench the K offers most worth measuring, at once, across the "
    "providers PROVIDER names (all, or a comma list such as lambda,vast): the predicted Pareto front "
    "first, distinct GPU types before a second offer of one; one question, one --budget and one "
    "report for all [default: 3 with all or several providers].")]


def bench(ctx: typer.Context, provider: ProviderArg, gpus: MachineGpusOpt, workload: WorkloadsOpt,
          workload_args: WorkloadArgsArg = None, per_workload: PerWorkloadArgsOpt = None,
          counts: CountsOpt = None, gpu_type: GpuTypeOpt = None, max_price: MaxPriceOpt = None,
          any_gpu: AnyGpuOpt = False, disk: DiskOpt = 100, image: ImageOpt = None, name: NameOpt = None,
          keep: KeepOpt = False, yes: YesOpt = False, force: ForceOpt = False,
          remote_python: RemotePythonOpt = "python3", workdir: WorkdirOpt = None,
          results: ResultsOpt = None, timeout: RunTimeoutOpt = 3600.0, attempts: AttemptsOpt = 3,
          boot_timeout: BootTimeoutOpt = 900.0, ssh_timeout: SshTimeoutOpt = 300.0,
          max_hours: MaxHoursOpt = None, budget: BudgetOpt = None, no_preflight: NoPreflightOpt = False,
          repeat: RepeatOpt = None, max_steps: MaxStepsOpt = None, outputs: OutputsOpt = None,
          setup: SetupOpt = None, install_project: InstallProjectOpt = False, volume: VolumeOpt = None,
          hosts: HostsOpt = 1,
          nodes: ClusterNodesOpt = None, parallel: ParallelOpt = False, candidates: CandidatesOpt = None,
          fmt: DocumentFormatOpt = "table", public_network: PublicNetworkOpt = False,
          trace: TraceOpt = False, trace_steps: TraceStepsOpt = None,
          quiet: QuietOpt = False) -> None:
    """Rent a machine with GPUS GPUs, sweep each workload, print the report, terminate it.
    PROVIDER all (or lambda,vast) with --candidates K: the K offers most worth measuring
    there, rented and swept at once, one report across them."""
    from gpubench import suite
    from gpubench.bench.cluster import bench_cluster
    from gpubench.bench.machine import bench as run_bench
    from gpubench.bench.plan import plan_bench, plan_cluster_bench
    from gpubench.bench.request import BenchRequest
    from gpubench.cli.progress import progress_for
    from gpubench.launch.points import parse_counts
    from gpubench.store.results import ResultsStore

    output = output_for(fmt)
    gpu_type, max_price, image, disk, remote_python, results = flags_or_defaults(
        ctx, gpu_type=gpu_type, max_price=max_price, image=image, disk=disk, remote_python=remote_python,
        results=results)
    refs = suite.with_max_steps_for_scripts(suite.resolve_list(workload, workdir), max_steps)
    refs = suite.with_project_for_scripts(refs, outputs, setup, install_project)
    refs = [suite.with_trace(ref, suite.trace_steps(trace, trace_steps)) for ref in refs]
    own_args = suite.parse_per_workload_args(list(per_workload or []), refs)
    for ref in refs:  # before anything is rented
        suite.check_args(ref, suite.args_for(ref, list(workload_args or []), own_args))
    store = ResultsStore.for_writing(results)
    req = BenchRequest(provider, gpus, refs, list(workload_args or []),
                       parse_counts(counts, "--counts") if counts else None, gpu_type, max_price, disk,
                       image, name, keep, force, timeout, remote_python, attempts=attempts,
                       boot_timeout=boot_timeout, ssh_timeout=ssh_timeout, max_hours=max_hours,
                       budget=budget, preflight=not no_preflight, repeat=repeat, hosts=hosts,
                       parallel=parallel, per_workload_args=own_args, any_gpu=any_gpu,
                       results=store.directory, public_network=public_network)
    if volume is not None:   # only offers where it is; refused here for another provider's volume
        from gpubench.lifecycle.volumes import pin_for

        if is_across(provider, candidates):
            from gpubench.errors import UsageError

            raise UsageError("--volume pins the bench to its provider's place: name that provider, not "
                             f"'{provider}' with --candidates")
        most = max(parse_counts(nodes, "--nodes")) if nodes else 1
        req.pin = pin_for(volume, provider, gpu_type, gpus, nodes=most)
    if is_across(provider, candidates):
        check_flags(hosts, nodes, parallel, keep)
        return bench_across_cli(output, req, provider, candidates, yes, quiet, store, refs)
    if nodes is not None:   # refuses --hosts > 1, and a plan over the budget, before anything is rented
        plan = plan_cluster_bench(req, parse_counts(nodes, "--nodes"))
        machines = f"{plan.size} {gpus}-GPU machines in one cluster"
    else:
        plan = plan_bench(req)
        machines = f"a {gpus}-GPU machine" if hosts == 1 else f"{hosts} {gpus}-GPU machines"
    with output.prompts():
        confirm_or_stop(f"Rent {machines} on {provider} for this bench ({plan.describe()}; "
                        "terminated at the end unless --keep)?",
                        "nothing rented: pass --yes to rent without a terminal to confirm on", yes=yes)
    from gpubench.report import preload

    # the report's pandas is imported while the runs go on
    with progress_for(output.as_json, quiet, on_run_start=preload.in_background) as say:
        req.ask = None if yes else _asking(output, say)   # mid-bench questions (a slow link)
        result = (bench_cluster(req, plan, store, say) if nodes is not None
                  else run_bench(req, store, say, plan=plan, ask=None if yes else _asking(output, say)))
    _report(output, store, refs, result)


def _report(output, store, refs, result) -> None:
    """Each workload's table, the spread across hosts, and exit 1 if a run failed or
    the budget stopped the bench."""
    from gpubench.report import preload

    preload.finished()  # its import of pandas, not a second one beside it
    from gpubench.report.hosts import host_sections
    from gpubench.report.render import render_report, render_section

    loaded = store.load()
    for ref in refs:
        output.say("")
        output.say(render_report(loaded.records, "table", workload=ref.name))
    ours = [r for r in loaded.records if r.get("run_id") in set(result.run_ids)]
    for section in host_sections(ours):
        output.say("")
        output.say(render_section(section, "table"))
    say_load_warnings(loaded.warnings)
    say_traces(output.say, store.directory, result.records, list(result.run_ids))  # --trace's
    if output.as_json:  # the report again, for programs (its notes, once more, on stderr)
        output.emit(run_document(result.run_ids, result.records, store, loaded.records, [r.name for r in refs],
                                 all_ok=result.all_ok, budget_stop=result.budget_stop, instance=result.name,
                                 instance_id=result.instance_id, cost=result.cost, billed=result.billed,
                                 terminated=result.terminated, kept=result.kept))
    if result.budget_stop:
        err(f"error: {result.budget_stop}")
    if not result.all_ok or result.budget_stop:
        raise typer.Exit(1)


def _asking(output, progress):
    """A question about a machine other than the one confirmed, asked as the first was,
    with the live display stopped meanwhile so it does not draw over the question."""
    def asked(question: str) -> bool:
        with progress.paused(), output.prompts():
            return ask(question)
    return asked


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
