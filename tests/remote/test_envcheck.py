"""The environment check's judgements: what stops a run, and what only warns."""

from gpubench.remote.envcheck import LOW_SHM_BYTES, RemoteEnv

GIB = 1024**3


def env(**kw) -> RemoteEnv:
    base = dict(python="3.11.7", torch="2.13.0", cuda_available=True,
                gpus=["NVIDIA H100 80GB HBM3"] * 4, free_disk_bytes=100 * GIB,
                tools={"rsync": True, "setsid": True, "timeout": True}, shm_bytes=64 * GIB)
    base.update(kw)
    return RemoteEnv(**base)


def test_a_small_dev_shm_warns_on_a_multi_gpu_machine():
    (note,) = env(shm_bytes=64 * 1024**2).warnings()
    assert note.startswith("/dev/shm is only 64 MB: NCCL") and "--shm-size" in note
    assert env(shm_bytes=64 * 1024**2, gpus=["NVIDIA A10"]).warnings() == []  # one GPU: no NCCL traffic
    assert env(shm_bytes=None).warnings() == []  # an older check did not measure it
    assert env(shm_bytes=LOW_SHM_BYTES).warnings() == []


def test_missing_torch_or_tools_stop_the_run():
    assert env(torch=None, torch_error="No module named 'torch'").missing() == [
        "torch (No module named 'torch')"]
    assert env(tools={"rsync": False, "setsid": True, "timeout": True}).missing() == ["rsync"]


def test_other_warnings():
    notes = env(cuda_available=False, free_disk_bytes=2 * GIB).warnings()
    assert notes[0].startswith("torch 2.13.0 does not see CUDA although nvidia-smi lists 4 GPU(s)")
    assert notes[1] == "only 2.0 GB of disk free"
