"""Every failure explained in one line: the worker's own error (behind torch's
"[rank0]: " prefix too, the first failed rank's), a signal by name (SIGKILL with
the memory seen), a script that asks for CUDA, NCCL or an accelerator where there
is none, a Lightning `devices` that fixes the process count, a remote side that
sent no exit status; and which failures will repeat at every count. The torch
output here is torch 2.13's own, captured from small scripts under torchrun on a
CPU (tests/launch/test_failures_scripts.py runs such scripts for real)."""

from __future__ import annotations

import pytest

from gpubench.launch.failures import RunFacts, explain, stop_reason

# torchrun 2.x's report of a worker the kernel killed, as it prints it
SIGKILLED = """\
rank 0 started
W1123 19:20:01.000000 123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 124 closing signal SIGTERM
E1123 19:20:01.100000 123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) local_rank: 1 (pid: 125) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-23_19:20:01
  host      : box
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 124)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_19:20:01
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 125)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 125
============================================================""".splitlines()

GB = 1e9


def torchrun_report(script: str, root: int, other: int) -> list[str]:
    """torchrun 2.13's report after its workers' output: worker `root` failed first
    (exit code 1), `other` was stopped with SIGTERM (its own traceback left out)."""
    return f"""\
W1127 14:44:06.364000 15607 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 15750 closing signal SIGTERM
E1127 14:44:06.429000 15607 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: {root} (pid: 15749) of binary: /work/main/.venv/bin/python
Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
{script} FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-27_14:44:06
  host      : localhost
  rank      : {other} (local_rank: {other})
  exitcode  : -15 (pid: 15750)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 15750
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-27_14:44:06
  host      : localhost
  rank      : {root} (local_rank: {root})
  exitcode  : 1 (pid: 15749) 
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================""".splitlines()


# torch.cuda.set_device(local_rank) after init_process_group("gloo"), torch 2.13+cpu:
# each rank's traceback behind "[rankN]: "
SET_DEVICE = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/cap/set_device.py", line 7, in <module>
[rank1]:     torch.cuda.set_device(local_rank)
[rank1]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 689, in set_device
[rank1]:     torch._C._cuda_setDevice(device)
[rank1]:     ^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]: AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'
[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/cap/set_device.py", line 7, in <module>
[rank0]:     torch.cuda.set_device(local_rank)
[rank0]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 689, in set_device
[rank0]:     torch._C._cuda_setDevice(device)
[rank0]:     ^^^^^^^^^^^^^^^^^^^^^^^^
[rank0]: AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'
""".splitlines() + torchrun_report("set_device.py", 0, 1)

# init_process_group(backend="nccl"), torch 2.13+cpu: before the group exists, no prefix
NCCL = """\
/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:1849: UserWarning: Attempted to get default timeout for nccl backend, but NCCL support is not compiled
  timeout = _get_default_timeout(backend)
Traceback (most recent call last):
  File "/tmp/cap/nccl.py", line 2, in <module>
    dist.init_process_group(backend="nccl")
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
    return func(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2181, in _new_process_group_helper
    raise RuntimeError("Distributed package doesn't have NCCL built in")
RuntimeError: Distributed package doesn't have NCCL built in
""".splitlines() + torchrun_report("nccl.py", 1, 0)

# nn.Linear(8, 1).cuda(), torch 2.13+cpu (.to("cuda") and device=f"cuda:{rank}" say the same)
DOT_CUDA = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/cap/dot_cuda.py", line 5, in <module>
[rank0]:     model = nn.Linear(8, 1).cuda()
[rank0]:             ^^^^^^^^^^^^^^^^^^^^^^
[rank0]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1096, in cuda
[rank0]:     return self._apply(lambda t: t.cuda(device))
[rank0]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank0]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 522, in _lazy_init
[rank0]:     raise AssertionError("Torch not compiled with CUDA enabled")
[rank0]: AssertionError: Torch not compiled with CUDA enabled
""".splitlines() + torchrun_report("dot_cuda.py", 0, 1)

# torch.accelerator.current_accelerator().type before init_process_group, torch 2.13+cpu
ACCELERATOR_TYPE = """\
Traceback (most recent call last):
  File "/tmp/cap/accel_type.py", line 4, in <module>
    device = torch.accelerator.current_accelerator().type
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AttributeError: 'NoneType' object has no attribute 'type'
""".splitlines() + torchrun_report("accel_type.py", 0, 1)

# torch.accelerator.set_device_index(local_rank) after init_process_group("gloo")
ACCELERATOR_INDEX = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/cap/accel_set.py", line 5, in <module>
[rank1]:     torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))
[rank1]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/accelerator/__init__.py", line 198, in set_device_index
[rank1]:     torch._C._accelerator_setDeviceIndex(device_index)
[rank1]: RuntimeError: Cannot access accelerator device when none is available.
""".splitlines() + torchrun_report("accel_set.py", 1, 0)

# rank 0 cannot open its data after init_process_group("gloo"); rank 1, in a barrier,
# then fails too, after it, on the connection rank 0 closed
RANK0_MISSING_FILE = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/cap/rank0_only.py", line 6, in <module>
[rank0]:     with open("data.csv") as f:
[rank0]:          ^^^^^^^^^^^^^^^^
[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/cap/rank0_only.py", line 8, in <module>
[rank1]:     dist.barrier()
[rank1]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 5356, in barrier
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:34202. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF! 🏖️
""".splitlines() + torchrun_report("rank0_only.py", 0, 1)


def test_a_worker_killed_by_sigkill_names_the_signal_and_the_memory_seen():
    failure = explain(SIGKILLED, RunFacts(1, peak_rss_bytes=21.7 * GB, memory_total_bytes=24 * GB,
                                          memory_available_min_bytes=0.1 * GB))
    assert failure.error == ("worker rank 1 was killed by SIGKILL: the kernel may have run out of "
                             "memory (its processes held up to 21.7 GB of the machine's 24.0 GB; "
                             "available memory fell to 0.1 GB, sampled)")
    assert (failure.kind, failure.signal, failure.repeats) == ("out of memory", "SIGKILL", False)


def test_other_signals_are_named():
    failure = explain(["Segmentation fault"], RunFacts(-11))
    assert failure.error == "the run was killed by SIGSEGV" and failure.signal == "SIGSEGV"
    remote = explain([], RunFacts(137, remote=True))  # a shell's 128 + 9
    assert remote.error.startswith("the run was killed by SIGKILL: the kernel may have run out")


def test_the_workers_own_error_not_torchruns():
    tail = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "E1123 19:20:01.100000 1 torch/...] failed (exitcode: 1) local_rank: 0 (pid: 5) of binary: py",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"]
    failure = explain(tail, RunFacts(1))
    assert failure.error == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert failure.kind == "failed" and not failure.repeats


def test_failures_that_repeat_at_every_count():
    usage = explain(["usage: train.py [-h] [--epochs EPOCHS]",
                     "train.py: error: unrecognized arguments: --epohcs 3"], RunFacts(1))
    missing = explain(["ModuleNotFoundError: No module named 'lightning'"], RunFacts(1))
    no_file = explain(["FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'"],
                      RunFacts(1))
    script = explain(["/usr/bin/python3: can't open file '/x/train.py': [Errno 2] No such file"],
                     RunFacts(1))
    assert [f.kind for f in (usage, missing, no_file, script)] == [
        "usage", "import", "missing file", "missing file"]
    assert all(f.repeats for f in (usage, missing, no_file, script))
    assert stop_reason(missing, "1 gpu") == (
        "stopping the sweep: a module it needs is not installed where it runs at 1 gpu, and it "
        "would fail the same way at every count (ModuleNotFoundError: No module named 'lightning')")


def test_a_lightning_devices_mismatch_says_which_count_runs_and_what_to_write():
    # Lightning's TorchElasticEnvironment.validate_settings, under torchrun at 1 process
    tail = ["ValueError: You set `devices=2` and `num_nodes=1` in Lightning, but the product "
            "(2 * 1) does not match the world size (1)."]
    failure = explain(tail, RunFacts(1))
    assert failure.kind == "devices" and failure.repeats and failure.runs_only_at == 2
    assert failure.error.startswith("Lightning's Trainer(devices=2, num_nodes=1) wants 2 processes "
                                    "but this count runs 1: write Trainer(devices=int(os.environ.get("
                                    "'LOCAL_WORLD_SIZE', 1)),")
    assert failure.error.endswith('(or devices="auto" on GPUs); as written it runs only at '
                                  "2 processes: --gpus 2 measures it")
    assert "\n" not in failure.error
    assert stop_reason(failure, "1 gpu").startswith(
        "stopping the sweep: the script fixes its process count at 1 gpu, and every count but "
        "2 processes would fail the same way (Lightning's Trainer(devices=2, num_nodes=1)")
    assert "at every count," not in stop_reason(failure, "1 gpu")


def test_a_lightning_devices_mismatch_counts_right_in_the_singular_and_across_nodes():
    one = explain(["[rank0]: ValueError: You set `devices=1` and `num_nodes=1` in Lightning, but "
                   "the product (1 * 1) does not match the world size (2)."], RunFacts(1))
    assert one.error.startswith("Lightning's Trainer(devices=1, num_nodes=1) wants 1 process but "
                                "this count runs 2: ")
    assert one.error.endswith("it runs only at 1 process: --gpus 1 measures it")
    assert stop_reason(one, "2 gpus").startswith(
        "stopping the sweep: the script fixes its process count at 2 gpus, and every count but "
        "1 process would fail")
    nodes = explain(["ValueError: You set `devices=4` and `num_nodes=2` in Lightning, but the "
                     "product (4 * 2) does not match the world size (4)."], RunFacts(1))
    assert nodes.runs_only_at == 8
    assert nodes.error.endswith("it runs only at 8 processes: --nodes 2 --gpus 4 measures it")


def test_torch_cuda_set_device_on_a_cpu_names_the_call_and_stops_the_sweep():
    failure = explain(SET_DEVICE, RunFacts(1))
    assert failure.error == (
        "the script asks for CUDA (torch.cuda.set_device(local_rank) at set_device.py:7) and the "
        "torch it runs with is built without CUDA: AttributeError: module 'torch._C' has no "
        "attribute '_cuda_setDevice'; on a CPU use torch.device(\"cpu\")")
    assert (failure.kind, failure.repeats) == ("no gpu", True)
    assert stop_reason(failure, "1 gpu") == (
        "stopping the sweep: the script needs a GPU (CUDA, NCCL, an accelerator) and found none "
        f"at 1 gpu, and it would fail the same way at every count ({failure.error})")


def test_the_nccl_backend_on_a_cpu_says_to_use_gloo():
    failure = explain(NCCL, RunFacts(1))
    assert failure.error == (
        'the script asks for the NCCL backend (dist.init_process_group(backend="nccl") at '
        "nccl.py:2), which needs GPUs, and the torch it runs with is built without NCCL: "
        "RuntimeError: Distributed package doesn't have NCCL built in; on a CPU use gloo "
        '(init_process_group(backend="gloo"))')
    assert failure.repeats


def test_the_line_named_is_the_scripts_not_gpubenchs_probe_around_it():
    # the probe gpubench runs a user's script in wraps init_process_group: its frame is
    # between the script's and torch's
    tail = ["Traceback (most recent call last):",
            '  File "/tmp/gpubench-x/script_probe.py", line 151, in main',
            '    runpy.run_path(script, run_name="__main__")',
            '  File "/home/u/proj/train.py", line 12, in setup',
            '    dist.init_process_group("nccl")',
            '  File "/tmp/gpubench-x/script_probe.py", line 52, in probed',
            "    result = function(*args, **kwargs)",
            "             ^^^^^^^^^^^^^^^^^^^^^^^^^",
            '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", '
            "line 2181, in _new_process_group_helper",
            '    raise RuntimeError("Distributed package doesn\'t have NCCL built in")',
            "RuntimeError: Distributed package doesn't have NCCL built in"]
    assert explain(tail, RunFacts(1)).error.startswith(
        'the script asks for the NCCL backend (dist.init_process_group("nccl") at train.py:12), ')


def test_a_hard_coded_cuda_device_on_a_cpu_names_the_line():
    failure = explain(DOT_CUDA, RunFacts(1))
    assert failure.error == (
        "the script asks for CUDA (model = nn.Linear(8, 1).cuda() at dot_cuda.py:5) and the torch "
        "it runs with is built without CUDA: AssertionError: Torch not compiled with CUDA enabled; "
        'on a CPU use torch.device("cpu")')
    assert failure.repeats


# torch's words on a CUDA build (c10/cuda, ProcessGroupNCCL.cpp, the CUDA runtime), where
# the machine has no GPU: not seen on this CPU, so as torch's source writes them
@pytest.mark.parametrize("said, lack", [
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
     "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
     "this machine has no GPU (no NVIDIA driver)"),
    ("RuntimeError: No CUDA GPUs are available", "this machine has no GPU"),
])
def test_cuda_on_a_machine_without_a_gpu(said, lack):
    tail = ["Traceback (most recent call last):", '  File "/home/u/train.py", line 9, in <module>',
            '    x = torch.ones(2, device="cuda")', said]
    failure = explain(tail, RunFacts(1))
    assert failure.error.startswith('the script asks for CUDA (x = torch.ones(2, device="cuda") at '
                                    f"train.py:9) and {lack}: {said.rstrip('.')}; on a CPU use")
    assert failure.repeats


def test_nccl_on_a_cuda_build_without_a_gpu():
    failure = explain(["[rank0]: ValueError: ProcessGroupNCCL is only supported with GPUs, no "
                       "GPUs found!"], RunFacts(1))
    assert failure.error == (
        "the script asks for the NCCL backend, which needs GPUs, and this machine has no GPU: "
        "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!; on a CPU use "
        'gloo (init_process_group(backend="gloo"))')
    assert failure.repeats


def test_torch_accelerator_without_an_accelerator():
    current = explain(ACCELERATOR_TYPE, RunFacts(1))
    assert current.error.startswith(
        "the script asks for an accelerator (device = torch.accelerator.current_accelerator().type "
        "at accel_type.py:4) and this machine has none: AttributeError: 'NoneType' object has no "
        "attribute 'type'; on a CPU use torch.device(\"cpu\")")
    index = explain(ACCELERATOR_INDEX, RunFacts(1))
    assert index.error.startswith(
        'the script asks for an accelerator (torch.accelerator.set_device_index(int(os.environ['
        '"LOCAL_RANK"])) at accel_set.py:5) and this machine has none: RuntimeError: Cannot access '
        "accelerator device when none is available; ")
    assert current.repeats and index.repeats
    # a NoneType error elsewhere is the script's own
    other = explain(["AttributeError: 'NoneType' object has no attribute 'type'"], RunFacts(1))
    assert (other.kind, other.repeats) == ("failed", False)


def test_a_gpu_past_the_ones_a_count_gives_is_not_a_repeating_failure():
    # torch 2.8+ on a GPU machine: cuda:1 hard-coded, at a count of 1 GPU
    tail = ["[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/home/u/train.py", line 6, in <module>',
            '[rank0]:     x = torch.ones(2, device="cuda:1")',
            "[rank0]: torch.AcceleratorError: CUDA error: invalid device ordinal",
            "[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, "
            "so the stacktrace below might be incorrect."]
    failure = explain(tail, RunFacts(1))
    assert failure.error.startswith('the script asks for a GPU (x = torch.ones(2, device="cuda:1") '
                                    "at train.py:6) that this count does not give it")
    assert failure.error.endswith(": torch.AcceleratorError: CUDA error: invalid device ordinal")
    assert not failure.repeats


def test_the_first_failed_ranks_own_error_behind_torchs_prefix():
    failure = explain(RANK0_MISSING_FILE, RunFacts(1))
    assert failure.error == "FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'"
    assert failure.kind == "missing file" and failure.repeats
    # rank 1's error came last, but rank 0 failed first (torchrun's root cause)
    assert RANK0_MISSING_FILE[10].startswith("[rank1]: RuntimeError: [/__w/pytorch/pytorch/third")


def test_every_reading_of_the_workers_words_sees_past_the_prefix():
    usage = explain(["[rank0]: usage: train.py [-h] [--epochs EPOCHS]",
                     "[rank0]: train.py: error: unrecognized arguments: --epohcs 3"], RunFacts(2))
    assert (usage.kind, usage.error) == ("usage", "train.py: error: unrecognized arguments: --epohcs 3")
    assert explain(["[rank3]: ModuleNotFoundError: No module named 'x'"], RunFacts(1)).kind == "import"
    tee = explain(["[default0]:[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'a'"],
                  RunFacts(1))
    assert tee.error == "FileNotFoundError: [Errno 2] No such file or directory: 'a'"
    assert explain(["[rank0]: loading data"], RunFacts(3)).error == "exit code 3: loading data"


def test_what_gpubench_knows_when_the_workers_said_nothing():
    assert explain([], RunFacts(1)).error == "exit code 1 with no output"
    assert explain(["loading data"], RunFacts(3)).error == "exit code 3: loading data"
    assert explain(["step 5"], RunFacts(-9, timed_out=True, timeout=8)).error == "timed out after 8s"
    lost = explain([], RunFacts(-1, exit_status_known=False, remote=True, peak_rss_bytes=2 * GB))
    assert lost.kind == "no exit status"
    assert lost.error.startswith("no exit status came back from the machine over a live SSH link: "
                                 "the run's remote shell was killed along with the run")
    assert "its processes held up to 2.0 GB" in lost.error and lost.error.endswith("it printed nothing")
