"""gpubench.predict.workload_profiles reads the shipped workloads/profiles.json without
torch: a profile for a workload's default arguments and for those that change neither its
model nor its batch, none for other arguments, and none (not a traceback) from a missing
or damaged file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.predict import workload_profiles
from gpubench.predict.workload_profiles import WorkloadProfile, profile_for, suite_profiles

SHIPPED = Path(__file__).resolve().parents[2] / "workloads" / "profiles.json"


def test_every_suite_workload_with_a_model_has_a_profile():
    profiles = suite_profiles()
    assert sorted(profiles) == ["gpt-ddp", "gpt-fsdp", "mnist-ddp", "recsys-ddp", "resnet-ddp"]
    assert {p.unit for p in profiles.values()} == {"images", "tokens", "ratings"}
    for name, p in profiles.items():
        assert isinstance(p, WorkloadProfile) and p.workload == name and p.args == ()
        assert p.flops_per_sample > 0 and p.grad_bytes == 4 * p.params  # fp32 gradients
        assert "FlopCounterMode on the meta device" in p.source
        assert "workloads/model_profile.py" in p.source


def test_profile_for_the_defaults_is_the_shipped_one():
    shipped = json.loads(SHIPPED.read_text())["profiles"]["gpt-ddp"]
    p = profile_for("gpt-ddp")
    assert p == profile_for("gpt-ddp", []) == profile_for("gpt-ddp", ())
    assert (p.flops_per_sample, p.params, p.grad_bytes) == (
        shipped["flops_per_sample"], shipped["params"], shipped["grad_bytes"])
    assert (p.unit, p.batch_per_gpu, p.work_per_gpu_step) == ("tokens", 8, 8 * 1024)
    assert p.flops_per_gpu_step == p.flops_per_sample * 8 * 1024
    assert profile_for("resnet-ddp").batch_per_gpu == 256  # the GPU size, not the CPU's 8


@pytest.mark.parametrize("workload, args", [
    ("gpt-ddp", ["--steps", "100", "--warmup", "3", "--seed", "7", "--compile"]),
    ("gpt-ddp", ["--precision", "bf16", "--tf32"]),  # FLOPs and fp32 gradients: the same
    ("gpt-ddp", ["--batch-size", "8", "--block-size=1024"]),  # the defaults, spelled out
    ("resnet-ddp", ["--epochs", "2", "--record-file", "r.json", "--profile", "traces"]),
    ("mnist-ddp", ("--data", "synthetic")),
    ("recsys-ddp", ["--shape", "ml-1m", "--embedding-dim", "32"]),
])
def test_arguments_that_keep_the_model_and_batch_keep_the_profile(workload, args):
    assert profile_for(workload, args) == profile_for(workload)


@pytest.mark.parametrize("workload, args", [
    ("gpt-ddp", ["--batch-size", "4"]),
    ("gpt-ddp", ["--block-size", "256"]),  # the CPU's size
    ("gpt-ddp", ["--n-layer", "24"]),
    ("resnet-ddp", ["--depth", "18"]),
    ("recsys-ddp", ["--shape", "ml-25m"]),
    ("recsys-ddp", ["--data", "~/ml-1m"]),  # the tables' sizes come from the file
    ("mnist-ddp", ["--data", "~/mnist"]),
    ("mnist-ddp", ["--stepz", "3"]),  # refused by the workload's flags
    ("mnist-ddp", ["--precision", "fp8"]),
    ("allreduce", []),  # a bandwidth test: no model
    ("train.py", []),  # a user's script
])
def test_other_arguments_have_no_profile(workload, args):
    assert profile_for(workload, args) is None


def test_help_is_no_profile_and_prints_nothing(capsys):
    assert profile_for("gpt-ddp", ["--help"]) is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("text", [None, "", "{not json", "[]", '{"profiles": []}',
                                  '{"profiles": {"gpt-ddp": {"workload": "gpt-ddp"}}}'])
def test_a_missing_or_damaged_file_is_no_profile(monkeypatch, tmp_path, text):
    path = tmp_path / "profiles.json"
    if text is not None:
        path.write_text(text)
    monkeypatch.setattr(workload_profiles, "profiles_file", lambda: path)
    assert profile_for("gpt-ddp") is None
    assert suite_profiles() == {}


def test_one_damaged_entry_leaves_the_others(monkeypatch, tmp_path):
    document = json.loads(SHIPPED.read_text())
    document["profiles"]["gpt-ddp"]["flops_per_sample"] = "many"
    del document["profiles"]["resnet-ddp"]["params"]
    document["profiles"]["recsys-ddp"]["workload"] = "mnist-ddp"  # filed under another name
    del document["profiles"]["gpt-fsdp"]
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(document))
    monkeypatch.setattr(workload_profiles, "profiles_file", lambda: path)
    assert sorted(suite_profiles()) == ["mnist-ddp"]
    assert profile_for("gpt-ddp") is None and profile_for("mnist-ddp") is not None


def test_reading_profiles_imports_no_torch():
    code = ("import sys; from gpubench.predict.workload_profiles import profile_for; "
            "assert profile_for('gpt-ddp') is not None; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
