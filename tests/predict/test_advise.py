"""Predictions for offers: which input wins, what an unknown GPU gives, what a slower
link or more machines do to the figure, and the ranking and its front."""

from __future__ import annotations

import pytest

from gpubench.predict import basis
from gpubench.predict.advise import (NO_BASIS, NO_FIT, Config, Work, advice, cheapest_of_each, configs, mark_pareto,
                                     predict, ranked)
from gpubench.predict.model import DATASHEET, MEASURED, MODELLED, SCALED
from gpubench.predict.subject import NoSubject, suite_subject, work_for
from gpubench.predict.words import advice_sentence
from gpubench.providers.common import Offer

EPOCH = Work(1_281_167, "1 epoch")


def offer(gpu="H100 SXM", count=1, price=2.5, provider="vast", **extra) -> Offer:
    return Offer(provider, f"{gpu}-{count}-{price}", gpu, count, price, extra=extra)


def record(gpu="H100 SXM", throughput=2000.0, device="cuda", count=1, **more) -> dict:
    return {"workload": "resnet-ddp", "workload_args": [], "precision": "fp32", "status": "ok",
            "gpu_name": gpu, "gpu_count": count, "nodes": 1, "device": device,
            "throughput": throughput, "batch_per_gpu": 256, **more}


def one(gpu="H100 SXM", records=(), count=1, nodes=1, **extra):
    subject = suite_subject("resnet-ddp", (), list(records))
    o = offer(gpu, count, **extra)
    return predict(subject, Config(o, count * nodes, nodes, o.price_per_hour * nodes), list(records), EPOCH)


def test_a_measured_record_on_that_gpu_type_beats_the_step_model():
    modelled = one("H100 SXM")
    assert modelled.basis == MODELLED and modelled.sources[0].startswith("modelled: resnet-ddp")
    measured = one("H100 SXM", [record(throughput=2000.0, workload_args=["--steps", "30"])])
    assert measured.basis == MEASURED          # a run's length does not make it another configuration
    assert measured.throughput == pytest.approx(2000.0)
    assert measured.uncertainty < modelled.uncertainty


def test_a_cpu_standing_in_for_the_gpu_is_never_taken_for_it():
    mock = one("H100 SXM", [record(throughput=12.0, device="cpu"), record(throughput=15.0, mock_instance=True)])
    assert mock.basis == MODELLED


def test_without_a_step_profile_or_a_record_the_nearest_measured_type_is_scaled():
    args = ("--width", "32")          # a ResNet no step profile was counted for
    records = [record("A100 SXM", throughput=1000.0, workload_args=list(args), grad_bytes=26_000_000)]
    subject = suite_subject("resnet-ddp", args, records)
    p = predict(subject, Config(offer("L40S"), 1, 1, 2.5), records, EPOCH)
    assert p.basis == SCALED and "A100 SXM" in p.sources[0]
    # the tf32 peaks' ratio (L40S 183 against A100 156): about 1.17x the A100's figure
    assert 1.0 < p.throughput / 1000.0 < 1.4


def test_a_workload_at_another_size_is_never_given_a_published_figure():
    args = ("--width", "32")
    records = [record("A100 SXM", throughput=3000.0, workload_args=list(args), grad_bytes=26_000_000)]
    subject = suite_subject("resnet-ddp", args, records)
    assert not subject.published_ok and subject.profile is None
    p = predict(subject, Config(offer("H100 SXM"), 1, 1, 2.5), records, EPOCH)
    assert p.basis == SCALED          # from the A100 record of that size, not Lambda's ResNet-50


def test_an_unknown_gpu_type_is_no_basis_never_a_made_up_figure():
    p = one("Quantum Accelerator 9000")
    assert p.basis == NO_BASIS and p.throughput is None and p.dollars is None
    assert "no basis" in p.left_out


def test_with_nothing_measured_or_published_the_counted_flops_meet_the_datasheet():
    profile = suite_subject("resnet-ddp", (), []).profile
    figure = basis.seconds_per_unit(profile, "resnet-ddp", ("--width", "32"), "fp32", "RTX 3090", [],
                                    published_ok=False)
    assert figure.basis == DATASHEET and "GFLOP per image" in figure.source
    # 24.3 GFLOP an image at 35% of the 3090's 35.6 TFLOP/s tf32 peak
    assert figure.value == pytest.approx(profile.flops_per_sample / (35.6e12 * basis.ASSUMED_MFU), rel=0.01)
    assert basis.seconds_per_unit(None, "resnet-ddp", ("--width", "32"), "fp32", "RTX 3090", [], False) is None


def test_nvlink_machines_scale_better_than_pcie_ones_and_a_slow_network_worst():
    nvlink = one("H100 SXM", count=8)
    pcie = one("H100 PCIe", count=8)
    assert nvlink.efficiency >= pcie.efficiency
    fast = one("H100 SXM", count=8, nodes=2, inet_up=100_000.0, inet_down=100_000.0)
    slow = one("H100 SXM", count=8, nodes=2, inet_up=95.0, inet_down=95.0)
    assert slow.speedup < fast.speedup
    assert "inet_up 95" in " ".join(slow.sources)


def test_gpt_over_a_95_mbit_link_runs_slower_on_two_nodes_than_on_one():
    subject = suite_subject("gpt-ddp", (), [])
    o = offer("RTX 4090", 1, 0.4, inet_up=95.0, inet_down=95.0)
    two = predict(subject, Config(o, 2, 2, 0.8), [], Work(1e9, "1e9 tokens"))
    assert two.speedup < 1.0 and two.bound_by == "communication"


def test_counts_any_count_providers_are_tried_at_each_count_asked_and_priced_per_gpu():
    runpod = offer("H100 SXM", 1, 2.5, provider="runpod", max_count=4)
    vast = offer("H100 SXM", 8, 20.0)
    found = configs([runpod, vast], [1, 2, 8], [1])
    assert [(c.offer.provider, c.gpus, c.price_per_hour) for c in found] == [
        ("runpod", 1, 2.5), ("runpod", 2, 5.0), ("vast", 8, 20.0)]
    two_nodes = configs([vast], None, [2])
    assert [(c.gpus, c.nodes, c.price_per_hour) for c in two_nodes] == [(16, 2, 40.0)]


def test_the_cheapest_offer_of_each_type_and_size_stands_for_the_others():
    kept, folded = cheapest_of_each(configs([offer(price=3.0), offer(price=2.5), offer(count=2, price=5.0)],
                                            None, [1]))
    assert folded == 1 and sorted(c.price_per_hour for c in kept) == [2.5, 5.0]


def test_ranked_by_cost_with_the_front_marked_and_advice_in_one_sentence():
    subject = suite_subject("resnet-ddp", (), [])
    offers = [offer("H100 SXM", 1, 2.5), offer("H100 SXM", 8, 20.0), offer("RTX 4090", 1, 0.35),
              offer("A100 SXM", 1, 5.0), offer("Quantum 9000", 1, 0.01)]
    predictions = ranked(mark_pareto([predict(subject, c, [], EPOCH) for c in configs(offers, None, [1])]))
    priced = [p for p in predictions if p.has_figure]
    assert [p.dollars for p in priced] == sorted(p.dollars for p in priced)
    assert not predictions[-1].has_figure                      # no basis: last, no figure
    front = [p for p in priced if p.pareto]
    assert front and all(not any(q.seconds <= p.seconds and q.dollars < p.dollars for q in priced) for p in front)
    a100 = next(p for p in priced if p.config.offer.gpu_name == "A100 SXM")
    assert not a100.pareto                  # dearer and slower than an H100 at half its price
    a = advice(predictions, deadline_s=10 * 60)
    text = advice_sentence(a, EPOCH)
    # 1x and 8x H100 cost the same for the epoch: a tie, said as one
    assert a.tied_cheapest == 1 and text.startswith("Cheapest (tied at $")
    assert f" with 1 other): {a.cheapest.config.label}" in text
    assert "fastest: 8x H100 SXM on vast" in text and text.endswith(".")
    assert "within 10 min" in text


def test_a_budget_below_every_configuration_is_said_plainly():
    subject = suite_subject("resnet-ddp", (), [])
    predictions = [predict(subject, c, [], EPOCH) for c in configs([offer()], None, [1])]
    assert advice_sentence(advice(predictions, budget=0.001), EPOCH) == \
        "No configuration can be predicted within the budget of $0.0010."


def test_work_is_an_epoch_of_the_workload_or_the_samples_asked_for():
    subject = suite_subject("gpt-ddp", (), [])
    assert subject.unit == "tokens/s" and subject.batch_per_gpu == 8 * 1024
    assert work_for(subject, None, None).units == subject.profile.epoch_samples
    assert work_for(subject, 2, None).units == 2 * subject.profile.epoch_samples
    assert work_for(subject, None, 1e6).what == "1,000,000 tokens"


def test_an_unknown_size_with_no_record_is_one_line():
    with pytest.raises(NoSubject, match="no profile at these arguments and no record of them"):
        suite_subject("resnet-ddp", ("--width", "7"), [])


GPT_1_3B = ("--n-layer", "24", "--n-head", "32", "--n-embd", "2048", "--precision", "bf16")


def test_an_offer_too_small_for_the_model_is_left_out_with_the_reason():
    subject = suite_subject("gpt-ddp", GPT_1_3B, [])
    assert subject.shape.params == pytest.approx(1.3e9, rel=0.05) and subject.strategy == "DDP"
    small = predict(subject, Config(offer("RTX 4090", 2, vram_gb=24), 2, 1, 0.8), [], EPOCH)
    assert small.basis == NO_FIT and small.throughput is None
    # 1.313e9 parameters: 4 bytes each, 4 of gradient, 8 of AdamW's moments, 4 of DDP's buckets
    assert small.left_out.startswith("1.3B with AdamW under DDP needs about 26 GB a GPU plus 2.4 GB a sequence")
    assert "this card has 24 GB: not even the model fits; FSDP over 2 GPUs" in small.left_out
    # one GPU trains the model alone, without DDP's buckets
    alone = predict(subject, Config(offer("RTX 4090", 1, vram_gb=24), 1, 1, 0.4), [], EPOCH)
    assert alone.left_out.startswith("1.3B with AdamW on one GPU needs about 21 GB a GPU plus 2.4 GB a sequence")
    assert alone.left_out.endswith("this card has 24 GB: batch 1 at most (asked 8)")
    assert predict(subject, Config(offer("H100 SXM", 1), 1, 1, 2.5), [], EPOCH).has_figure   # 80 GB
    forty = predict(subject, Config(offer("A100 PCIe", 1, vram_gb=40), 1, 1, 1.0), [], EPOCH)
    assert forty.basis == NO_FIT and forty.left_out.endswith("this card has 40 GB: batch 7 at most (asked 8)")
    one_sequence = suite_subject("gpt-ddp", GPT_1_3B + ("--batch-size", "1"), [])
    assert predict(one_sequence, Config(offer("H100 SXM"), 1, 1, 2.5), [], EPOCH).has_figure


def test_where_ddp_cannot_fit_the_reason_says_what_fsdp_would_need():
    subject = suite_subject("gpt-ddp", GPT_1_3B + ("--batch-size", "1"), [])
    eight = predict(subject, Config(offer("RTX 4090", 8, vram_gb=24), 8, 1, 3.2), [], EPOCH)
    assert "under DDP needs about 26 GB" in eight.left_out
    assert eight.left_out.endswith("; FSDP over 8 GPUs would need about 2.7 GB a GPU plus activations (gpt-fsdp)")
    # 16 bytes of each of the 1.313e9 parameters over 8 = 2.6 GB, plus the blocks gathered in bf16


def test_gpt_fsdp_fits_where_ddp_does_not_once_it_is_sharded_over_enough_gpus():
    args = ("--params", "1.3B", "--precision", "bf16", "--batch-size", "1")
    subject = suite_subject("gpt-fsdp", args, [])
    assert subject.strategy == "FSDP" and subject.shape.block_params == 12 * 2048 ** 2 + 2 * 2048
    four = suite_subject("gpt-fsdp", args[:-1] + ("4",), [])
    alone = predict(four, Config(offer("RTX 4090", 1, vram_gb=24), 1, 1, 0.4), [], EPOCH)
    assert alone.basis == NO_FIT and "under FSDP over 1 GPU needs about 21 GB" in alone.left_out
    assert alone.left_out.endswith("batch 2 at most (asked 4)")
    eight = predict(subject, Config(offer("RTX 4090", 8, vram_gb=24), 8, 1, 3.2), [], EPOCH)
    assert eight.has_figure
    checkpointed = suite_subject("gpt-fsdp", args + ("--activation-checkpointing",), [])
    assert checkpointed.activations.value < subject.activations.value / 5
    assert checkpointed.profile.flops_per_sample == pytest.approx(subject.profile.flops_per_sample * 4 / 3)


def test_fsdp_sends_what_ddp_sends_in_bf16_and_half_as_much_again_in_fp32():
    """Two all-gathers of the parameters at the compute precision and one reduce-scatter
    of fp32 gradients, against DDP's all-reduce of the fp32 gradients (2 x 4 bytes)."""
    bf16 = ("--params", "1.3B", "--precision", "bf16")
    ddp, fsdp = suite_subject("gpt-ddp", bf16, []), suite_subject("gpt-fsdp", bf16, [])
    assert fsdp.grad_bytes.value == pytest.approx(ddp.grad_bytes.value)
    fp32 = ("--params", "1.3B", "--precision", "fp32")
    assert suite_subject("gpt-fsdp", fp32, []).grad_bytes.value == pytest.approx(
        1.5 * suite_subject("gpt-ddp", fp32, []).grad_bytes.value)


def test_where_ddp_cannot_fit_the_same_model_is_predicted_under_fsdp():
    from gpubench.predict.advise import fsdp_where_ddp_cannot_fit
    from gpubench.predict.subject import sharded_subject

    subject = suite_subject("gpt-ddp", GPT_1_3B + ("--batch-size", "1"), [])
    one, eight = (predict(subject, Config(offer("RTX 4090", n, vram_gb=24), n, 1, 0.4 * n), [], EPOCH)
                  for n in (1, 8))
    h100 = predict(subject, Config(offer("H100 SXM"), 1, 1, 2.5), [], EPOCH)
    again = fsdp_where_ddp_cannot_fit([one, eight, h100], sharded_subject(subject, []), [], EPOCH)
    assert [(p.strategy, p.config.gpus) for p in again] == [("FSDP", 8)]   # 1 GPU: nothing to shard over
    assert again[0].has_figure and eight.strategy == "DDP"
    assert sharded_subject(suite_subject("resnet-ddp", (), []), []) is None
