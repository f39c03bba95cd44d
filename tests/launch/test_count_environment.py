"""What each count's processes are given: on a GPU machine only the GPUs of the
count (CUDA_VISIBLE_DEVICES), so that a script using every visible GPU follows
the sweep; on a CPU one thread per process, unpinned, as the records say."""

from __future__ import annotations

from types import SimpleNamespace

from gpubench.launch import cpu_policy
from gpubench.launch.base import Machine, visible_gpus
from gpubench.launch.local import LocalLauncher
from gpubench.launch.ssh import SshLauncher
from gpubench.remote.envcheck import RemoteEnv


def test_a_count_of_n_sees_n_gpus():
    assert visible_gpus(1) == "0" and visible_gpus(4) == "0,1,2,3"
    assert visible_gpus(2, "3,5,6") == "3,5"  # the first of those already visible
    assert visible_gpus(2, "GPU-aa,GPU-bb,GPU-cc") == "GPU-aa,GPU-bb"
    assert visible_gpus(4, "3,5") == "0,1,2,3"  # fewer than asked: the machine's own numbering


def test_the_local_launcher_sets_them_per_count(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus = LocalLauncher(gpus=["NVIDIA H100"] * 4)
    assert gpus.environment(2)["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "OMP_NUM_THREADS" not in gpus.environment(2)
    cpu = LocalLauncher(gpus=[])
    for procs in (1, 2):
        env = cpu.environment(procs)
        assert env["OMP_NUM_THREADS"] == str(cpu_policy.THREADS_PER_PROCESS)
        assert "CUDA_VISIBLE_DEVICES" not in env


def _ssh(cuda: bool) -> SshLauncher:
    env = RemoteEnv("3.11", "2.13", cuda, gpus=["H100"] * 8 if cuda else [], cpu_count=16)
    return SshLauncher(SimpleNamespace(env=env), Machine("ssh", "box", "H100", 8, None))


def test_the_ssh_launcher_sets_them_per_count():
    assert _ssh(True).environment(4)["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    cpu = _ssh(False).environment(2)
    assert cpu["OMP_NUM_THREADS"] == "1" and "CUDA_VISIBLE_DEVICES" not in cpu
    assert cpu_policy.pinning() == "none"
