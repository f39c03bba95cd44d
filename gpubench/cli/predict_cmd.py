"""`gpubench predict`: the prediction for a GPU type, asking no provider: a user's own
cluster, or a card no one offers today."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from gpubench.cli.advise_cmd import WorkloadArg
from gpubench.cli.options import DocumentFormatOpt, OffersGpuOpt, ResultsOpt, TotalGpusOpt, WorkloadArgsArg
from gpubench.cli.render import check_format, err, out
from gpubench.errors import UsageError

NodesOpt = Annotated[int, typer.Option("--nodes", min=1, help="Machines the GPUs are spread over.")]


def predict(workload: WorkloadArg, workload_args: WorkloadArgsArg = None, gpu: OffersGpuOpt = None,
            gpus: TotalGpusOpt = 1, nodes: NodesOpt = 1, results: ResultsOpt = None, fmt: DocumentFormatOpt = "table") -> None:
    """Predict WORKLOAD's throughput, step time and memory a GPU on --gpus GPUs of type
    --gpu over --nodes machines, from the same model advise, offers and bench use."""
    from gpubench.cli.advise_cmd import subject_of
    from gpubench.predict import gpu_specs
    from gpubench.predict.records import records_for_prediction
    from gpubench.predict.subject import suite_subject
    from gpubench.predict.verdict import verdict

    check_format(fmt, ("table", "json"))
    if not gpu:
        raise UsageError("--gpu is needed: the GPU type to predict for (e.g. --gpu 'H100 SXM')")
    spec, taken = gpu_specs.spec_named(gpu, "--gpu")
    if taken.note:
        err(f"note: {taken.note}")
    if gpus % nodes:
        raise UsageError(f"--gpus {gpus} do not spread evenly over --nodes {nodes}")
    records, warnings = records_for_prediction(results)
    for line in warnings:
        err(line)
    subject = subject_of(workload, tuple(workload_args or ()), records, suite_subject, gpus, nodes)
    answer = verdict(subject, spec, gpus, nodes, records)
    if fmt == "json":
        out(json.dumps([answer], indent=2))
        return
    for key, value in _lines(answer):
        out(f"{key:>13}: {value}")


def _lines(a: dict) -> list[tuple[str, str]]:
    from gpubench.predict.memory import say_gb
    from gpubench.format import say_duration

    where = f"{a['gpus']}x {a['gpu']}" + (f" over {a['nodes']} machines" if a["nodes"] > 1 else "")
    rows = [("prediction", f"{a['workload']} {' '.join(a['args'])}".strip() + f" on {where}")]
    if a["throughput"] is None:
        return rows + [("no figure", a["left_out"])]
    rows += [("throughput", f"{a['throughput']:,.0f} {a['unit']} ({a['low']:,.0f} to {a['high']:,.0f}, "
                            f"{a['interval']})"),
             ("step", say_duration(a["step_seconds"])),
             ("bound by", a["bound_by"] or "-"), ("basis", a["basis"])]
    if a["memory_bytes"]:
        rows.append(("memory a GPU", f"{say_gb(a['memory_bytes'])} at its peak"))
    if a["speedup"] and a["gpus"] > 1:
        rows.append(("speedup", f"{a['speedup']:.2f}x over 1 GPU (efficiency {a['efficiency']:.0%})"))
    for p in a["published"]:
        rows.append(("published", f"{p['per_gpu']:,.0f} {p['unit']} a GPU ({p['source']}); the model says "
                                  f"{p['model_vs_published']:+.0%} {p['note']}".rstrip()))
    rows += [("source", s) for s in a["sources"]]
    return rows


def register(app: typer.Typer) -> None:
    app.command("predict")(predict)
