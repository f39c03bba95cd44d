"""Every failure explained in one line: the worker's own error, a signal by name
(SIGKILL with the memory seen), a Lightning `devices` that fixes the process
count, a remote side that sent no exit status; and which failures will repeat at
every count."""

from __future__ import annotations

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


def test_a_lightning_devices_mismatch_says_what_to_write():
    tail = ["ValueError: You set `devices=2` and `num_nodes=1` in Lightning, but the product "
            "(2 * 1) does not match the world size (1)."]
    failure = explain(tail, RunFacts(1))
    assert failure.kind == "devices" and failure.repeats
    assert failure.error.startswith("Lightning's Trainer(devices=2, num_nodes=1) wants 2 processes "
                                    "but this count runs 1: write Trainer(devices=int(os.environ.get("
                                    "'LOCAL_WORLD_SIZE', 1)),")
    assert "\n" not in failure.error


def test_what_gpubench_knows_when_the_workers_said_nothing():
    assert explain([], RunFacts(1)).error == "exit code 1 with no output"
    assert explain(["loading data"], RunFacts(3)).error == "exit code 3: loading data"
    assert explain(["step 5"], RunFacts(-9, timed_out=True, timeout=8)).error == "timed out after 8s"
    lost = explain([], RunFacts(-1, exit_status_known=False, remote=True, peak_rss_bytes=2 * GB))
    assert lost.kind == "no exit status"
    assert lost.error.startswith("no exit status came back from the machine over a live SSH link: "
                                 "the run's remote shell was killed along with the run")
    assert "its processes held up to 2.0 GB" in lost.error and lost.error.endswith("it printed nothing")
