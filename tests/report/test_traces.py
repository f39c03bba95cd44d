"""run --trace's summary (gpubench/report/traces.py) on hand-made Chrome traces: a CPU
rank whose gloo all-reduce overlaps its ops, and a GPU rank with compute kernels and an
NCCL kernel on two streams. Every figure is worked out by hand from the intervals:
nested ops and touching kernels count once, overlap is the intersection of the two
unions, idle the window less their union."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpubench.cli.trace_table import trace_lines
from gpubench.report import traces
from gpubench.report.traces import CPU, GPU, TraceError, intersection, merged, summarise

MAIN, GLOO = 101, 202  # thread ids


def op(name: str, start: float, end: float, cat: str = "cpu_op", tid=MAIN, pid=1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": start, "dur": end - start, "pid": pid, "tid": tid}


def write(path: Path, events: list[dict], rank: int | None = None, gz: bool = True) -> Path:
    data = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 4}
    text = json.dumps(data).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return path


# the CPU rank, in microseconds: one profiler step of 1000; on the main thread a matmul
# [100, 500] with an addmm nested in it, DDP's all-reduce call [440, 460] inside it, an
# optimizer op [600, 800]; gloo's all-reduce on its own thread [450, 700]
CPU_EVENTS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": GLOO, "args": {"name": "pt_gloo_runloop"}},
    op("ProfilerStep#4", 0, 1000, cat="user_annotation"),
    op("aten::mm", 100, 500), op("aten::addmm", 150, 400),
    op("c10d::allreduce_", 440, 460),
    op("gloo:all_reduce", 450, 700, cat="user_annotation", tid=GLOO),
    op("aten::_fused_sgd_", 600, 800),
    op("aten::broadcast_tensors", 820, 830),   # a view op, not a collective
]

# the GPU rank: host ops the GPU figures ignore; a memcpy [50, 100] and two touching
# kernels [100, 300], [300, 500] on stream 7, NCCL's all-reduce [400, 900] on stream 20,
# and a kernel [950, 1100] that ends after the host's step
GPU_EVENTS = [
    op("ProfilerStep#7", 0, 1000, cat="user_annotation"),
    op("aten::linear", 0, 1000), op("record_param_comms", 390, 410),
    op("Memcpy HtoD (Pageable -> Device)", 50, 100, cat="gpu_memcpy", pid=0, tid=7),
    op("ampere_sgemm_128x64_tn", 100, 300, cat="kernel", pid=0, tid=7),
    op("void at::native::vectorized_elementwise_kernel", 300, 500, cat="kernel", pid=0, tid=7),
    op("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 400, 900,
       cat="kernel", pid=0, tid=20),
    op("void multi_tensor_apply_kernel", 950, 1100, cat="kernel", pid=0, tid=7),
    op("ProfilerStep#7", 50, 1100, cat="gpu_user_annotation", pid=0, tid=7),  # the step, on the GPU
]


def test_unions_and_intersections_count_each_moment_once():
    assert merged([(5, 7), (0, 2), (1, 3), (3, 4), (8, 8)]) == [(0, 4), (5, 7)]
    assert intersection(merged([(0, 4), (5, 7)]), merged([(3, 6)])) == [(3, 4), (5, 6)]
    assert intersection([(0, 1)], [(1, 2)]) == []


def test_a_cpu_rank_is_read_from_its_ops_with_gloos_all_reduce_as_communication(tmp_path):
    rank = summarise(write(tmp_path / "rank2-host.pt.trace.json.gz", CPU_EVENTS))
    assert (rank.rank, rank.basis, rank.steps, rank.backend) == (2, CPU, 1, None)  # rank from the name
    assert rank.window_ms == pytest.approx(1.0)
    # compute: [100, 500] (the addmm inside it once) + [600, 800] + [820, 830]
    assert rank.compute_ms == pytest.approx(0.61)
    assert rank.comm_ms == pytest.approx(0.26)       # [440, 700]
    assert rank.overlap_ms == pytest.approx(0.16)    # [440, 500] + [600, 700]
    assert rank.idle_ms == pytest.approx(0.29)       # 1000 less [100, 800] and [820, 830]
    assert rank.share(rank.idle_ms) == pytest.approx(0.29)


def test_a_gpu_rank_is_read_from_its_kernels_with_ncclS_as_communication(tmp_path):
    rank = summarise(write(tmp_path / "rank0-gpu.pt.trace.json.gz", GPU_EVENTS, rank=3))
    assert (rank.rank, rank.basis, rank.backend, rank.steps) == (3, GPU, "nccl", 1)  # the trace's word
    assert rank.window_ms == pytest.approx(1.1)      # to the last kernel's end
    assert rank.compute_ms == pytest.approx(0.60)    # [50, 500] + [950, 1100]
    assert rank.comm_ms == pytest.approx(0.50)       # [400, 900]
    assert rank.overlap_ms == pytest.approx(0.10)    # [400, 500]
    assert rank.idle_ms == pytest.approx(0.10)       # [0, 50] and [900, 950]


def test_a_plain_json_trace_without_steps_spans_its_events(tmp_path):
    events = [e for e in CPU_EVENTS if not e["name"].startswith("ProfilerStep")]
    rank = summarise(write(tmp_path / "t.json", events, gz=False), rank=5)
    assert (rank.rank, rank.steps) == (5, 0)
    assert rank.window_ms == pytest.approx(0.73)     # [100, 830]
    assert rank.idle_ms == pytest.approx(0.02)


def test_a_file_that_is_no_trace_is_one_line_and_its_folder_lists_it(tmp_path):
    bad = tmp_path / "rank1-h.pt.trace.json.gz"
    bad.write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(TraceError, match="not a readable Chrome trace"):
        summarise(bad)
    write(tmp_path / "rank0-h.pt.trace.json.gz", CPU_EVENTS)
    found = traces.summarise_folder(tmp_path, "2 gpus", world_size=3)
    assert [r.rank for r in found.ranks] == [0] and len(found.unreadable) == 1 and found.missing == 1


def test_the_table_after_a_run_names_each_rank_where_the_files_are_and_what_opens_them(tmp_path):
    folder = tmp_path / "run1" / "traces" / "2gpus"
    folder.mkdir(parents=True)
    for rank in (0, 1):
        write(folder / f"rank{rank}-h.pt.trace.json.gz", CPU_EVENTS)
    records = [{"gpu_count": 2, "nodes": 1, "world_size": 2, "trace_dir": "run1/traces/2gpus",
                "trace_files": 2},
               {"gpu_count": 1, "nodes": 1, "world_size": 1, "trace_dir": None, "trace_files": 0},
               {"gpu_count": 4, "nodes": 1}]  # not traced: not listed
    text = "\n".join(trace_lines(tmp_path, records, ["run1"]))
    assert "compute ms" in text and "0.6 (61%)" in text and "0.3 (29%)" in text
    assert "from the CPU ops" in text
    assert "1 gpu: no trace came back" in text and "4 gpus" not in text
    assert f"in {folder};" in text and "ui.perfetto.dev" in text and "chrome://tracing" in text
    assert trace_lines(tmp_path, [{"gpu_count": 1}], ["run1"]) == []
