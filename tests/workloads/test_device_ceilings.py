"""benchmarks/device_ceilings.py: the matrix-product and copy ceilings the suite
compares GPT's model TFLOP/s with, timed the honest way (warm-up excluded, median)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import workload_suite

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow
def test_script_prints_one_json_object_of_positive_rates():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "device_ceilings.py"), "--json",
                          "--n", "128", "--copy-mib", "4", "--repeats", "3", "--warmup", "1"],
                         capture_output=True, text=True, timeout=120, check=True)
    c = json.loads(out.stdout)
    assert c["device_name"] == "cpu" and c["matmul_dtype"] == "fp32" and c["matmul_n"] == 128
    assert c["matmul_tflops"] > 0 and c["copy_gb_per_s"] > 0
    assert c["copy_bytes"] == 4 << 20  # read plus written
    assert (c["repeats"], c["warmup"]) == (3, 1)


@pytest.mark.slow
def test_bad_size_is_refused():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "device_ceilings.py"), "--n", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--n must be at least 1" in out.stderr


@pytest.mark.slow
def test_measure_on_cpu_with_its_warmup_out_of_the_median():
    import device_ceilings  # torch: imported by the tests that use it, not by every worker's collection
    import torch

    calls: list[int] = []

    def fn(i: int) -> None:
        calls.append(i)
        if i == 0:
            time.sleep(0.3)  # a first call that compiles or allocates

    seconds = device_ceilings.median_seconds(fn, torch.device("cpu"), warmup=1, repeats=5)
    assert calls == [0, 1, 2, 3, 4, 5]
    assert seconds < 0.05

    c = device_ceilings.measure(torch.device("cpu"), n=64, copy_bytes=1 << 20, warmup=1, repeats=2)
    assert c.matmul_tflops > 0 and c.copy_bytes == 1 << 20


CEILINGS = {"device_name": "NVIDIA H100 80GB HBM3", "matmul_dtype": "bf16", "matmul_n": 8192,
            "matmul_tflops": 800.0, "copy_gb_per_s": 3000.0, "repeats": 20}


def gpt(**kw):
    base = {"workload": "gpt-ddp", "status": "ok", "precision": "bf16", "tf32": False,
            "model_tflops_per_gpu": 400.0}
    return {**base, **kw}


@pytest.mark.parametrize("record, expected", [
    (gpt(), "model TFLOP/s / measured bf16 matrix product = 50.0% (800.0 TFLOP/s, device_ceilings.py)"),
    (gpt(precision="fp32"), None),      # another precision: not comparable
    (gpt(precision="fp32", tf32=True), None),
    (gpt(status="failed"), None),
    (gpt(workload="resnet-ddp"), None),
])
def test_ceiling_line(record, expected):
    assert workload_suite.ceiling_line(record, CEILINGS) == expected
    assert workload_suite.ceiling_line(record, None) is None


def test_table_shows_the_ceilings(capsys):
    workload_suite.print_table([gpt(gpu_count=1, world_size=1, throughput=100_000.0, mfu=0.40,
                                    params=124_000_000, device_name="NVIDIA H100 80GB HBM3")],
                               CEILINGS)
    out = capsys.readouterr().out
    assert "device ceilings (NVIDIA H100 80GB HBM3): bf16 8192^3 matrix product 800.0 TFLOP/s" in out
    assert "= 50.0%" in out and "MFU 40.0%" in out
