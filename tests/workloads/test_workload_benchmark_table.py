"""benchmarks/workload_suite.py sets each figure beside the published one for the same GPU."""

import workload_suite


def record(**kw):
    base = {"gpu_count": 1, "world_size": 1, "status": "ok", "precision": "bf16",
            "throughput_unit": "images/s", "epoch_samples": 1_281_167}
    return {**base, **kw}


def test_reference_matches_gpu_and_precision():
    a100 = record(workload="resnet-ddp", device_name="NVIDIA A100-SXM4-80GB", throughput=1235.0)
    matched = [r for r in workload_suite.references_for("resnet-ddp") if workload_suite.matches(r, a100)]
    assert [r.value for r in matched] == [2470.0]
    h100 = dict(a100, device_name="NVIDIA H100 80GB HBM3")
    assert not any(workload_suite.matches(r, h100) for r in workload_suite.REFERENCES)


def test_table_prints_the_ratio(capsys):
    workload_suite.print_table([
        record(workload="resnet-ddp", device_name="NVIDIA A100 80GB PCIe", throughput=1235.0,
               model="resnet50"),
        record(workload="mnist-ddp", device_name="Tesla T4", precision="fp32", throughput=6000.0,
               epoch_samples=60_000),
    ])
    out = capsys.readouterr().out
    assert "measured / published = 0.50 (A100 AMP 2,470 img/s)" in out
    assert "epoch 10.00 s" in out and "measured / published = 0.40 (T4 epoch 25 s)" in out
