"""gpt-fsdp: gpt-ddp's GPT under FSDP2 (fully_shard per block and the root). Its records
say it is sharded and each process holds half the parameter bytes at 2 processes (a
check on the sharding, not a timing); --params names the GPT-3 paper's sizes.

torch is imported inside the slow tests only (through the workloads the sweep runs)."""

from __future__ import annotations

import pytest

import flags
from tests.workloads.test_workload_runs import check_record

TINY = ["--steps", "3", "--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
        "--vocab-size", "64", "--batch-size", "2"]
# 2 blocks of 12*16^2 + 2*16, the final LayerNorm 16, wte 64*16 (tied to lm_head), wpe 16*16
TINY_PARAMS = 2 * (12 * 16 * 16 + 2 * 16) + 16 + 64 * 16 + 16 * 16


def test_params_names_the_gpt3_sizes_and_explicit_flags_win():
    args = flags.parse("gpt-fsdp", ["--params", "1.3B"])
    assert (args.n_layer, args.n_head, args.n_embd, args.params) == (24, 32, 2048, "1.3B")
    mixed = flags.parse("gpt-fsdp", ["--params", "1.3B", "--n-layer", "2"])
    assert (mixed.n_layer, mixed.n_head, mixed.n_embd, mixed.params) == (2, 32, 2048, None)
    default = flags.parse("gpt-fsdp", [])  # 125M: GPT-2 small, gpt-ddp's default
    assert vars(default) == vars(flags.parse("gpt-fsdp", ["--params", "125M"]))
    assert (default.n_layer, default.n_head, default.n_embd) == (12, 12, 768)
    assert not default.activation_checkpointing
    assert flags.parse("gpt-fsdp", ["--activation-checkpointing"]).activation_checkpointing
    # gpt-ddp takes the same sizes, so `gpubench run gpt-ddp,gpt-fsdp -- --params 350M` compares
    ddp = flags.parse("gpt-ddp", ["--params", "350M"])
    assert (ddp.n_layer, ddp.n_head, ddp.n_embd) == (24, 16, 1024)
    assert "invalid choice" in flags.problem("gpt-fsdp", ["--params", "1B"])
    assert flags.problem("gpt-ddp", ["--activation-checkpointing"]).startswith("unrecognized")
    assert flags.DEVICE_SIZES["gpt-fsdp"] == flags.DEVICE_SIZES["gpt-ddp"]


@pytest.mark.slow
def test_sharded_at_one_and_two_processes(sweep):
    records = sweep("gpt-fsdp", [*TINY, "--precision", "bf16", "--activation-checkpointing"])
    for world, r in zip((1, 2), records):
        check_record(r, "gpt-fsdp", world)
        assert r["sharding"] == "FSDP2 full shard per block + root"
        assert r["throughput_unit"] == "tokens/s" and r["tokens_per_step"] == 2 * 16 * world
        assert (r["params"], r["grad_bytes"]) == (TINY_PARAMS, 4 * TINY_PARAMS)  # counted whole
        assert r["flops_per_token"] == 6 * (TINY_PARAMS - 16 * 16) + 12 * 2 * 2 * 8 * 16
        assert r["mixed_precision"] == {"param_dtype": "bfloat16", "reduce_dtype": "float32"}
        assert r["activation_checkpointing"] is True
        assert r["peak_memory_kind"] == "process peak RSS (CPU)"
        assert r["process_peak_rss_bytes"] > 50 * 2**20  # Python and torch at least
        assert r["peak_reserved_bytes"] is None and "peak_memory_bytes" not in r
    one, two = (r["param_bytes_per_process"] for r in records)
    assert one == 4 * TINY_PARAMS  # fp32 shards: the whole model at 1 process
    assert two == pytest.approx(one / 2, rel=0.03)  # half at 2 (padding aside)
    # what is kept between steps: fp32 parameters, gradients and AdamW's two moments, as the
    # memory model counts them (16 bytes a parameter, sharded), besides AdamW's step counters
    kept = [r["train_state_bytes_per_process"] for r in records]
    assert kept[0] == pytest.approx(16 * TINY_PARAMS, rel=0.01)
    assert kept[1] == pytest.approx(kept[0] / 2, rel=0.03)
