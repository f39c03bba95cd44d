"""The GPU sampler on a remote node (gpu_sampling.main, `feed`): each GPU's figures as
lines of the run's output behind its node's name, nvidia-smi's lines kept for the record,
and an end that leaves nothing running, whether it is stopped, its reader goes, or there
is no nvidia-smi; the Slurm job's wrapper that runs it beside a node's first task; a
machine's samples kept as samples under bench --hosts; the mock cloud's nvidia-smi loop.
Each sampler here runs a second or two against a stand-in nvidia-smi."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpubench.bench.hosts import prefixed
from gpubench.launch import gpu_sampling
from gpubench.launch.slurm import script
from gpubench.launch.slurm.launcher import SAMPLER
from gpubench.launch.slurm.options import SlurmOptions
from gpubench.mock import nvidia_smi
from gpubench.sweep.events import GpuSample, RunStep, gpu_from_line
from tests.remote.helpers import samplers_left, write_fake_nvidia_smi

FEED = [sys.executable, gpu_sampling.__file__]


def with_fake(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{write_fake_nvidia_smi(tmp_path / 'fakebin')}:{os.environ['PATH']}"}


def started(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*FEED, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, cwd=tmp_path,
                            env=env or with_fake(tmp_path))


def test_the_node_sampler_says_each_gpu_behind_its_node_and_keeps_nvidia_smis_lines(tmp_path):
    keep = tmp_path / "run.gpu"
    proc = started(tmp_path, *gpu_sampling.feed_args([0, 1], keep=str(keep)), "--node", "node3")
    lines = [proc.stdout.readline().strip() for _ in range(2)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert sorted(lines) == ["[node3] GPUBENCH_GPU index=0 util=80 mem_used=1024 power=200",
                             "[node3] GPUBENCH_GPU index=1 util=80 mem_used=1024 power=200"]
    kept = gpu_sampling.summarise(keep.read_text())
    assert kept["gpu_sampling"] == "nvidia-smi, whole run" and kept["gpu_samples"] >= 1
    assert samplers_left(tmp_path) == []    # its nvidia-smi stopped with it


def test_a_sampler_whose_reader_is_gone_ends_and_one_without_nvidia_smi_says_nothing(tmp_path):
    proc = started(tmp_path, *gpu_sampling.feed_args([0]))
    assert proc.stdout.readline().startswith("GPUBENCH_GPU index=0 ")
    proc.stdout.close()                      # the run's connection closed
    assert proc.wait(timeout=20) == 0 and samplers_left(tmp_path) == []
    bare = {**os.environ, "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    done = subprocess.run([*FEED, *gpu_sampling.feed_args(procs=2)], capture_output=True, text=True,
                          env=bare, timeout=20)
    assert (done.returncode, done.stdout) == (0, "")


def test_a_slurm_nodes_first_task_watches_its_gpus_beside_its_command(tmp_path):
    spec = script.JobSpec("mnist-ddp", 2, 2, str(tmp_path), str(tmp_path), sys.executable, "mnist_ddp.py")
    text = script.render(spec, SlurmOptions(launch="srun"))
    watch = shlex.split(next(ln for ln in text.splitlines() if ln.startswith("gpu_watch="))[len("gpu_watch="):])[0]
    Path(spec.sampler_path).write_text(SAMPLER)

    def task(local_id: str, env: dict[str, str], seconds: float = 1.0) -> subprocess.CompletedProcess:
        env = {**env, "SLURM_LOCALID": local_id, "SLURM_NODEID": "1"}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        return subprocess.run(["bash", "-c", watch, "rank", "sh", "-c", f"sleep {seconds}; exit 3"],
                              capture_output=True, text=True, env=env, timeout=60)

    begun = time.monotonic()
    first = task("0", with_fake(tmp_path), 1.5)
    assert time.monotonic() - begun < 30     # not the stand-in's two minutes: stopped with the task
    assert first.returncode == 3 and first.stdout, first.stderr
    assert {line.split(" util=")[0] for line in first.stdout.splitlines()} == {
        "[node1] GPUBENCH_GPU index=0", "[node1] GPUBENCH_GPU index=1"}
    assert task("1", with_fake(tmp_path)).stdout == ""          # one sampler per node
    assert task("0", {**os.environ, "PATH": "/usr/bin:/bin"}).stdout == ""   # no nvidia-smi
    assert samplers_left(tmp_path) == []


def test_under_bench_hosts_a_machines_gpu_samples_stay_samples_named_by_it():
    said: list[str] = []
    echo = prefixed(said.append)("b-2")
    echo(gpu_from_line("[node1] " + gpu_sampling.live_line(0, 55.0, 10.0, 90.0)))
    echo(gpu_from_line(gpu_sampling.live_line(1, 5.0, None, None)))
    echo(RunStep("step 1/3", phase="measure", step=1, total=3, elapsed=1.0, rate=None, unit=None,
                 gpu_util=None, gpu_mem=None))
    first, second, step = said
    assert isinstance(first, GpuSample) and (first.node, first.gpu["util"]) == ("b-2 node1", 55.0)
    assert isinstance(second, GpuSample) and second.node == "b-2"
    assert step == "[b-2] step 1/3" and not isinstance(step, GpuSample)


def test_the_mock_clouds_nvidia_smi_loops_with_no_figure_until_its_reader_goes(tmp_path):
    config = tmp_path / "nvidia-smi.json"
    config.write_text(json.dumps({"name": "NVIDIA H100 80GB HBM3", "count": 2, "memory_mib": 81559,
                                  "seed": "t", "bad": ""}))
    proc = subprocess.Popen([sys.executable, nvidia_smi.__file__, str(config),
                             f"--query-gpu={gpu_sampling.QUERY}", "--format=csv,noheader,nounits",
                             "-lms", "50", "-i", "0,1"], stdout=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline() for _ in range(4)]
    proc.stdout.close()
    assert proc.wait(timeout=20) == 0
    assert lines == ["0, [N/A], [N/A], [N/A]\n", "1, [N/A], [N/A], [N/A]\n"] * 2
    kept = gpu_sampling.summarise("".join(lines))     # a record says nothing was measured
    assert kept["gpu_sampling"] == "off: nvidia-smi gave no figures" and kept["gpu_samples"] == 0
