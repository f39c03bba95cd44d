"""The suite's flags live in one torch-free module: the workloads parse with it on
the machine, gpubench checks a sweep's arguments with it before anything runs, and
the sizes a CPU cannot hold are filled in for the device the run has."""

from __future__ import annotations

import subprocess
import sys

import flags


def test_a_typo_is_one_line_with_the_flag_it_resembles():
    assert flags.problem("mnist-ddp", ["--stepz", "20"]) == (
        "unrecognized arguments: --stepz 20 (did you mean --steps?)")
    assert flags.problem("gpt-ddp", ["--n-embd", "100", "--n-head", "3"]) == (
        "--n-embd must be a multiple of --n-head")
    assert flags.problem("allreduce", ["--max-bytes", "8", "--min-bytes", "16"]) == (
        "need 4 <= --min-bytes <= --max-bytes")
    assert flags.problem("recsys-ddp", ["--shape", "ml-25m", "--steps", "3"]) is None


def test_the_check_needs_no_torch():
    code = ("import sys, gpubench.workloads.flags as f; "
            "assert f.problem('resnet-ddp', ['--depht', '18']); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_sizes_follow_the_device_and_flags_given_win():
    cpu = flags.parse("resnet-ddp", [])
    assert flags.size_for_device("resnet-ddp", cpu, "cpu") == "cpu"
    assert (cpu.batch_size, cpu.steps, cpu.warmup, cpu.image_size) == (8, 10, 2, 224)
    gpu = flags.parse("resnet-ddp", [])
    assert flags.size_for_device("resnet-ddp", gpu, "cuda") == "full"
    assert (gpu.batch_size, gpu.steps, gpu.warmup) == (256, None, 5)  # 200 steps: the workload's
    given = flags.parse("gpt-ddp", ["--batch-size", "4", "--block-size", "128", "--steps", "3"])
    assert flags.size_for_device("gpt-ddp", given, "cpu") == "given"
    assert (given.batch_size, given.block_size, given.steps, given.warmup) == (4, 128, 3, 2)
    assert flags.size_for_device("mnist-ddp", flags.parse("mnist-ddp", []), "cpu") is None


def test_the_flags_tables_agree_with_the_workloads():
    import recsys_ddp
    import resnet_ddp

    assert flags.RESNET_DEPTHS == tuple(sorted(resnet_ddp.ARCHS))
    assert sorted(flags.MOVIELENS_SHAPES) == sorted(recsys_ddp.MOVIELENS_SHAPES)
    from gpubench.suite import suite_names

    assert sorted(flags.WORKLOADS) == sorted(suite_names())
