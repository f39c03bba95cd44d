"""Hand-made result records for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

BASE = {
    "schema_version": 1, "status": "ok", "error": None, "workload": "w", "provider": "p",
    "instance_type": "p.8x", "gpu_name": "NVIDIA G100", "precision": "fp32", "nodes": 1,
    "throughput_unit": "samples/s", "epoch_samples": 1000, "run_id": "run-a",
    "time": "2026-01-10T00:00:00Z",
}


def rec(gpu_count: int, throughput, price, **fields) -> dict:
    """One record; price is the $/h of the GPUs used, None when unknown."""
    record = dict(BASE, gpu_count=gpu_count, world_size=gpu_count, throughput=throughput,
                  price_per_hour=price)
    record.update(fields)
    return record


def scaling_records() -> list[dict]:
    """p (3.6 $/h per GPU): 100, 180, 320 samples/s at 1, 2, 4 GPUs; q (no price): 150 at 1;
    local (free): 10 at 1; a failed 8-GPU run on p."""
    return [
        rec(1, 100.0, 3.6),
        rec(2, 180.0, 7.2),
        rec(4, 320.0, 14.4),
        rec(1, 150.0, None, provider="q", instance_type="q.1x"),
        rec(1, 10.0, 0.0, provider="local", instance_type="local", gpu_name="cpu"),
        rec(8, None, 28.8, status="failed", error="NCCL timeout", run_id="run-b",
            time="2026-01-11T00:00:00Z"),
    ]


def write_store(directory: Path, records: list[dict], name: str = "run-a") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory
