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


def cost_story_records() -> list[dict]:
    """What a user who rented two clouds has: mnist-ddp on Lambda (2x A100 machine at
    $2.58/h, so a 1-GPU run pays half) and Vast.ai (2x RTX 3090 at $0.34/h), and on
    the free local CPU; gpt-ddp (tokens) on Lambda only; a user's script timed as a
    whole (runs) on two local counts."""
    lam = dict(provider="lambda", instance_type="gpu_2x_a100", gpu_name="NVIDIA A100-SXM4-40GB",
               instance_price_per_hour=2.58, device="cuda")
    vast = dict(provider="vast", instance_type="2x RTX 3090", gpu_name="NVIDIA GeForce RTX 3090",
                instance_price_per_hour=0.34, device="cuda")
    local = dict(provider="local", instance_type="local", gpu_name="cpu", device="cpu",
                 instance_price_per_hour=0.0)
    mnist = dict(workload="mnist-ddp", throughput_unit="images/s", epoch_samples=60000)
    gpt = dict(workload="gpt-ddp", throughput_unit="tokens/s", epoch_samples=None)
    script = dict(workload="./train.py", throughput_unit="runs/s", epoch_samples=1,
                  precision="-", script_sha256="ab12cd34ef56", **local)
    return [
        rec(1, 5421.7, 1.29, **lam, **mnist),
        rec(2, 10318.25, 2.58, **lam, **mnist),
        rec(1, 5012.4, 0.17, **vast, **mnist),
        rec(2, 9642.9, 0.34, **vast, **mnist),
        rec(1, 134.27, 0.0, **local, **mnist),
        rec(1, 48213.6, 1.29, **lam, **gpt),
        rec(2, 93877.1, 2.58, **lam, **gpt),
        rec(1, 1 / 95.2, 0.0, **script),
        rec(2, 1 / 51.7, 0.0, **script),
    ]
