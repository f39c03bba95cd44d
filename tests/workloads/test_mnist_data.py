"""The IDX loader on small generated files, and the MNIST workload reading them in a
two-process run that also shows its progress line and its --profile traces."""

from __future__ import annotations

import gzip
import hashlib
import struct
import sys

import pytest

from tests.helpers import REPO

# torch, and mnist_data that imports it, are imported where they are used, not at
# collection: importing torch costs every test worker seconds, in the fast lane too

pytestmark = pytest.mark.slow


def write_idx(path, array: "torch.Tensor", type_code: int, gz: bool = True) -> str:
    import torch

    header = struct.pack(">BBBB", 0, 0, type_code, array.dim())
    header += struct.pack(f">{array.dim()}I", *array.shape)
    if array.element_size() > 1:
        body = array.contiguous().view(torch.uint8).view(-1, array.element_size()).flip(1).reshape(-1)
    else:
        body = array.contiguous().view(torch.uint8).reshape(-1)
    data = header + bytes(body.tolist())
    path.write_bytes(gzip.compress(data) if gz else data)
    return hashlib.md5(path.read_bytes()).hexdigest()


def small_set(root, n=7):
    import torch

    images = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8)
    labels = torch.randint(0, 10, (n,), dtype=torch.uint8)
    files = {
        "imgs-idx3-ubyte.gz": write_idx(root / "imgs-idx3-ubyte.gz", images, 0x08),
        "lbls-idx1-ubyte.gz": write_idx(root / "lbls-idx1-ubyte.gz", labels, 0x08),
    }
    return images, labels, files


def test_reads_generated_idx_files_into_normalised_tensors(tmp_path):
    import mnist_data
    import torch

    images, labels, files = small_set(tmp_path)
    split = mnist_data.load_split(tmp_path, files, fetch=False)
    assert split.images.shape == (7, 1, 28, 28) and split.images.dtype == torch.float32
    assert torch.equal(split.labels, labels.to(torch.int64))
    expected = (images.float() / 255 - mnist_data.MEAN) / mnist_data.STD
    assert torch.allclose(split.images[:, 0], expected)


def test_multibyte_idx_is_big_endian(tmp_path):
    import mnist_data
    import torch

    values = torch.tensor([[1, -2, 70000], [3, 4, -5]], dtype=torch.int32)
    write_idx(tmp_path / "x-idx2-int", values, 0x0C, gz=False)
    assert torch.equal(mnist_data.read_idx(tmp_path / "x-idx2-int"), values)


def test_bad_checksum_is_refused(tmp_path):
    import mnist_data

    _, _, files = small_set(tmp_path)
    name = next(iter(files))
    files[name] = "0" * 32
    with pytest.raises(mnist_data.DataError, match="checksum mismatch"):
        mnist_data.load_split(tmp_path, files, fetch=False)


def test_truncated_and_foreign_files_are_refused(tmp_path):
    import mnist_data
    import torch

    (tmp_path / "junk").write_bytes(b"hello world")
    with pytest.raises(mnist_data.DataError, match="bad magic"):
        mnist_data.read_idx(tmp_path / "junk")
    images = torch.zeros(4, 28, 28, dtype=torch.uint8)
    write_idx(tmp_path / "short", images, 0x08, gz=False)
    (tmp_path / "short").write_bytes((tmp_path / "short").read_bytes()[:-10])
    with pytest.raises(mnist_data.DataError, match="expected 3136 bytes"):
        mnist_data.read_idx(tmp_path / "short")


def test_missing_files_without_network_give_a_clear_error(tmp_path):
    import mnist_data

    # a closed loopback port stands in for an unreachable mirror
    with pytest.raises(mnist_data.DataError, match="cannot download .* --data synthetic"):
        mnist_data.download("train-images-idx3-ubyte.gz", tmp_path / "x.gz",
                            mirrors=("http://127.0.0.1:9/",), timeout=2)
    assert not list(tmp_path.iterdir())  # no partial file left behind


def test_synthetic_data_is_mnist_shaped_and_learnable():
    import mnist_data

    split = mnist_data.synthetic(n=100, seed=1)
    assert split.images.shape == (100, 1, 28, 28) and split.labels.max() < 10
    # the class decides where the bright block is: two samples of one class share it
    same = (split.labels == split.labels[0]).nonzero().flatten()[:2]
    if len(same) == 2:
        a, b = split.images[same[0], 0], split.images[same[1], 0]
        assert ((a > 2) & (b > 2)).sum() >= 32


def test_a_two_process_run_reads_idx_files_prints_progress_from_rank_0_and_profiles_each_rank(tmp_path):
    """One two-process torchrun of the MNIST workload serves three checks, each needing a
    run of two ranks: unpacked IDX files in --data DIR are read by every rank; the progress
    line comes from rank 0 only (torchrun's --tee keeps each rank's stdout apart); --profile
    writes a TensorBoard trace per rank and names its folder in the record. (The record of
    mnist-ddp at 2 processes as gpubench writes it: tests/cli/test_progress_demo.py.)"""
    import torch

    import json
    import os
    import subprocess

    # 3,840 samples: one epoch over 2 ranks at the default 64 per rank is 30 steps, the
    # run long enough for the progress line (at most one each 0.5 s) to be due
    data = tmp_path / "data"
    data.mkdir()
    images = torch.randint(0, 256, (3840, 28, 28), dtype=torch.uint8)
    labels = torch.randint(0, 10, (3840,), dtype=torch.uint8)
    write_idx(data / "train-images-idx3-ubyte", images, 0x08, gz=False)
    write_idx(data / "train-labels-idx1-ubyte", labels, 0x08, gz=False)
    record_file, traces, logs = tmp_path / "rec.json", tmp_path / "traces", tmp_path / "logs"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "--tee=3", f"--log-dir={logs}", str(REPO / "workloads" / "mnist_ddp.py"), "--data", str(data),
         "--warmup", "1", "--profile", str(traces), "--record-file", str(record_file)],
        capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads(record_file.read_text())
    # IDX files: one epoch of 3,840 samples over 2 ranks at 64 per rank: 30 steps
    assert record["epoch_samples"] == 3840 and record["steps_per_epoch"] == 30 and record["steps"] == 30

    # the progress line: from rank 0 only
    by_rank = {int(p.parent.name): p.read_text() for p in logs.rglob("stdout.log")}
    assert sorted(by_rank) == [0, 1]
    assert "GPUBENCH_PROGRESS" in by_rank[0]
    assert "GPUBENCH_PROGRESS" not in by_rank[1]

    # --profile: a trace from each rank, and the record says where
    assert record["profile_dir"] == str(traces)
    files = sorted(p.name.split(".")[0] for p in traces.glob("*.pt.trace.json"))
    assert files == ["rank0", "rank1"]
    trace = json.loads(next(traces.glob("rank1.*.pt.trace.json")).read_text())
    assert trace["traceEvents"]
