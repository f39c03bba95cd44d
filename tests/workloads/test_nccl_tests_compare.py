"""The allreduce workload set beside nccl-tests' all_reduce_perf on the same GPUs:
its table is read, the in-place bus bandwidth compared, and every way it can
fail is one line in the table, never a crash of the suite."""

from pathlib import Path

import pytest

import nccl_tests
import workload_suite

# all_reduce_perf's layout: size count type redop root | time algbw busbw #wrong (out of
# place) | the same in place; the widths squeeze large numbers into 1.2e+03 style.
TABLE = """\
# nThread 1 nGpus 2 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    10.00    0.10    0.10      0     9.00    0.11    0.11      0
        2048           512     float     sum      -1    10.00    0.20    0.20    N/A    10.00    0.20    0.20    N/A
        4096          1024     float     sum      -1  1.2e+03    4.00    4.00      0    20.00    5.00    5.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.6
#
"""


def curve(*busbw):
    return [{"size": 1024 << i, "busbw": b} for i, b in enumerate(busbw)]


def test_parse_reads_every_row_in_and_out_of_place():
    rows = nccl_tests.parse_output(TABLE)
    assert [r.size for r in rows] == [1024, 2048, 4096]
    assert rows[2].oop_time_us == 1200.0 and rows[2].ip_busbw == 5.0 and rows[0].ip_time_us == 9.0


@pytest.mark.parametrize("text, message", [
    ("# only comments\n", "no result rows"),
    ("        1024  256  float  sum  -1  10.00  0.10\n", "7 fields"),
    ("        1024  256  float  sum  -1  10.00  x  0.1  0  9.0  0.1  0.1  0\n", "not understood"),
])
def test_garbled_output_is_an_error(text, message):
    with pytest.raises(nccl_tests.NcclTestsError, match=message):
        nccl_tests.parse_output(text)


def test_comparison_line():
    line = nccl_tests.comparison_line(curve(0.05, 0.2, 4.0), nccl_tests.parse_output(TABLE))
    assert line == "peak busbw / nccl-tests in-place peak = 0.80 (4.00 vs 5.00 GB/s); at 4,096 B 0.80"


def allreduce_record(world=2, device="cuda"):
    return {"workload": "allreduce", "status": "ok", "world_size": world, "gpu_count": world,
            "device": device, "min_bytes": 1024, "max_bytes": 4096, "curve": curve(0.05, 0.2, 2.5)}


def fake_binary(tmp_path, body: str) -> Path:
    directory = tmp_path / "nccl-tests"
    directory.mkdir()
    binary = directory / "all_reduce_perf"
    binary.write_text("#!/bin/bash\n" + body)
    binary.chmod(0o755)
    return directory


def test_runs_all_reduce_perf_on_the_same_gpus_and_sizes(tmp_path, monkeypatch):
    (tmp_path / "table.txt").write_text(TABLE)
    directory = fake_binary(tmp_path, f'echo "$@" > {tmp_path}/args\ncat {tmp_path}/table.txt\n')
    monkeypatch.setenv("NCCL_TESTS_DIR", str(directory))
    results = tmp_path / "results"
    results.mkdir()
    lines = workload_suite.compare_with_nccl_tests([allreduce_record()], results)
    assert lines == {2: "peak busbw / nccl-tests in-place peak = 0.50 (2.50 vs 5.00 GB/s); at 4,096 B 0.50"}
    assert (tmp_path / "args").read_text().split() == \
        ["-b", "1024", "-e", "4096", "-f", "2", "-g", "2", "-d", "float", "-o", "sum"]
    assert (results / workload_suite.NCCL_TESTS_FILE).read_text() == TABLE


@pytest.mark.parametrize("record, body, expected", [
    (allreduce_record(world=1), "exit 0", "nccl-tests: not compared (one GPU has no bus to measure)"),
    (allreduce_record(device="cpu"), "exit 0", "nccl-tests: not compared (gloo on a CPU; nccl-tests measures NCCL)"),
    (allreduce_record(), "echo 'NCCL failure common.cu:1100 unhandled cuda error' >&2; exit 3",
     "nccl-tests: not compared (all_reduce_perf exited with 3: NCCL failure common.cu:1100 unhandled cuda error)"),
    (allreduce_record(), "echo '# nothing'", "nccl-tests: not compared (all_reduce_perf printed no result rows)"),
])
def test_every_failure_is_one_line(tmp_path, monkeypatch, record, body, expected):
    monkeypatch.setenv("NCCL_TESTS_DIR", str(fake_binary(tmp_path, body + "\n")))
    assert workload_suite.compare_with_nccl_tests([record], None) == {record["gpu_count"]: expected}


def test_no_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_TESTS_DIR", str(tmp_path))  # holds no all_reduce_perf
    assert workload_suite.compare_with_nccl_tests([allreduce_record()], None) == \
        {2: "nccl-tests: not compared (no all_reduce_perf on PATH or in $NCCL_TESTS_DIR)"}


def test_table_prints_the_comparison(capsys):
    record = {**allreduce_record(), "precision": "fp32", "peak_busbw": 2.5, "peak_busbw_size": 4096,
              "peak_algbw": 2.5}
    workload_suite.print_table([record], None, {2: "peak busbw / nccl-tests in-place peak = 0.50"})
    assert "peak busbw / nccl-tests in-place peak = 0.50" in capsys.readouterr().out


def test_table_says_one_process_has_no_bandwidth(capsys):
    said = "one process: an all-reduce moves nothing; no bandwidth to measure"
    record = {**allreduce_record(world=1), "precision": "fp32", "peak_busbw": None, "peak_algbw": None,
              "no_bandwidth": said}
    workload_suite.print_table([record])
    assert f"allreduce      1 fp32      {said}" in capsys.readouterr().out
