"""Model shapes, data parsing and the harness pieces, in-process and without a GPU."""

from __future__ import annotations

import time

import pytest

# torch, and the workloads that import it, are imported by the tests that use them, not at
# collection: importing torch costs every test worker seconds, in the fast lane too


@pytest.mark.slow
def test_resnet50_has_torchvisions_parameter_count():
    import resnet_ddp
    import torch

    with torch.device("meta"):
        assert sum(p.numel() for p in resnet_ddp.ResNet(50).parameters()) == 25_557_032
        assert sum(p.numel() for p in resnet_ddp.ResNet(18).parameters()) == 11_689_512


@pytest.mark.slow
def test_gpt2_small_parameter_count_and_flops():
    import gpt_ddp
    import metrics
    import torch

    with torch.device("meta"):
        model = gpt_ddp.GPT(gpt_ddp.GPTConfig())
    assert model.num_params() == 123_587_328  # the hand count in test_workload_metrics
    assert model.num_params(non_embedding=False) == 123_587_328 + 1024 * 768
    assert metrics.gpt_flops_per_token(model.num_params(), 12, 12, 64, 1024) == 854_770_176


@pytest.mark.slow
def test_tiny_gpt_trains_on_cpu():
    import gpt_ddp
    import torch

    torch.manual_seed(0)
    cfg = gpt_ddp.GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=16)
    model = gpt_ddp.GPT(cfg)
    idx = torch.randint(0, 64, (2, 17))
    loss = model(idx[:, :-1], idx[:, 1:])
    assert abs(loss.item() - torch.log(torch.tensor(64.0)).item()) < 0.5  # ~uniform at init
    loss.backward()
    assert model.wte.weight.grad is not None  # tied with lm_head


@pytest.mark.slow
def test_movielens_csv_dat_and_directory(tmp_path):
    import recsys_ddp

    csv = tmp_path / "ratings.csv"
    csv.write_text("userId,movieId,rating,timestamp\n1,10,4.0,1\n1,30,3.5,2\n7,10,5.0,3\n")
    data = recsys_ddp.load_ratings(str(tmp_path))
    assert (data.n_users, data.n_movies, len(data)) == (2, 2, 3)
    assert data.users.tolist() == [0, 0, 1] and data.movies.tolist() == [0, 1, 0]
    assert data.ratings.tolist() == [4.0, 3.5, 5.0]

    dat = tmp_path / "ml-1m" / "ratings.dat"
    dat.parent.mkdir()
    dat.write_text("1::1193::5::978300760\n1::661::3::978302109\n2::914::3::978301968\n")
    data = recsys_ddp.load_ratings(str(dat))
    assert (data.n_users, data.n_movies, len(data)) == (2, 3, 3)
    assert data.ratings.tolist() == [5.0, 3.0, 3.0]


def test_movielens_bad_input_is_a_data_error(tmp_path):
    import recsys_ddp
    import pytest

    for path in (tmp_path / "absent", tmp_path):
        with pytest.raises(recsys_ddp.DataError):
            recsys_ddp.load_ratings(str(path))
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating,timestamp\nnot,a,number,x\n")
    with pytest.raises(recsys_ddp.DataError, match="not a MovieLens ratings file"):
        recsys_ddp.load_ratings(str(tmp_path))


@pytest.mark.slow
def test_synthetic_movielens_shape():
    import recsys_ddp

    data = recsys_ddp.synthetic_ratings("ml-latest-small", seed=0)
    assert (data.n_users, data.n_movies, len(data)) == (610, 9_742, 100_836)
    assert data.users.max() < 610 and data.movies.max() < 9_742
    assert 0.5 <= data.ratings.min() and data.ratings.max() <= 5.0


def test_allreduce_sizes_double_and_respect_the_caps():
    import allreduce

    assert allreduce.message_sizes(1024, 8192, 1 << 40) == [1024, 2048, 4096, 8192]
    assert allreduce.message_sizes(1024, 1 << 30, 5000) == [1024, 2048, 4096]
    sizes = allreduce.message_sizes(1 << 10, 1 << 30, 1 << 40)
    assert len(sizes) == 21 and sizes[-1] == 1 << 30  # nccl-tests -b 1K -e 1G -f 2


def test_gpu_monitor_mean_and_peak_from_samples():
    import harness

    readings = iter([(50.0, 1e9, 100.0), (70.0, 3e9, None), (90.0, 2e9, 300.0)])
    monitor = harness.GpuMonitor(lambda: next(readings), "nvml", interval=0.0)
    for _ in range(3):
        monitor.samples.append(monitor._read())
    assert monitor.local_summary() == [70.0, 90.0, 2e9, 3e9, 200.0, 300.0]


def test_gpu_monitor_thread_samples_until_stopped():
    import harness

    monitor = harness.GpuMonitor(lambda: (1.0, 2.0, 3.0), "nvml", interval=0.001)
    monitor.start()
    deadline = time.monotonic() + 10.0
    for _ in range(10_000):  # bounded in count and in time: a dead thread fails, never hangs
        if len(monitor.samples) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    monitor.stop()
    n = len(monitor.samples)
    assert n >= 3 and monitor._thread is None
    time.sleep(50 * monitor.interval)
    assert len(monitor.samples) == n  # stopped: no sample since


def test_gpu_monitor_is_off_without_a_gpu():
    import harness
    import torch

    monitor = harness.GpuMonitor.for_device(torch.device("cpu"))
    monitor.start()
    monitor.stop()
    assert monitor.status == "off: no CUDA device" and monitor.samples == []
