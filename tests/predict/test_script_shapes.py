"""Scripts as people write them, calibrated at the GPU count asked (one small script of
each shape, tests/fixtures/shapes/shapes.py): one that needs two GPUs and divides its
accumulation by the world, a GAN, a time-major LSTM, a hand-written update, a transform
module before the model, DataParallel; and advise counting each GPU count it ranks."""

from __future__ import annotations

import json

import pytest

from gpubench.predict import calibrate
from gpubench.predict.calibrate import CalibrationError
from tests.helpers import REPO
from tests.predict.test_calibrate import script

SHAPES = REPO / "tests" / "fixtures" / "shapes" / "shapes.py"


@pytest.mark.slow
def test_each_shape_is_counted_as_the_world_asked_runs_it(tmp_path, monkeypatch, cli):
    ref = script(tmp_path, monkeypatch, SHAPES.read_text())
    said = []

    def counted(shape: str, gpus: int = 1):
        return calibrate.calibration_for(ref, ("--shape", shape), said.append, (gpus, 1))

    # it checks for two GPUs: at one it says so itself; at 2 and 8 each rank runs 8/world
    # micro-batches of 4 (its DistributedSampler's share), and saves the whole model
    with pytest.raises(CalibrationError, match="needs at least 2 GPUs"):
        counted("world")
    at_two, at_eight = counted("world", 2), counted("world", 8)
    assert (at_two.samples, at_two.world, at_eight.samples, at_eight.world) == (16, 2, 4, 8)
    assert "as rank 0 of 8 GPUs" in said[-2]
    # the answer at 8 GPUs, from the calibration at 8 (kept: this run reuses it)
    code, out, err = cli("predict", str(ref.script), "--gpu", "H200 SXM", "--gpus", "8", "--format", "json",
                         "--", "--shape", "world")
    assert code == 0, err
    (answer,) = json.loads(out)
    assert answer["gpus"] == 8 and any("as rank 0 of 8 GPUs" in s for s in answer["sources"])

    gan = counted("gan")   # the discriminator runs three times on one batch of 64
    assert gan.samples == 64
    with pytest.raises(CalibrationError, match="forms no process group .* at 2 GPUs each of its processes would "
                                               "train the whole model alone"):
        counted("gan", 2)
    lstm = counted("lstm")   # (35, 20) token ids, time-major: 20 sequences of 35 tokens
    assert (lstm.samples, lstm.tokens) == (20, 700)
    manual = counted("manual")   # no optimizer: its backward passes end its steps
    assert (manual.step_kind, manual.samples, manual.optimizer) == ("backward", 20, None)
    assert counted("transform").samples == 32   # the model, not the transform run once before it
    assert counted("dp").data_parallel   # one GPU: the module it wraps
    with pytest.raises(CalibrationError, match="nn.DataParallel: one process driving 4 GPUs"):
        counted("dp", 4)


@pytest.mark.slow
def test_a_suite_workload_at_arguments_it_has_no_profile_of_is_counted_not_refused(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # the calibration's run starts here: its files are moved aside here
    code, out, err = cli("predict", "resnet-ddp", "--gpu", "H200", "--gpus", "2", "--format", "json", "--",
                         "--depth", "18", "--width", "8", "--image-size", "32", "--batch-size", "4")
    assert code == 0, err
    assert "no profile at these arguments" in err and "counting it on this machine's CPU instead" in err
    (answer,) = json.loads(out)
    assert answer["throughput"] > 0 and answer["basis"] == "modelled"


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


@pytest.mark.slow
def test_advise_counts_the_script_at_each_gpu_count_it_ranks(tmp_path, monkeypatch, cli, cloud):
    """The script that needs two GPUs and divides its 8 micro-batches by the world, advised
    at 1, 2 and 4 GPUs: left out at 1 with its own words, counted as rank 0 of 2 (16
    samples a GPU step) and of 4 (8) for those counts, each calibration kept per world."""
    ref = script(tmp_path, monkeypatch, SHAPES.read_text())
    code, out, err = cli("advise", str(ref.script), "--gpus", "1,2,4", "--limit", "0", "--format", "json",
                         "--results", str(tmp_path / "results"), "--", "--shape", "world")
    assert code == 0, err
    rows = json.loads(out)["predictions"]
    assert {r["gpus"] for r in rows if r["throughput"]} == {2, 4}
    assert all("needs at least 2 GPUs" in r["left_out"] for r in rows if r["gpus"] == 1)
    kept = {n: calibrate.cached(calibrate.cache_key(ref, ("--shape", "world"), (n, 1))) for n in (2, 4)}
    assert (kept[2].samples, kept[4].samples) == (16, 8)
    four = next(r for r in rows if r["gpus"] == 4 and r["throughput"])
    assert any("as rank 0 of 4 GPUs" in s for s in four["sources"])
