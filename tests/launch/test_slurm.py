"""gpubench on a real Slurm cluster (tests/launch/slurm_cluster.py: slurmctld and two
slurmd in network namespaces, one CPU "GPU" each): the sweep over 1 and 2 nodes
through sbatch in both launch styles (srun's through the login node over SSH: one
sweep carries both), a job that fails, one held past its pending deadline, one past
its run deadline, Ctrl-C, --dry-run, bad input. Jobs are kept short (a few mnist
steps, or a script without torch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench.launch.base import SweepPoint as P
from gpubench.launch.factory import LaunchOptions, open_launcher
from gpubench.launch.slurm import SlurmOptions, states
from gpubench.store.results import ResultsStore
from gpubench.suite import resolve
from gpubench.sweep.run import SweepPlan, sweep
from tests.helpers import GPUBENCH, ctrl_c_as_at_a_terminal
from tests.remote.helpers import samplers_left, watch_gpu_samples, write_fake_nvidia_smi

pytestmark = pytest.mark.slow

MNIST_ARGS = ["--steps", "5", "--warmup", "1", "--batch-size", "32"]
PY = sys.executable
JOBCOMP = states.FROM_JOBCOMP


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch):
    """Tables wide enough to read every heading on one line."""
    monkeypatch.setenv("COLUMNS", "300")


def slurm_args(tmp_path: Path, *more: str) -> list[str]:
    return ["--on", "slurm", "--remote-python", PY, "--remote-dir", str(tmp_path / "cluster"), *more]


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / "project" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return path


def job_state(cluster, job_id: str) -> str:
    out = cluster.command("squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%T")
    return out.stdout.strip()


def wait_for_state(cluster, job_id: str, wanted: str, within: float = 20.0) -> str:
    deadline = time.monotonic() + within
    state = ""
    while time.monotonic() < deadline:
        state = job_state(cluster, job_id)
        if state == wanted:
            break
        time.sleep(0.2)
    return state


# ---------------------------------------------------------------------- sweeps
def test_mnist_over_one_and_two_nodes_with_torchrun(slurm, cli, tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    # a stand-in nvidia-smi on the jobs' PATH (sbatch hands them this environment)
    monkeypatch.setenv("PATH", f"{write_fake_nvidia_smi(tmp_path / 'fakebin')}:{os.environ['PATH']}")
    samples = watch_gpu_samples(monkeypatch)
    code, out, err = cli("run", "mnist-ddp", *slurm_args(tmp_path), "--nodes", "1,2", "--trace-steps", "1",
                         "--gpus-per-node", "1", "--results", str(results), "--", *MNIST_ARGS)
    assert code == 0, out + err
    assert "slurm on this machine: partition debug, 2 node(s) of 1x gpu" in out
    assert "[2 nodes x 1 gpu] job" in out and "running on gbn[1-2]" in out
    assert "[2 nodes x 1 gpu] mnist-ddp: world 2 " in out  # the job's output, as it came
    records = ResultsStore(results).load().records
    assert [(r["nodes"], r["gpu_count"], r["status"]) for r in records] == [(1, 1, "ok"), (2, 2, "ok")]
    one, two = records
    assert two["slurm_nodelist"] == "gbn[1-2]" and one["slurm_nodelist"] in ("gbn1", "gbn2")
    for r in records:
        assert r["provider"] == "slurm" and r["slurm_partition"] == "debug"
        assert r["slurm_state"] == "COMPLETED" and r["slurm_exit_code"] == "0:0"
        assert r["slurm_state_source"] == JOBCOMP and r["slurm_launch"] == "torchrun"
        assert r["slurm_elapsed_s"] > 0 and r["queue_wait_s"] >= 0
        assert r["gpu_hours"] == pytest.approx(r["gpu_count"] * r["slurm_elapsed_s"] / 3600)
        assert r["core_hours"] == pytest.approx(r["nodes"] * r["slurm_elapsed_s"] / 3600)  # 1 CPU/node
        assert r["price_per_hour"] is None and r["cost"] is None and r["allocation_cost"] is None
        kept = Path(r["slurm_script"])
        assert kept.parent == results / "slurm" and kept.name == f"{r['slurm_job_id']}.sbatch"
        assert "--rdzv_backend=c10d" in kept.read_text()
        assert r["launch_command"] == f"sbatch {r['slurm_job_dir']}/job.sbatch"
        # --trace: each rank's trace, from the job's folder on the shared filesystem
        assert r["trace_files"] == r["gpu_count"] == len(list((results / r["trace_dir"]).iterdir()))
    assert "#SBATCH --nodes=2" in Path(two["slurm_script"]).read_text()
    # node scaling beside GPU scaling, the queue apart from the run, cost in GPU-hours
    for heading in ("node speedup", "node eff", "GPU-h/epoch", "GPU-h", "core-h", "queue s", "run s"):
        assert heading in out, heading
    assert "$/h" in out and "unknown" in out  # no price: no dollar figure
    # each node's GPU streamed from the job's output as it ran, the samplers gone with the jobs
    assert {(s.node, s.gpu["index"], s.gpu["util"]) for s in samples} <= {
        ("node0", 0, 80.0), ("node0", 0, 100.0), ("node1", 0, 80.0), ("node1", 0, 100.0)}
    assert {s.node for s in samples} == {"node0", "node1"} and samplers_left(tmp_path) == []


# srun's launch style over 1 and 2 nodes runs through the login node over SSH (the
# last test): one sweep carries both. The partition as a machine, with a price, is here.
def test_the_partition_is_a_machine_priced_per_gpu_hour(slurm, tmp_path):
    options = LaunchOptions(remote_python=PY, remote_dir=str(tmp_path / "cluster"),
                            scheme_options=SlurmOptions(launch="srun", price_per_gpu_hour=2.5))
    with open_launcher("slurm", options) as launcher:
        machine = launcher.machine()
    assert (machine.provider, machine.gpu_count, machine.max_nodes) == ("slurm", 1, 2)
    assert machine.price_per_hour == 2.5


# ---------------------------------------------------------------------- failures
FAILS_ALONE = """\
import os, sys
if os.environ.get("WORLD_SIZE") == "1":
    print("rank alone: giving up", file=sys.stderr)
    sys.exit(3)
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print("world", os.environ["WORLD_SIZE"], "rank", os.environ["RANK"])
if os.environ["RANK"] == "0":  # it trains nothing: a figure of its own makes it a measurement
    open(os.environ["GPUBENCH_RECORD_FILE"], "w").write('{"throughput": 1.0}')
dist.destroy_process_group()
"""


def srun_sweep_setup(tmp_path) -> tuple[ResultsStore, LaunchOptions]:
    """A results store in tmp_path and the launch options of a sweep of srun jobs."""
    store = ResultsStore(tmp_path / "results")
    store.directory.mkdir()
    return store, LaunchOptions(remote_python=PY, remote_dir=str(tmp_path / "cluster"),
                                scheme_options=SlurmOptions(launch="srun"))


def test_a_failed_job_is_recorded_with_slurms_state_and_the_sweep_goes_on(slurm, tmp_path):
    own = script(tmp_path, "fails_alone.py", FAILS_ALONE)
    store, options = srun_sweep_setup(tmp_path)
    lines: list[str] = []
    with open_launcher("slurm", options) as launcher:
        plan = SweepPlan(resolve(str(own)), [P(1, 1), P(2, 1)], [], "fails", 60)
        first = sweep(launcher, plan, store, lines.append).records
        # without accounting or a completion log: squeue, then the job's own files
        launcher.follower.usable = {states.FROM_SACCT: False, states.FROM_JOBCOMP: False}
        again = sweep(launcher, plan, store, lines.append).records  # only the failed point reruns
    failed, ok = first
    assert failed["status"] == "failed" and ok["status"] == "ok" and ok["nodes"] == 2
    assert failed["slurm_state"] == "FAILED" and failed["slurm_exit_code"] == "3:0"
    assert failed["error"] == "Slurm state FAILED, exit code 3:0: rank alone: giving up"
    assert any(line.endswith("rank alone: giving up") for line in failed["slurm_error_tail"])
    assert failed["slurm_state_source"] == JOBCOMP
    assert [r["nodes"] for r in again] == [1]
    assert again[0]["slurm_state"] == "FAILED" and again[0]["slurm_exit_code"] == "3:0"
    assert again[0]["slurm_state_source"] == states.FROM_SQUEUE
    assert any("[1 gpu] failed: Slurm state FAILED" in line for line in lines)


SLEEPS = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"


def test_a_job_held_past_its_pending_deadline_is_cancelled(slurm, cli, tmp_path):
    own = script(tmp_path, "sleeps.py", SLEEPS)
    results = tmp_path / "results"
    results.mkdir()
    code, out, err = cli("run", str(own), *slurm_args(tmp_path), "--nodes", "1", "--results", str(results),
                         "--sbatch-arg=--hold", "--pending-timeout", "2", "--launch", "srun")
    assert code == 1
    line = err.strip()
    assert "\n" not in line and line.startswith("error: job ")
    assert "still pending after 2s (--pending-timeout); Slurm's reason: JobHeldUser; " \
           "cancelled it with scancel" in line
    job_id = line.split()[2]
    assert "pending: JobHeldUser" in out
    assert wait_for_state(slurm, job_id, "CANCELLED") == "CANCELLED"
    assert not list(results.glob("*.jsonl"))  # nothing half-written


def test_a_job_past_its_run_deadline_is_cancelled_and_recorded_failed(slurm, tmp_path):
    own = script(tmp_path, "sleeps.py", SLEEPS)
    store, options = srun_sweep_setup(tmp_path)
    lines: list[str] = []
    with open_launcher("slurm", options) as launcher:
        plan = SweepPlan(resolve(str(own)), [P(1, 1)], [], "slow", 3)
        (record,) = sweep(launcher, plan, store, lines.append).records
    assert record["status"] == "failed" and record["slurm_state"] == "CANCELLED"
    assert record["error"].startswith(f"ran past --timeout; cancelled job {record['slurm_job_id']}")
    assert "[1 gpu] started" in lines


def test_ctrl_c_cancels_the_running_job_and_says_so(slurm, tmp_path):
    own = script(tmp_path, "sleeps.py", SLEEPS)
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.Popen([GPUBENCH, "run", str(own), *slurm_args(tmp_path), "--nodes", "2",
                             "--launch", "srun", "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=ctrl_c_as_at_a_terminal)
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if "] started" in line:  # the job's own output: it runs
                break
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + rest
    assert proc.returncode == 130, out + err
    job_id = next(ln.split("job ")[1].split(":")[0] for ln in seen if "submitted job" in ln)
    assert f"cancelled job {job_id} with scancel" in out
    assert err.strip() == "interrupted"
    assert wait_for_state(slurm, job_id, "CANCELLED") == "CANCELLED"


# ---------------------------------------------------------------------- no jobs
def test_dry_run_prints_the_scripts_and_submits_nothing(slurm, cli, tmp_path):
    before = slurm.command("squeue", "--noheader", "--states=all", "--format=%i").stdout.split()
    code, out, err = cli("run", "mnist-ddp", *slurm_args(tmp_path), "--nodes", "1,2", "--dry-run",
                         "--time", "00:10:00", "--sbatch-arg=--exclusive", "--", "--steps", "5")
    assert code == 0, err
    assert out.count("#!/bin/bash") == 2 and out.rstrip().endswith("--dry-run: nothing was submitted")
    for expected in ("#SBATCH --nodes=1", "#SBATCH --nodes=2", "#SBATCH --gres=gpu:1",
                     "#SBATCH --time=00:10:00", "#SBATCH --exclusive", "--rdzv_backend=c10d",
                     'scontrol show hostnames "$SLURM_JOB_NODELIST"', "mnist_ddp.py --record-file"):
        assert expected in out, expected
    assert "#SBATCH --partition" not in out  # the cluster's default partition
    code, srun_out, _ = cli("run", "mnist-ddp", *slurm_args(tmp_path), "--nodes", "2", "--dry-run",
                            "--launch", "srun", "--gpu-flag", "gpus-per-node")
    assert code == 0 and "#SBATCH --gpus-per-node=1" in srun_out and "MASTER_ADDR" in srun_out
    after = slurm.command("squeue", "--noheader", "--states=all", "--format=%i").stdout.split()
    assert after == before
    assert not (tmp_path / "cluster" / "slurm").exists()


@pytest.mark.parametrize("argv, code, message", [
    (["--partition", "nope"], 1, "error: sbatch refused the job: sbatch: error: invalid partition "
                                 "specified: nope; allocation failure: Invalid partition name specified"),
    (["--nodes", "1,3"], 2, "error: --nodes 3: "),
    (["--gpus-per-node", "2"], 2, "error: --gpus-per-node 2: "),
    (["--reservation", "nope"], 1, "error: sbatch refused the job: allocation failure: "
                                   "Requested reservation is invalid"),
])
def test_bad_input_is_one_line_and_submits_nothing(slurm, cli, tmp_path, argv, code, message):
    results = tmp_path / "results"
    results.mkdir()
    got, out, err = cli("run", "mnist-ddp", *slurm_args(tmp_path), "--results", str(results), *argv)
    assert (got, err.count("\n")) == (code, 1) and err.startswith(message), err
    assert not slurm.jobs() and not list(results.iterdir())


def test_no_sbatch_on_path_and_no_login_host(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli("run", "mnist-ddp", "--on", "slurm")
    assert (code, out) == (2, "")
    assert err == ("error: --on slurm: no sbatch on this machine's PATH; give the cluster's login "
                   "node: --on slurm:[user@]LOGIN[:port]\n")


# ---------------------------------------------------------------------- over SSH
def test_the_login_node_over_ssh_runs_srun_tasks_over_one_and_two_nodes(slurm, cli, tmp_path):
    """One sweep over the login node carries both: gpubench on a login node reached over
    SSH, and srun's launch style (a task per GPU, ranks from Slurm) at 1 and 2 nodes,
    priced per GPU-hour."""
    from tests.remote.conftest import free_port, make_sshd

    sshd = make_sshd(tmp_path, extra_config=f"SetEnv SLURM_CONF={slurm.conf}\n")
    sshd.start()
    try:
        results = tmp_path / "results"
        results.mkdir()
        login = f"slurm:{sshd.user}@{sshd.host}:{sshd.port}"
        code, out, err = cli("run", "mnist-ddp", "--on", login, "--key", str(sshd.key_file),
                             "--remote-python", PY, "--remote-dir", str(tmp_path / "over-ssh"),
                             "--nodes", "1,2", "--launch", "srun", "--price-per-gpu-hour", "2.5",
                             "--trace-steps", "1", "--results", str(results), "--", *MNIST_ARGS)
        assert code == 0, out + err
        assert f"slurm on {sshd.user}@{sshd.host}:{sshd.port}: partition debug" in out
        assert "synced workloads" in out  # rsync over gpubench's pinned-key SSH
        records = ResultsStore(results).load().records
        assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [(1, 1, "ok"), (2, 2, "ok")]
        for record in records:
            assert record["status"] == "ok" and record["slurm_state"] == "COMPLETED"
            assert record["instance_type"].startswith(f"{sshd.host}:debug")
            assert record["slurm_job_dir"].startswith(str(tmp_path / "over-ssh" / "slurm"))
            text = Path(record["slurm_script"]).read_text()
            assert text.startswith("#!/bin/bash")
            assert json.loads((results / f"{record['run_id']}.jsonl").read_text().splitlines()[0])
            # srun's launch style: a task per GPU, ranks from Slurm, no torchrun
            assert record["slurm_launch"] == "srun"
            assert "#SBATCH --ntasks-per-node=1" in text and "RANK=$SLURM_PROCID" in text
            assert "torch.distributed.run" not in text
            # money from GPU-hours at the price given
            assert record["price_per_hour"] == pytest.approx(2.5 * record["gpu_count"])
            assert record["allocation_cost"] == pytest.approx(2.5 * record["gpu_hours"])
            # --trace: each rank's trace, pulled from the job's folder over SSH
            assert record["trace_files"] == record["world_size"]
        assert any(line.endswith(f"state from {JOBCOMP})") for line in out.splitlines()), out
    finally:
        sshd.stop()
    # a login node that refuses
    code, out, err = cli("run", "mnist-ddp", "--on", f"slurm:{sshd.user}@127.0.0.1:{free_port()}",
                         "--key", str(sshd.key_file), "--connect-wait", "1")
    assert code == 1 and err.count("\n") == 1 and "connection refused" in err, err
