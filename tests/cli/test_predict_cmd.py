"""`gpubench predict`: a GPU type's prediction asked of no provider."""

from __future__ import annotations

import json


def test_json_has_the_figure_its_interval_step_memory_bound_basis_and_sources(cli, tmp_path):
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "H200", "--gpus", "1", "--format", "json",
                         "--results", str(tmp_path), "--", "--precision", "bf16", "--batch-size", "8")
    assert code == 0, err
    [answer] = json.loads(out)
    for key in ("throughput", "low", "high", "unit", "step_seconds", "memory_bytes", "bound_by", "basis",
                "sources"):
        assert answer[key] is not None, key
    assert answer["unit"] == "tokens/s" and answer["low"] < answer["throughput"] < answer["high"]
    assert answer["step_seconds"] == 8 * 1024 / answer["throughput"]
    # the H200's reference records hold this very configuration: measured wins
    assert answer["basis"] == "measured" and 8e9 < answer["memory_bytes"] < 12e9


def test_a_card_no_one_measured_is_modelled_with_the_published_figure_beside_it(cli, tmp_path):
    code, out, err = cli("predict", "resnet-ddp", "--gpu", "A100 SXM", "--results", str(tmp_path),
                         "--", "--precision", "bf16")
    assert code == 0, err
    assert "basis: modelled" in out
    assert "published: 2,470 images/s a GPU (NVIDIA/DeepLearningExamples" in out and "the model says" in out


def test_several_gpus_over_machines_scale_through_the_link(cli, tmp_path):
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "H100 SXM", "--gpus", "16", "--nodes", "2",
                         "--format", "json", "--results", str(tmp_path), "--", "--precision", "bf16")
    assert code == 0, err
    [answer] = json.loads(out)
    # 497 MB of GPT-2's gradients through an assumed 10 Gbit/s a step: slower than one GPU
    assert answer["gpus"] == 16 and answer["nodes"] == 2 and answer["speedup"] < 1
    assert answer["bound_by"] == "communication"
    assert any("10 Gbit/s assumed between machines" in s for s in answer["sources"])


def test_bad_input_is_one_line(cli, tmp_path):
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "H900", "--results", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "'H900' is not a GPU type gpubench knows; known: H200 SXM" in err
    code, out, err = cli("predict", "gpt-ddp", "--results", str(tmp_path))
    assert code == 2 and "--gpu is needed" in err
    code, out, err = cli("predict", "gpt-ddp", "--gpu", "H100 SXM", "--gpus", "3", "--nodes", "2",
                         "--results", str(tmp_path))
    assert code == 2 and "do not spread evenly" in err
