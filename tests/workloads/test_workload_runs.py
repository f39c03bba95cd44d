"""Every workload of the suite, run by gpubench's launcher for a few steps, writes a
valid record: at 2 gloo processes (what a figure per GPU, per step and per epoch is
divided by shows there), allreduce at 1 and 2 (a bus bandwidth of nothing at one
process); a workload started without torchrun runs as a world of one. mnist-ddp's
record at 1 and 2 processes: tests/cli/test_progress_demo.py; its --profile traces, in
its two-process run in tests/workloads/test_mnist_data.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpubench.workloads import record_schema
from tests.helpers import REPO

pytestmark = pytest.mark.slow

# what every record a suite workload writes must carry
RECORD_KEYS = {
    "schema_version", "time", "workload", "status", "gpu_name", "world_size", "nodes", "backend",
    "precision", "batch_per_gpu", "global_batch", "steps", "wall_seconds", "median_step_s",
    "p90_step_s", "throughput", "throughput_unit", "torch_version", "gpu_sampling",
    "gpu_samples", "gpu_util_pct_mean", "gpu_util_pct_peak", "gpu_mem_used_bytes_mean",
    "gpu_power_w_peak", "workload_argv", "provider", "gpu_count", "launch_command",
}


def check_record(record: dict, workload: str, world: int, measured: bool = True) -> None:
    missing = RECORD_KEYS - record.keys()
    assert not missing, f"record lacks {sorted(missing)}"
    assert record_schema.type_problems(record) == []
    assert record["workload"] == workload
    assert record["status"] == "ok" and record["error"] is None
    assert record["world_size"] == world == record["gpu_count"]
    assert record["backend"] == "gloo" and record["gpu_name"] == "cpu"
    assert (record["throughput"] > 0 if measured else record["throughput"] is None)
    assert record["wall_seconds"] > 0
    assert record["gpu_sampling"].startswith("off") and record["gpu_samples"] == 0


def test_resnet(sweep):
    # width 8, not 4: torch 2.13's CPU convolutions in channels_last corrupt the heap at
    # 4 channels on some AMD EPYC hosts (the process aborts with "free(): invalid size")
    records = sweep("resnet-ddp", ["--steps", "3", "--depth", "18", "--width", "8",
                                   "--image-size", "32", "--num-classes", "10", "--batch-size", "4"],
                    counts=(2,))
    for world, r in zip((2,), records):
        check_record(r, "resnet-ddp", world)
        assert r["throughput_unit"] == "images/s" and r["model"] == "resnet18"
        assert r["cudnn_benchmark"] is True  # fixed shapes: cuDNN picks its algorithms once
        assert r["global_batch"] == 4 * world and r["samples"] == 12 * world
        assert r["memory_format"] == "channels_last"


def test_gpt(sweep):
    records = sweep("gpt-ddp", ["--steps", "3", "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
                                "--block-size", "16", "--vocab-size", "64", "--batch-size", "2",
                                "--precision", "bf16"], counts=(2,))
    for world, r in zip((2,), records):
        check_record(r, "gpt-ddp", world)
        assert r["precision"] == "bf16" and r["throughput_unit"] == "tokens/s"
        assert r["optimizer"] == "AdamW (fused)"  # torch has a fused AdamW for the CPU too
        assert r["host_malloc"] == "kept"  # a CPU run reuses what each step frees (host_malloc)
        assert r["tokens_per_step"] == 2 * 16 * world
        # N = 1 layer (12*16^2 + 2*16) + final LayerNorm 16 + wte 64*16 = 4,144
        assert r["non_embedding_params"] == 4_144
        # the DDP model's: N + wpe 16*16, each an fp32 gradient (tied wte/lm_head once)
        assert (r["params"], r["grad_bytes"]) == (4_144 + 256, 4 * (4_144 + 256))
        assert r["flops_per_token"] == 6 * 4_144 + 12 * 1 * 2 * 8 * 16
        assert r["model_tflops"] == pytest.approx(r["flops_per_token"] * r["tokens_per_s"] / 1e12)
        assert r["mfu"] is None and r["peak_tflops_per_gpu"] is None  # no peak for a CPU
        # memory as gpt-fsdp records it (tests/workloads/test_gpt_fsdp.py): a whole replica each
        assert r["sharding"] == "DDP (replicated)" and r["param_bytes_per_process"] == r["grad_bytes"]
        assert r["train_state_bytes_per_process"] == pytest.approx(4 * r["grad_bytes"], rel=0.01)
        assert r["peak_memory_kind"] == "process peak RSS (CPU)" and r["process_peak_rss_bytes"] > 0


def test_recsys_on_movielens_file(sweep, tmp_path):
    rows = [f"{u},{m},{(u * m) % 10 / 2 + 0.5},0" for u in range(1, 9) for m in range(1, 9)]
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + "\n".join(rows) + "\n")
    records = sweep("recsys-ddp", ["--steps", "3", "--batch-size", "8", "--data", str(tmp_path)],
                    counts=(2,))
    for world, r in zip((2,), records):
        check_record(r, "recsys-ddp", world)
        assert (r["users"], r["movies"], r["ratings"]) == (8, 8, 64)
        assert r["steps_per_epoch"] == 64 // world // 8


def test_recsys_missing_data_is_one_clear_error(sweep, tmp_path):
    [record] = sweep("recsys-ddp", ["--steps", "3", "--data", str(tmp_path / "absent")],
                     counts=(1,), expect="failed")
    assert record["error"] == f"error: no such ratings file or directory: {tmp_path / 'absent'}"


def test_allreduce_curve(sweep):
    records = sweep("allreduce", ["--steps", "3", "--max-bytes", "16384"])
    for world, r in zip((1, 2), records):
        check_record(r, "allreduce", world, measured=world > 1)
        assert [row["size"] for row in r["curve"]] == [1024, 2048, 4096, 8192, 16384]
        assert all(row["time_us"] > 0 for row in r["curve"])
    alone, two = records       # one process moves nothing: no bandwidth, and the record says why
    assert all(row["algbw"] is None and row["busbw"] is None for row in alone["curve"])
    assert alone["peak_busbw"] is None and alone["peak_algbw"] is None
    assert alone["no_bandwidth"] == "one process: an all-reduce moves nothing; no bandwidth to measure"
    for row in two["curve"]:
        assert row["algbw"] == pytest.approx(row["size"] / 1e9 / (row["time_us"] / 1e6))
        assert row["busbw"] == pytest.approx(row["algbw"])            # 2(n-1)/n at n = 2
    assert two["peak_busbw"] == max(row["busbw"] for row in two["curve"])
    assert two["throughput"] == two["peak_algbw"] and "no_bandwidth" not in two


def test_allreduce_alone_says_in_words_that_there_is_no_bandwidth(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "workloads" / "allreduce.py"), "--steps", "2", "--max-bytes", "4096",
         "--record-file", str(tmp_path / "rec.json")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "one process: an all-reduce moves nothing; no bandwidth to measure" in proc.stdout
    assert "GB/s" not in proc.stdout and "busbw" not in proc.stdout, proc.stdout
    assert json.loads((tmp_path / "rec.json").read_text())["throughput"] is None


def test_workload_runs_without_torchrun_as_a_world_of_one(tmp_path):
    record_file = tmp_path / "rec.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "workloads" / "mnist_ddp.py"), "--steps", "2", "--warmup", "0",
         "--record-file", str(record_file)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    record = json.loads(record_file.read_text())
    assert record["world_size"] == 1 and record["steps"] == 2 and record["epoch_samples"] == 60000
