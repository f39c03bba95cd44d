"""GPU utilisation, memory and power sampled beside a user's own script (which
gpubench cannot instrument from inside), here and over SSH, and each GPU's figures
streamed beside any run for the live view. nvidia-smi is a stand-in on PATH that
answers the sampler's query loop as the real one does."""

import os
from pathlib import Path

import pytest

from gpubench import suite
from gpubench.launch import gpu_sampling
from gpubench.launch.base import SweepPoint
from gpubench.launch.local import LocalLauncher
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.sweep.run import SweepPlan, sweep
from tests.remote.conftest import make_sshd
from tests.remote.helpers import open_session, samplers_left, tiny_script, write_fake_nvidia_smi
from tests.helpers import one_node


@pytest.fixture
def fake_nvidia_smi(tmp_path) -> Path:
    return write_fake_nvidia_smi(tmp_path / "fakebin")


def test_summarise_means_peaks_and_missing_figures():
    text = "0, 80, 1024, 200.00\n1, 100, 2048, [N/A]\ngarbage\n0, 60, 512, 100.00\n"
    s = gpu_sampling.summarise(text)
    assert s["gpu_sampling"] == "nvidia-smi, whole run" and s["gpu_samples"] == 1
    assert s["gpu_util_pct_mean"] == 80.0 and s["gpu_util_pct_peak"] == 100.0
    assert s["gpu_mem_used_bytes_peak"] == 2048 << 20
    assert s["gpu_power_w_mean"] == 150.0 and s["gpu_power_w_peak"] == 200.0
    empty = gpu_sampling.summarise("NVIDIA-SMI has failed because it couldn't communicate with the driver")
    assert empty["gpu_util_pct_mean"] is None and empty["gpu_samples"] == 0
    assert empty["gpu_sampling"] == "off: nvidia-smi gave no samples"


def test_indices_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5")
    assert gpu_sampling.local_indices(2) == [2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8a1b,GPU-77ce")
    assert gpu_sampling.local_indices(2) == [0, 1]


def _sampled(record: dict) -> tuple:
    return (record["gpu_sampling"], record["gpu_util_pct_peak"], record["gpu_mem_used_bytes_peak"],
            record["gpu_power_w_peak"])


@pytest.mark.slow
def test_a_local_script_is_sampled_from_outside(tmp_path, fake_nvidia_smi, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tiny_script(tmp_path, name="tiny_sampled.py")
    plan = SweepPlan(suite.resolve(str(script)), one_node([1]), ["--sleep", "1"], new_run_id(), 120)
    result = sweep(LocalLauncher(gpus=["NVIDIA Stand-in 80GB"]), plan, ResultsStore(tmp_path),
                   lambda _: None)
    (record,) = result.records
    assert record["status"] == "ok", record
    assert _sampled(record) == ("nvidia-smi, whole run", 100.0, 2048 << 20, 200.0)
    assert record["gpu_samples"] >= 2


@pytest.mark.slow
def test_a_remote_script_is_sampled_beside_it(tmp_path, fake_nvidia_smi, remote_python):
    path = f"{fake_nvidia_smi}:{Path(remote_python).parent}:/usr/local/bin:/usr/bin:/bin"
    server = make_sshd(tmp_path, extra_config=f"SetEnv PATH={path}\n")
    server.start()
    try:
        script = tiny_script(tmp_path, name="tiny_sampled_remote.py")
        launcher = open_session(server, remote_python, tmp_path)
        workload = suite.resolve(str(script))
        said: list[str] = []
        with launcher:
            launcher.prepare(workload)
            outcome = launcher.run(workload, SweepPoint(1, 1), ["--sleep", "1"], said.append, 60)
            left = samplers_left(tmp_path)   # the connection still open: it ended with the run
    finally:
        server.stop()
    assert outcome.returncode == 0 and outcome.record is not None, outcome.output_tail
    assert outcome.beside["gpu_util_pct_peak"] == 100.0
    assert outcome.beside["gpu_power_w_mean"] == 200.0 and outcome.beside["gpu_samples"] >= 2
    assert list((tmp_path / "remote" / "runs").iterdir()) == []  # samples fetched and removed
    # each GPU's figures streamed as the run went, at most once a second, never its tail
    live = [gpu_sampling.parse_live_line(line) for line in said if gpu_sampling.is_live_line(line)]
    assert live and all(g["index"] == 0 and g["util"] in (80.0, 100.0) for g in live), said
    assert not any(gpu_sampling.is_live_line(line) for line in outcome.output_tail)
    # the channel closed as the run ended (the stand-in would print for two minutes), and
    # neither the sampler nor its nvidia-smi is left running
    assert outcome.elapsed_seconds < 30 and left == [] and samplers_left(tmp_path) == []
