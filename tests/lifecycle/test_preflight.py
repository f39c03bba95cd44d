"""The preflight gate's judgement, on nvidia-smi's answers as the probe reads them:
a healthy 8x H100 SXM passes, and each check fails on its own."""

from __future__ import annotations

import copy
import json

import pytest

from gpubench.lifecycle import preflight
from gpubench.lifecycle.preflight import Expectation, judge, parse_csv
from gpubench.onhost.preflight_probe import QUERIES

H100 = "NVIDIA H100 80GB HBM3"
PAID = Expectation("H100 SXM", 8, instance_id="i-1", host_id="20001")


def _rows(fields: str, lines: list[str]) -> dict:
    return {"rows": parse_csv("\n".join(lines) + "\n", fields)}


def healthy(n: int = 8, name: str = H100) -> dict:
    """The probe's facts for a healthy machine, built from nvidia-smi's csv lines."""
    pcie = _rows(QUERIES["pcie"], ["5, 5, 16, 16"] * n)
    throttle = {"field": "clocks_event_reasons.active",
                **_rows("clocks_event_reasons.active", ["0x0000000000000000"] * n)}
    return {
        "nvidia_smi": True, "stand_in": False, "hostname": "h",
        "basic": _rows(QUERIES["basic"], [f"{i}, {name}, GPU-{i:04d}, 550.54.15, 81559" for i in range(n)]),
        "ecc": _rows(QUERIES["ecc"], ["0"] * n),
        "remap": _rows(QUERIES["remap"], ["No, No"] * n),
        "pcie": _rows(QUERIES["pcie"], ["1, 5, 16, 16"] * n),   # idle links train down: fine
        "throttle": {"field": "clocks_event_reasons.active",
                     **_rows("clocks_event_reasons.active", ["0x0000000000000001"] * n)},
        "under_load": {"pcie": pcie, "throttle": throttle},
        "driver_cuda": "12.4", "topology": "GPU0\tX\tNV18",
        "shm_bytes": 64 * 1024 ** 3, "free_disk_bytes": 500 * 1024 ** 3,
        "load": {"torch": "2.5.1+cu124", "torch_cuda": "12.4", "cuda": True, "device": "cuda",
                 "gpus": n, "nccl": "2.21.5", "matmul_tflops": [690.0] * n, "matmul_dtype": "bf16",
                 "h2d_gbps": 52.0,
                 "allreduce": {"bytes": 1 << 30, "seconds": 0.004, "busbw_gbps": 450.0}},
    }


def failed(facts: dict, expect: Expectation = PAID) -> dict[str, str]:
    return {c.name: c.detail for c in judge(facts, expect) if not c.ok}


def test_a_healthy_machine_passes_every_check():
    checks = judge(healthy(), PAID)
    assert [c.name for c in checks] == ["gpus", "ecc", "throttle", "pcie", "driver", "shm", "disk",
                                        "matmul", "h2d", "allreduce"]
    assert all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
    report = preflight.GateReport(checks, healthy(), PAID, 12.5)
    assert report.passed and report.summary() == "preflight passed 10 checks in 12.5 s"
    fields = report.record_fields()
    assert fields["host_id"] == "20001" and fields["instance_id"] == "i-1"
    assert fields["gpu_uuids"][:2] == ["GPU-0000", "GPU-0001"] and fields["gpu_names"] == [H100] * 8
    assert (fields["driver_version"], fields["driver_cuda_version"], fields["torch_version"],
            fields["cuda_version"], fields["nccl_version"]) == ("550.54.15", "12.4", "2.5.1+cu124",
                                                                "12.4", "2.21.5")
    assert fields["gpu_topology"] == "GPU0\tX\tNV18"
    assert fields["preflight_checks"]["matmul"].startswith("ok: 690 TFLOP/s bf16")


def test_fewer_or_other_gpus_than_paid_for():
    facts = healthy()
    facts["basic"]["rows"].pop()
    assert failed(facts) == {"gpus": "7 GPU(s) seen, 8 paid for"}
    facts = healthy(name="NVIDIA H100 PCIe")
    assert failed(facts)["gpus"].startswith("GPU 0 is NVIDIA H100 PCIe")
    assert "paid for H100 SXM" in failed(facts)["gpus"]


def test_uncorrected_ecc_errors_and_row_remaps():
    facts = healthy()
    facts["ecc"]["rows"][3]["ecc.errors.uncorrected.volatile.total"] = "2"
    assert failed(facts) == {"ecc": "GPU 3: 2 uncorrected ECC error(s) (floor: none)"}
    facts = healthy()
    facts["remap"] = _rows(QUERIES["remap"], ["No, No"] * 7 + ["Yes, No"])
    assert "GPU 7: a row remap is pending" in failed(facts)["ecc"]
    facts = healthy()
    facts["remap"] = _rows(QUERIES["remap"], ["No, Yes"] + ["No, No"] * 7)
    assert "GPU 0: a row remap failed" in failed(facts)["ecc"]
    facts = healthy()   # consumer cards report neither: nothing to judge
    facts["ecc"] = _rows(QUERIES["ecc"], ["[N/A]"] * 8)
    facts["remap"] = _rows(QUERIES["remap"], ["[N/A], [N/A]"] * 8)
    check = next(c for c in judge(facts, PAID) if c.name == "ecc")
    assert check.ok and not check.judged


@pytest.mark.parametrize("mask, fails", [
    ("0x0000000000000001", None), ("0x0000000000000004", None), ("0x0000000000000005", None),
    ("0x0000000000000008", "HW slowdown"), ("0x0000000000000020", "SW thermal slowdown"),
    ("0x0000000000000040", "HW thermal slowdown"), ("0x0000000000000080", "HW power brake"),
    ("0x00000000000000C4", "HW thermal slowdown, HW power brake"),
])
def test_throttle_reasons_under_load(mask, fails):
    facts = healthy()
    facts["under_load"]["throttle"]["rows"][2]["clocks_event_reasons.active"] = mask
    got = failed(facts)
    if fails is None:
        assert got == {}
    else:
        assert got == {"throttle": f"GPU 2 under load: {fails} ({int(mask, 16):#x}) (floor: no HW "
                                   "slowdown, thermal slowdown or power brake)"}


def test_throttle_reasons_under_their_name_before_driver_535():
    facts = healthy()
    old = {"field": "clocks_throttle_reasons.active",
           **_rows("clocks_throttle_reasons.active", ["0x0000000000000000"] * 7 + ["0x0000000000000040"])}
    facts["under_load"]["throttle"] = old
    assert failed(facts)["throttle"].startswith("GPU 7 under load: HW thermal slowdown (0x40)")


def test_a_pcie_link_trained_down_under_load():
    facts = healthy()
    facts["under_load"]["pcie"]["rows"][5]["pcie.link.width.current"] = "4"
    assert failed(facts) == {"pcie": "GPU 5: Gen5 x4 under load (floor: its max, Gen5 x16)"}
    facts = healthy()
    facts["under_load"]["pcie"]["rows"][0]["pcie.link.gen.current"] = "2"
    assert failed(facts) == {"pcie": "GPU 0: Gen2 x16 under load (floor: its max, Gen5 x16)"}


def test_a_driver_older_than_torch_or_than_cuda_11_8():
    facts = healthy()
    facts["driver_cuda"] = "11.4"
    assert failed(facts) == {"driver": "driver 550.54.15 (CUDA 11.4) (floor: CUDA 11.8)"}
    facts = healthy()
    facts["driver_cuda"], facts["load"]["torch_cuda"] = "11.8", "12.4"
    assert "older than torch 2.5.1+cu124's CUDA 12.4" in failed(facts)["driver"]
    facts = healthy()      # minor-version compatibility: a 12.2 driver runs torch cu124
    facts["driver_cuda"] = "12.2"
    assert failed(facts) == {}
    facts = healthy()
    facts["load"]["cuda"] = False
    assert "does not see the GPUs" in failed(facts)["driver"]


def test_a_small_dev_shm_and_little_disk():
    facts = healthy()
    facts["shm_bytes"] = 64 * 1024 ** 2
    assert failed(facts) == {"shm": "/dev/shm 64 MB (floor: 1024 MB; a container needs --shm-size "
                                    "or --ipc=host)"}
    facts = healthy()
    facts["free_disk_bytes"] = 2 * 1024 ** 3
    assert failed(facts) == {"disk": "2.0 GB free (floor: 10 GB)"}


def test_a_slow_matrix_product_against_the_gpu_types_rate():
    facts = healthy()
    facts["load"]["matmul_tflops"][6] = 300.0
    assert failed(facts) == {"matmul": "300 TFLOP/s bf16 on GPU 6 (slowest of 8) (floor: 490 TFLOP/s)"}
    unknown = Expectation("Z9000", 8)
    facts = healthy(name="NVIDIA Z9000")
    check = next(c for c in judge(facts, unknown) if c.name == "matmul")
    assert check.ok and not check.judged and "no reference rate for Z9000" in check.detail


def test_a_slow_host_to_device_copy_and_all_reduce():
    facts = healthy()
    facts["load"]["h2d_gbps"] = 9.0
    assert failed(facts) == {"h2d": "9.0 GB/s pinned to GPU 0 (floor: 28.4 GB/s, 0.45 x Gen5 x16)"}
    facts = healthy()
    facts["load"]["allreduce"]["busbw_gbps"] = 300.0
    assert failed(facts) == {"allreduce": "300 GB/s bus bandwidth over 8 GPUs (1.1 GB) "
                                          "(floor: 414 GB/s, 0.9 x 460)"}
    facts = healthy()
    facts["load"]["allreduce"] = {"error": "NCCL error: unhandled system error"}
    assert failed(facts) == {"allreduce": "NCCL all_reduce failed: NCCL error: unhandled system error"}


def test_a_cpu_standing_in_for_gpus_says_so_and_passes():
    facts = healthy(n=2)
    facts["stand_in"] = True
    facts["load"] = {"torch": "2.13.0+cpu", "torch_cuda": None, "cuda": False, "device": "cpu",
                     "gpus": 0, "nccl": None, "matmul_tflops": [0.05], "h2d_gbps": None}
    checks = judge(facts, Expectation("H100 SXM", 2))
    assert all(c.ok for c in checks), [c.line() for c in checks]
    matmul = next(c for c in checks if c.name == "matmul")
    assert "on the CPU (no CUDA: a CPU stands in for the GPUs)" in matmul.detail
    report = preflight.GateReport(checks, facts, Expectation("H100 SXM", 2), 3.0)
    assert report.summary().endswith("(a CPU stands in for the GPUs)")
    facts["load"]["matmul_tflops"] = [1e-6]
    assert "floor: 0.01 GFLOP/s" in failed(facts, Expectation("H100 SXM", 2))["matmul"]


def test_no_driver_and_a_garbled_answer():
    assert failed({"nvidia_smi": False})["gpus"] == "nvidia-smi not found: no NVIDIA driver on the machine"
    with pytest.raises(preflight.PreflightError, match="no answer: boom"):
        preflight.parse_answer("boom\n")
    with pytest.raises(preflight.PreflightError, match="not JSON"):
        preflight.parse_answer(preflight.MARK + "{nope\n")


def test_the_failure_line_names_the_check_and_the_measured_value_against_the_floor():
    facts = copy.deepcopy(healthy())
    facts["shm_bytes"] = 64 * 1024 ** 2
    facts["under_load"]["pcie"]["rows"][0]["pcie.link.width.current"] = "8"
    report = preflight.GateReport(judge(facts, PAID), facts, PAID, 1.0)
    assert report.failure_line() == ("preflight failed: pcie: GPU 0: Gen5 x8 under load (floor: its "
                                     "max, Gen5 x16); shm: /dev/shm 64 MB (floor: 1024 MB; a "
                                     "container needs --shm-size or --ipc=host)")


def test_the_gate_keeps_what_else_was_measured_on_the_machine(tmp_path):
    """A cluster member's measured link sits in the same column: a gate recorded later
    keeps it, and a second gate replaces every finding of the first."""
    from gpubench.store.ledger import Ledger
    from gpubench.lifecycle.preflight import record

    with Ledger(tmp_path / "ledger.db") as ledger:
        entry = ledger.begin("m", "lambda", "gpubench-m")
        link = {"node": 1, "gbps": 9.4, "network": "private"}
        ledger.update(entry.row_id, gate=json.dumps({"link": link}))
        record(ledger, entry, {"passed": False, "failed": [{"check": "ecc"}]})
        record(ledger, entry, {"passed": True, "failed": []})
        facts = ledger.get(entry.row_id).gate_facts
    assert facts == {"link": link, "passed": True, "failed": []}
