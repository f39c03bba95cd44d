"""The step model on the measured GPU runs: its fit, its leave-one-out accuracy, its
memory a GPU, and what it says of cards it was not fitted on."""

from __future__ import annotations

import math

import pytest

from gpubench.predict import fit, ops
from gpubench.predict.advise import Config, Work, predict
from gpubench.predict.subject import suite_subject
from gpubench.predict.verdict import interval_text
from gpubench.providers.common import Offer


@pytest.fixture(scope="module")
def points():
    found = fit.points(fit.reference_records())
    assert len(found) >= 15, "the H200 reference records are where the model is fitted"
    return found


def test_the_shipped_constants_are_the_fit_of_the_shipped_reference_records(points):
    """step_constants.json is written by `python -m gpubench.predict.fit --write`: a changed
    record, profile or model without a new fit fails here."""
    shipped = ops.load_constants()
    fitted = fit.fit(points, shipped, fit.reference_ceilings())   # the optimum it was fitted to does not move
    for name in ops.FITTED:
        assert getattr(shipped, name) == pytest.approx(getattr(fitted, name), rel=1e-3), name
    assert set(shipped.fitted_on) == {p.label for p in points}


def test_the_fitted_model_explains_each_measurement_by_what_bounds_it(points):
    c = ops.load_constants()
    by_label = {p.label: fit.predicted(p, c) for p in points}
    for p in points:
        e = by_label[p.label]
        assert abs(math.log(e.throughput / p.throughput)) < math.log(1.6), p.label
    # the suite's small models wait on the host; ResNet-50 on memory; a compiled GPT on compute
    assert by_label["mnist-ddp --batch-size 512 on H200 SXM"].bound_by == "host"
    assert by_label["resnet-ddp --precision fp32 on H200 SXM"].bound_by == "memory"
    assert by_label["gpt-ddp --compile --precision bf16 on H200 SXM"].bound_by == "compute"
    # its physical constants stay physical: a share of the peaks, microseconds a kernel
    assert 0.3 < c.e_flop <= 1.0 and 0.2 < c.e_bw <= 1.0 and 1e-6 < c.host_per_kernel < 2e-4


@pytest.mark.slow
def test_left_out_each_measured_configuration_is_predicted_within_the_targets(points):
    checks = fit.leave_one_out(points, anchors=fit.reference_ceilings())
    s = fit.summary(checks)
    assert s["median_error"] <= 0.15
    assert s["inside"] == s["of"] == len(points)
    for c in checks:          # memory a GPU within 25% of every measured peak
        if c.measured_memory:
            assert abs(c.memory_error) <= 0.25, c.label


def test_an_h100_sxm_is_predicted_faster_than_an_l40s_on_resnet_50_in_bf16():
    """Scaling by the tensor peak alone put an L40S above an H100 SXM; ResNet-50's step is
    bound by memory traffic, where the H100's 3.35 TB/s beats the L40S's 0.86."""
    subject = suite_subject("resnet-ddp", ("--precision", "bf16"), [])
    rates = {gpu: predict(subject, Config(Offer("x", gpu, gpu, 1, 1.0), 1, 1, 1.0), [], Work(1e6, "x")).throughput
             for gpu in ("H100 SXM", "L40S", "A100 SXM")}
    assert rates["H100 SXM"] > rates["A100 SXM"] > rates["L40S"]


def test_memory_a_gpu_grows_with_the_batch_and_shrinks_with_fsdp_shards():
    config = ops.config_for("gpt-fsdp", ["--params", "1.3B", "--precision", "bf16", "--batch-size", "4"])
    one, eight = ops.memory_at(config, 4, 1), ops.memory_at(config, 4, 8)
    assert eight < one / 2
    assert ops.memory_at(config, 8, 1) > one
    checkpointed = ops.config_for("gpt-fsdp", ["--params", "1.3B", "--precision", "bf16", "--batch-size", "4",
                                               "--activation-checkpointing"])
    assert ops.memory_at(checkpointed, 4, 1) < one


def test_arguments_no_step_profile_covers_have_no_modelled_figure():
    assert ops.config_for("resnet-ddp", ["--width", "32"]) is None
    assert ops.config_for("gpt-ddp", ["--n-layer", "3"]) is None
    assert ops.modelled("resnet-ddp", [], "Quantum 9000") is None
    assert ops.modelled("resnet-ddp", ["--precision", "bf16"], "V100 SXM") is None   # no bf16 tensor cores


def test_an_interval_says_which_side_is_wider():
    assert interval_text(100.0, 80.0, 125.0) == "-20%/+25%"
    assert interval_text(100.0, 90.0, 110.0) == "±10%"


def test_a_suite_workload_at_another_batch_is_predicted_from_its_step_profile():
    """No FLOP profile was shipped for ResNet-50 at a batch of 128; its step profile holds
    every batch: the FLOPs a unit of work are the same, the step's time is not."""
    subject = suite_subject("resnet-ddp", ("--precision", "bf16", "--batch-size", "128"), [])
    assert subject.profile.batch_per_gpu == 128
    assert subject.profile.flops_per_sample == pytest.approx(
        suite_subject("resnet-ddp", (), []).profile.flops_per_sample, rel=0.01)
    small, large = (predict(suite_subject("resnet-ddp", ("--precision", "bf16", "--batch-size", b), []),
                            Config(Offer("x", "H200", "H200", 1, 1.0), 1, 1, 1.0), [], Work(1e6, "x"))
                    for b in ("64", "256"))
    assert small.basis == large.basis == "modelled" and small.throughput < large.throughput


def test_a_narrow_matrix_product_reaches_less_of_the_peak_than_a_square_one_and_a_geforce_loses_less():
    """A product's math and one pass of its operands add: GPT-2 small's 768-wide matrices on
    an H200 reach well under the rate of a large square product, which the fit holds to the
    card's measured ceiling; a card whose ridge point is low (a GeForce) loses less."""
    c = ops.load_constants()

    def share(m: int, k: int, n: int, gpu: str) -> float:
        rates = ops.Rates.of(ops.gpu_specs.spec_for(gpu))
        flops, nbytes = 2.0 * m * k * n, 2.0 * (m * k + k * n + m * n)
        return flops / ops.compute_seconds(flops, nbytes, rates.bf16, c.e_bw * rates.bandwidth, c.e_flop) / rates.bf16

    square, narrow = share(8192, 8192, 8192, "H200 SXM"), share(8192, 768, 768, "H200 SXM")
    assert square == pytest.approx(789.2 / 989, rel=0.05)     # device-ceilings.json, the H200's bf16 8192^3
    assert narrow < 0.75 * square
    assert share(8192, 768, 768, "RTX 4090") > narrow


def test_a_larger_gpt_reaches_more_of_the_peak_than_gpt_2_small():
    """The transformers the fit did not see were predicted a fifth slow: one share of the
    peak for every product, fitted where GPT-2 small's narrow ones set it."""
    c = ops.load_constants()
    rates = ops.Rates.of(ops.gpu_specs.spec_for("H200 SXM"))

    def mfu(params: str) -> float:
        config = ops.config_for("gpt-ddp", ["--params", params, "--precision", "bf16", "--batch-size", "8"])
        profile = ops.profile_for(config)
        e = ops.estimate(config, profile, rates, c)
        flops = sum(r.count * r.at(config.batch)[0] for r in profile.rows)
        return flops / e.flop_s / rates.bf16

    assert mfu("125M") < mfu("760M") < mfu("1.3B")


def test_a_step_ends_no_sooner_than_its_forward_on_the_host_then_the_rest_on_the_device():
    """The host issues into a queue the device drains: a forward the host holds back and a
    backward the device takes long over do not overlap each other."""
    assert ops.queued([10.0, 1.0], [1.0, 10.0], 50.0) == pytest.approx(20.0, rel=0.01)
    assert ops.queued([10.0, 10.0], [1.0, 1.0], 50.0) == pytest.approx(20.0, rel=0.01)
    balanced = ops.queued([5.0, 5.0], [5.0, 5.0], 3.0)
    assert 10.0 < balanced < 20.0     # even turns: softened where host and device are close


def test_a_card_without_tf32_runs_an_fp32_resnet_on_its_fp32_cores():
    assert ops.modelled("resnet-ddp", ["--precision", "fp32", "--batch-size", "64"], "V100 SXM", 16) is not None


def test_intervals_come_from_each_family_and_widen_on_cards_outside_the_fit():
    c = ops.load_constants()
    families = dict(c.family_error)
    assert {"gpt-ddp", "gpt-fsdp", "resnet-ddp", "mnist-ddp", "recsys-ddp"} <= set(families)
    assert families["gpt-fsdp"] > families["gpt-ddp"]
    h200 = ops.modelled("resnet-ddp", ["--precision", "bf16"], "H200 SXM").seconds_per_unit.uncertainty
    a100 = ops.modelled("resnet-ddp", ["--precision", "bf16"], "A100 SXM", 80).seconds_per_unit.uncertainty
    rtx = ops.modelled("resnet-ddp", ["--precision", "bf16"], "RTX 4090").seconds_per_unit.uncertainty
    assert h200 < a100 < rtx


def test_published_runs_of_other_cards_fall_inside_their_intervals():
    """Each card's published throughput over its series' anchor card, against the model's
    ratio for the suite's equivalent run: inside the interval the answer on that card
    gives (the card's spread, by its kind of memory, beside the family's)."""
    from gpubench.predict import published

    c = ops.load_constants()
    checks = published.card_checks(c)
    assert {k.gpu for k in checks} >= {"H100 SXM", "V100 SXM", "RTX 3090", "RTX 4090", "A10"}
    for k in checks:
        spread = c.card_spread(ops.gpu_specs.spec_for(k.gpu))
        assert k.error <= spread + 1e-9, (k.series, k.gpu)
