"""One prediction for a GPU type and count, as `gpubench predict` answers it: the figure,
its interval, the step, the memory a GPU, what bounds it, its basis and sources, and
the published figures for that card beside it as a check."""

from __future__ import annotations

from gpubench.predict import gpu_specs
from gpubench.predict.advise import Config, Subject, Work, predict
from gpubench.providers.common import Offer


def interval(value: float, uncertainty: float) -> tuple[float, float]:
    """value/(1+u) to value*(1+u): a rate and the time it takes are off by the same factor."""
    return value / (1.0 + uncertainty), value * (1.0 + uncertainty)


def interval_text(value: float, low: float, high: float) -> str:
    """'-20%/+25%', or '±10%' where both sides round alike."""
    down, up = 1.0 - low / value, high / value - 1.0
    if round(down * 100) == round(up * 100):
        return f"±{up:.0%}"
    return f"-{down:.0%}/+{up:.0%}"


def verdict(subject: Subject, spec: gpu_specs.GpuSpec, gpus: int, nodes: int, records: list[dict]) -> dict:
    offer = Offer("", "", spec.name, gpus // nodes, 0.0, extra={"memory_gb": spec.memory_gb})
    p = predict(subject, Config(offer, gpus, nodes, 0.0), records, Work(1.0, "one unit"))
    answer = {"workload": subject.workload, "args": list(subject.args), "gpu": spec.name, "gpus": gpus,
              "nodes": nodes, "unit": subject.unit, "throughput": p.throughput, "low": None, "high": None,
              "interval": None, "step_seconds": p.step_seconds, "memory_bytes": p.memory_bytes,
              "bound_by": p.bound_by or None, "basis": p.basis, "sources": list(p.sources),
              "speedup": p.speedup, "efficiency": p.efficiency, "left_out": p.left_out,
              "published": []}
    if p.throughput is None:
        return answer
    low, high = interval(p.throughput, p.uncertainty)
    answer.update(low=low, high=high, interval=interval_text(p.throughput, low, high))
    per_gpu = p.throughput / gpus
    for row in gpu_specs.published_for(subject.workload, spec.name, subject.precision):
        if row.gpus == 1 and subject.published_ok:
            answer["published"].append({
                "per_gpu": row.per_gpu, "unit": row.unit, "precision": row.precision,
                "batch_per_gpu": row.batch_per_gpu, "source": f"{row.source}, {row.date}",
                "model_vs_published": per_gpu / row.per_gpu - 1.0,
                "note": f"({row.note})" if row.note else ""})
    return answer
