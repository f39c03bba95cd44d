"""The prediction made for a run's configuration before it ran, kept in its record so
the report can show it beside the measurement (and its error).

Only what was known before the run is used: the records written before it and the
run's configuration (workload, arguments, GPU type and count, nodes, threads, the
gradient bytes of its model), never its measurement.

On a GPU the prediction is advise's, for the machine the run was on. On a CPU (processes
standing in for GPUs) only measurements of this very host count: the 1-process run's
rate per sample, scaled by the threads each process had (the cores are shared, so two
processes each get half), and gloo's all-reduce bandwidth measured between as many
processes (the allreduce workload's records); gloo's threads share the cores with the
compute, so none of the all-reduce is taken as hidden.
"""

from __future__ import annotations

import statistics

from gpubench.predict.advise import NO_BASIS, Config, Work, predict
from gpubench.predict.model import ASSUMED, MEASURED, Figure, Link, StepInputs, step_time
from gpubench.predict.subject import NoSubject, suite_subject
from gpubench.providers.common import Offer

CPU_OVERLAP = Figure(0.0, ASSUMED, "gloo's threads share the cores with the compute: nothing hidden")
GLOO_LATENCY_S = 50e-6
FIELDS = ("predicted_throughput", "predicted_low", "predicted_high", "predicted_basis",
          "predicted_bound_by")


def predicted_fields(record: dict, earlier: list[dict], offer: Offer | None = None) -> dict:
    """The predicted_* fields for `record` from the records `earlier` than it; {} where
    there is nothing to predict (a failed configuration name, a bandwidth test)."""
    if not _predictable(record):
        return {}
    if record.get("device") == "cpu":
        return _on_cpu(record, earlier)
    return _on_gpu(record, earlier, offer)


def _predictable(record: dict) -> bool:
    return (isinstance(record.get("gpu_count"), int) and record["gpu_count"] >= 1
            and record.get("workload") != "allreduce" and record.get("throughput_unit") != "runs/s")


def _fields(throughput: float | None, uncertainty: float, basis: str, bound_by: str | None) -> dict:
    if throughput is None:
        return {"predicted_throughput": None, "predicted_basis": basis}
    return {"predicted_throughput": throughput, "predicted_low": throughput * (1 - uncertainty),
            "predicted_high": throughput * (1 + uncertainty), "predicted_basis": basis,
            "predicted_bound_by": bound_by}


def _on_gpu(record: dict, earlier: list[dict], offer: Offer | None) -> dict:
    gpus, nodes = record["gpu_count"], record.get("nodes") or 1
    offer = offer or Offer(str(record.get("provider") or ""), "", str(record.get("gpu_name") or ""),
                           max(gpus // nodes, 1), float(record.get("price_per_hour") or 0.0))
    return gpu_fields(record["workload"], tuple(record.get("workload_args") or ()), offer, gpus, nodes, earlier)


def gpu_fields(workload: str, args: tuple, offer: Offer, gpus: int, nodes: int, records: list[dict]) -> dict:
    """The predicted_* fields of `workload` at `args` on `gpus` GPUs of `offer`'s type over
    `nodes` machines, from `records`: advise's figure, whatever runs the workload."""
    try:
        subject = suite_subject(workload, args, records)
    except NoSubject:
        return _fields(None, 0.0, NO_BASIS, None)
    p = predict(subject, Config(offer, gpus, nodes, 0.0), records, Work(1.0, "one unit"))
    return _fields(p.throughput, p.uncertainty, p.basis, p.bound_by or None)


def _same_config(r: dict, record: dict) -> bool:
    return (r.get("workload") == record.get("workload")
            and (r.get("workload_args") or []) == (record.get("workload_args") or [])
            and r.get("precision") == record.get("precision") and r.get("device") == "cpu"
            and r.get("host") == record.get("host") and r.get("status", "ok") == "ok")


def units_per_process_step(r: dict) -> float | None:
    """Units of work (samples, tokens) one process does in one step."""
    samples, steps, world = r.get("samples"), r.get("steps"), r.get("world_size") or r.get("gpu_count")
    if isinstance(samples, (int, float)) and steps and world:
        return samples / steps / world
    return r.get("batch_per_gpu")


def _on_cpu(record: dict, earlier: list[dict]) -> dict:
    ones = [r for r in earlier if _same_config(r, record) and r.get("gpu_count") == 1
            and (r.get("nodes") or 1) == 1 and (r.get("throughput") or 0) > 0]
    if not ones:
        return _fields(None, 0.0, NO_BASIS, None)
    rate = statistics.median(r["throughput"] for r in ones)
    threads_one = statistics.median(r.get("threads_per_process") or 1 for r in ones)
    threads = record.get("threads_per_process") or threads_one
    per_unit = Figure(threads_one / threads / rate, MEASURED,
                      f"measured: {len(ones)} 1-process record(s) on {record.get('host')}, "
                      f"{threads_one:g} thread(s) there, {threads:g} here")
    batch = units_per_process_step(record) or units_per_process_step(ones[0])
    gpus = record["gpu_count"]
    link = None
    if gpus > 1:
        link = gloo_link(earlier, record.get("host"), gpus, record.get("grad_bytes"))
        if link is None or not record.get("grad_bytes"):
            return _fields(None, 0.0, NO_BASIS, None)
    grads = Figure(float(record.get("grad_bytes") or 0), MEASURED, "the model's gradient bytes")
    t = step_time(StepInputs(per_unit, grads, max(int(batch or 1), 1), CPU_OVERLAP), gpus,
                  record.get("nodes") or 1, link)
    return _fields(t.throughput, t.uncertainty, MEASURED if link is None else _basis(link), t.bound_by)


def _basis(link: Link) -> str:
    return link.busbw_gbs.basis


def gloo_link(earlier: list[dict], host, world: int, grad_bytes) -> Link | None:
    """gloo's all-reduce bus bandwidth on this host between `world` processes, at the
    message size nearest the gradient bytes (the allreduce workload's curve)."""
    rows = [r for r in earlier if r.get("workload") == "allreduce" and r.get("device") == "cpu"
            and r.get("host") == host and r.get("gpu_count") == world and r.get("status", "ok") == "ok"
            and isinstance(r.get("curve"), list) and r["curve"]]
    if not rows or not grad_bytes:
        return None
    rates = []
    for r in rows:
        point = min(r["curve"], key=lambda row: abs((row.get("size") or 0) - grad_bytes))
        rates.append(point.get("busbw") or 0.0)
    busbw = statistics.median(rates)
    if busbw <= 0:
        return None
    return Link("gloo", Figure(busbw, MEASURED, f"gloo all-reduce measured here: {busbw:g} GB/s "
                                                f"at {world} processes ({len(rows)} record(s))"),
                GLOO_LATENCY_S)
