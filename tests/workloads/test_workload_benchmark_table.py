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
    v100 = dict(a100, device_name="Tesla V100-SXM2-16GB", precision="fp16")
    assert [r.value for r in workload_suite.references_for("resnet-ddp")
            if workload_suite.matches(r, v100)] == [1200.0]
    h100_pcie = dict(a100, device_name="NVIDIA H100 PCIe")
    assert not any(workload_suite.matches(r, h100_pcie) for r in workload_suite.references_for("resnet-ddp"))


def test_an_h200_is_set_beside_its_own_figure_and_the_h100s():
    """The H200 is the H100 SXM's chip: Lambda's 2,790 img/s for that card is an anchor too."""
    h200 = record(workload="resnet-ddp", device_name="NVIDIA H200", throughput=2790.0)
    assert sorted(r.value for r in workload_suite.references_for("resnet-ddp")
                  if workload_suite.matches(r, h200)) == [2790.0, 3079.0]
    tf32 = dict(h200, precision="fp32")
    assert [r.value for r in workload_suite.references_for("resnet-ddp")
            if workload_suite.matches(r, tf32)] == [1753.0]
    gpt = record(workload="gpt-ddp", device_name="NVIDIA H200", mfu=0.3)
    assert [r.value for r in workload_suite.references_for("gpt-ddp") if workload_suite.matches(r, gpt)] == [0.249]


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
