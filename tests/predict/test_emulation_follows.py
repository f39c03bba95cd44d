"""What CUDA's emulation (workloads/cuda_emulation.py) follows of a script written for a
GPU, each with a small script of that shape (tests/fixtures/emulation/): torch.load onto
CUDA and torch.cuda.device; torch.save, pickling and deep copies of a model the
calibration hooks; activation checkpointing under bf16 autocast; FSDP2 as it is, with
its mixed precision; nn.DataParallel noted; and the line named where it cannot follow,
in the user's own files. Each script is calibrated as `gpubench predict` calibrates it,
or run under the emulation alone (no probe) where what is checked is the emulation's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from gpubench import suite
from gpubench.predict import calibrate
from gpubench.predict.calibrate import STEPS, CalibrationError
from tests.helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "emulation"
WORKLOADS = REPO / "workloads"
MATRIX_PRODUCTS = ("aten.mm", "aten.addmm", "aten.bmm")

# The emulation alone, as the calibration installs it, then the script as __main__; its
# Emulation's notes as one line at the end.
ALONE = """\
import json, os, runpy, sys
sys.path.insert(0, {workloads!r})
import cuda_emulation
emulation = cuda_emulation.install(cuda_emulation.Card())
script = os.path.abspath(sys.argv[1])
sys.argv, sys.path[0] = sys.argv[1:], os.path.dirname(script)
runpy.run_path(script, run_name="__main__")
notes = {{k: v for k, v in vars(emulation).items() if isinstance(v, (bool, int, str, type(None)))}}
print("EMULATION " + json.dumps(notes))
"""


def project(tmp_path, monkeypatch, *names: str):
    """The fixtures named, copied into a project folder of their own, run from there (as
    `gpubench advise` is); the first is the script."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in names:
        shutil.copy(FIXTURES / name, folder / name)
    monkeypatch.chdir(folder)
    return suite.resolve(str(folder / names[0]))


def calibrated(ref, args=()):
    """The script calibrated (gpubench predict's run), and its Calibration."""
    said = []
    calibrate.script_subject(ref, tuple(args), [], said.append)
    cal = calibrate.cached(calibrate.cache_key(ref, tuple(args)))
    assert cal is not None and cal.steps_seen == STEPS, said
    return cal


def alone(ref) -> dict:
    """The script run to its end under the emulation alone; what its Emulation noted."""
    env = {**os.environ, "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1"}
    proc = subprocess.run([sys.executable, "-c", ALONE.format(workloads=str(WORKLOADS)), str(ref.script)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ref.script.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("EMULATION "))
    return json.loads(line[len("EMULATION "):])


def math_of_products(cal) -> set:
    return {row[6] for row in cal.ops if row[1] in MATRIX_PRODUCTS}


# --------------------------------------------------------------------------- 1, 2: load and save
@pytest.mark.slow
def test_a_checkpoint_loads_onto_cuda_and_a_hooked_model_saves_pickles_and_copies(tmp_path, monkeypatch):
    """torch.load(map_location="cuda" | torch.device("cuda") | "cuda:0") of a CPU state
    dict: meta tensors reporting cuda:0; torch.cuda.device is its class and a context;
    then, once the calibration has hooked the model, torch.save of it whole and of its
    state dict, pickle.dumps and copy.deepcopy (an EMA copy) each step."""
    import torch

    ref = project(tmp_path, monkeypatch, "load_checkpoint.py")
    # where the calibration writes nothing, the script's init.pt is this one (the same)
    torch.save(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).state_dict(),
               ref.script.parent / "init.pt")
    cal = calibrated(ref)
    assert cal.samples == 8 and cal.optimizer == "adamw" and cal.precision == "fp32"


@pytest.mark.slow
def test_under_the_emulation_a_model_is_saved_as_meta_tensors_and_loads_back(tmp_path, monkeypatch):
    """What torch.save writes under the emulation: the meta tensors as torch writes
    them (shapes and dtypes, no bytes), readable by any torch."""
    import torch

    ref = project(tmp_path, monkeypatch, "load_checkpoint.py")
    alone(ref)
    state = torch.load(ref.script.parent / "last.pt")
    assert {k: (tuple(v.shape), v.device.type) for k, v in state.items()} == {
        "0.weight": ((32, 16), "meta"), "0.bias": ((32,), "meta"),
        "2.weight": ((4, 32), "meta"), "2.bias": ((4,), "meta")}
    whole = torch.load(ref.script.parent / "model.pt", weights_only=False)
    assert isinstance(whole, torch.nn.Sequential) and whole[2].weight.shape == (4, 32)


@pytest.mark.slow
def test_a_modules_pickled_state_leaves_out_the_calibrations_hooks(monkeypatch):
    """The hooks the probe put on a model are left out of its pickled state (in a
    calibration as in a measured run: script_probe._patch_getstate); the script's own are
    kept."""
    import torch
    import torch.nn.modules.module as module_module

    from gpubench.workloads import script_probe

    monkeypatch.setattr(torch.nn.Module, "__getstate__", torch.nn.Module.__getstate__, raising=False)
    script_probe._patch_getstate(module_module)
    model = torch.nn.Linear(2, 2)
    ours = model.register_forward_pre_hook(lambda module, args, kwargs: None, with_kwargs=True)
    monkeypatch.setattr(script_probe, "_hooked", [(model, ours)])
    theirs = model.register_forward_hook(print)
    mine = model.register_forward_pre_hook(_user_hook)
    state = model.__getstate__()
    assert list(state["_forward_pre_hooks"]) == [mine.id] and ours.id not in state["_forward_pre_hooks_with_kwargs"]
    assert list(state["_forward_hooks"]) == [theirs.id]
    assert ours.id in model._forward_pre_hooks   # the module itself keeps them


def _user_hook(module, args):
    return None


# --------------------------------------------------------------------------- 3: checkpointing
@pytest.mark.slow
@pytest.mark.parametrize("args, recomputed", [((), 2), (("--reentrant",), 4)])
def test_activation_checkpointing_recomputes_under_the_emulated_autocast(tmp_path, monkeypatch, args, recomputed):
    """Checkpointing per block under bf16 autocast: torch's autocast queries answer the
    emulated region, so the recomputation in the backward re-enters it and saves what the
    forward saved; every matrix product is bf16, the recomputed ones too. Non-reentrant,
    each block's first linear is recomputed (the recomputation stops once what the
    backward needs is made); reentrant (its forward under no_grad, cast as autocast
    casts), both of them."""
    ref = project(tmp_path, monkeypatch, "checkpoint_autocast.py")
    cal = calibrated(ref, args)
    assert cal.precision == "bf16" and cal.samples == 8
    products = [row for row in cal.ops if row[1] in MATRIX_PRODUCTS]
    # every one at bf16 but the script's own in its region with autocast turned off
    assert [(row[0], row[1], row[3], row[6]) for row in products if row[6] != "bf16"] == [
        ("forward", "aten.mm", 1, "fp32")]
    assert sum(row[3] for row in products if row[:2] == ("forward", "aten.addmm")) == 5   # 2 blocks x 2, the head
    assert sum(row[3] for row in products if row[:2] == ("backward", "aten.addmm")) == recomputed


# --------------------------------------------------------------------------- 4: FSDP2
@pytest.mark.slow
def test_fsdp2_is_followed_as_it_is_with_its_mixed_precision(tmp_path, monkeypatch):
    """pytorch/examples' FSDP2 example: FSDP<Class>(FSDPModule, Class) per block and at
    the root, its parameters showing Shard(0) placements, unshard/reshard and the prefetch
    settings followed, its bf16 param_dtype the dtype of every matrix product, forward and
    backward, and its communication FSDP's gathers and reduce-scatters in those dtypes."""
    ref = project(tmp_path, monkeypatch, "fsdp2_example.py")
    cal = calibrated(ref)
    assert (cal.precision, cal.fsdp_units, cal.samples, cal.tokens) == ("bf16", 4, 4, 64)
    assert math_of_products(cal) == {"bf16"} and tuple(cal.fsdp_dtypes) == ("bf16", "fp32")
    subject = calibrate.subject_of(ref, (), cal)   # its communication is FSDP's, in its policy's dtypes
    assert subject.strategy == "FSDP" and "FSDP prefetches its all-gathers" in subject.overlap.source
    assert "under FSDP (4 units, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32))" in \
        subject.grad_bytes.source
    assert subject.grad_bytes.value == (2 * cal.params * 2 + cal.params * 4) / 2
    notes = alone(ref)
    assert (notes["fsdp"], notes["fsdp_units"], notes["autocast"]) == ("FSDP2", 4, "bf16")
    assert (notes["fsdp_param_dtype"], notes["fsdp_reduce_dtype"]) == ("bf16", "fp32")


# --------------------------------------------------------------------------- 5: DataParallel
@pytest.mark.slow
def test_data_parallel_is_the_module_it_wraps_and_is_noted(tmp_path, monkeypatch):
    ref = project(tmp_path, monkeypatch, "data_parallel.py")
    notes = alone(ref)
    assert notes["data_parallel"] is True and notes["fsdp"] is None


# --------------------------------------------------------------------------- 6: the line named
@pytest.mark.slow
def test_the_call_not_followed_is_named_at_the_users_own_module(tmp_path, monkeypatch):
    """The script calls a function of its own module (gpu_helper.py) that asks NVML for the
    GPU's utilisation: the line named is the helper's, not the script's call of it."""
    ref = project(tmp_path, monkeypatch, "calls_a_helper.py", "gpu_helper.py")
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    words = str(raised.value)
    assert words.startswith(f"calibration: {ref.name}: stopped under CUDA's emulation on this machine's CPU "
                            "at gpu_helper.py line 6: `state[\"busy\"] = torch.cuda.utilization()` "
                            "(in __init__.py, utilization)"), words
    assert "\n" not in words


@pytest.mark.slow
@pytest.mark.parametrize("where, named", [
    ("library", "helper.py line 4: `return fakelib.call()` (in fakelib.py, call)"),   # an installed package
    ("stdlib", "helper.py line 6: `return json.loads(\"{\")` (in __init__.py, loads)"),   # the standard library
    ("own", "pkg/deep.py line 2: `raise ValueError(\"its own\")`: ValueError: its own"),   # its own error
    ("script", "train.py line 4: `json.loads(\"[\")` (in __init__.py, loads)"),   # none deeper: the script's
])
def test_the_deepest_line_of_the_project_is_named(tmp_path, monkeypatch, where, named):
    """Under the script's folder, neither site-packages (a virtual environment kept in
    the project), the standard library nor torch: the deepest such frame is named."""
    import runpy

    monkeypatch.syspath_prepend(str(WORKLOADS))
    import cuda_emulation

    home = tmp_path / "project"
    library = home / ".venv" / "lib" / "python3.11" / "site-packages"
    (home / "pkg").mkdir(parents=True)
    library.mkdir(parents=True)
    (library / "fakelib.py").write_text("def call():\n    raise RuntimeError('not followed')\n")
    (home / "pkg" / "deep.py").write_text("def fail():\n    raise ValueError(\"its own\")\n")
    (home / "helper.py").write_text(
        "import json, fakelib\nfrom pkg import deep\ndef library():\n    return fakelib.call()\n"
        "def stdlib():\n    return json.loads(\"{\")\ndef own():\n    deep.fail()\n"
        "def go(where):\n    return globals()[where]()\n")
    script = home / "train.py"
    script.write_text("import json, sys, helper\nwhere = sys.argv[-1]\nif where == 'script':\n"
                      "    json.loads(\"[\")\nhelper.go(where)\n")
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    sys.path[:0] = [str(home), str(library)]
    sys.argv = [str(script), where]
    try:
        with pytest.raises(Exception) as raised:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path[:], sys.argv = saved_path, saved_argv
        for name in ("helper", "fakelib", "pkg", "pkg.deep"):
            sys.modules.pop(name, None)
    line = cuda_emulation.Emulation(cuda_emulation.Card()).unfollowed(raised.value, str(script))
    assert line.startswith(f"stopped under CUDA's emulation on this machine's CPU at {named}"), line


# --------------------------------------------------------------------------- 7: shapes from values
HEAD_ROWS = 2 * 32 * 50   # a forward of the head (32 -> 50): FLOPs a row


@pytest.mark.slow
def test_shapes_that_depend_on_values_are_sized_from_the_scripts_own_values(tmp_path, monkeypatch):
    """Its labels moved to the GPU keep their values (a twin): the padding mask, its
    boolean-mask indexing, torch.where(cond) and the count read back are those of the
    batch, 36 of 48 tokens; a mask the model computed is taken at its bound, all 48,
    and said, at the script's line, in the answer's source."""
    ref = project(tmp_path, monkeypatch, "masks.py")
    exact = calibrated(ref)
    head = {row[4] // HEAD_ROWS for row in exact.ops if row[:2] == ("forward", "aten.addmm") and row[4] % HEAD_ROWS == 0}
    assert 36 in head and 48 not in head and not exact.assumed
    said = []
    subject = calibrate.script_subject(ref, ("--bound",), [], said.append)
    bound = calibrate.cached(calibrate.cache_key(ref, ("--bound",)))
    head = {row[4] // HEAD_ROWS for row in bound.ops if row[:2] == ("forward", "aten.addmm") and row[4] % HEAD_ROWS == 0}
    assert {36, 48} <= head
    (assumed,) = bound.assumed
    assert assumed.startswith("nonzero") and "at masks.py line 36: " in assumed and "every element selected" in assumed
    assert "assumed, where a shape depends on values computed on the GPU: nonzero" in subject.profile.source


# --------------------------------------------------------------------------- 8: refused at the call
RUN_EACH = """\
import json, os, runpy, sys
sys.path.insert(0, {workloads!r})
import cuda_emulation

class Refused(BaseException):
    pass

def refused(line):
    raise Refused(line)

script = os.path.abspath(sys.argv[1])
cuda_emulation.install(cuda_emulation.Card(), script, refused)
sys.path[0] = os.path.dirname(script)
for call in sys.argv[2:]:
    sys.argv = [script, "--call", call]
    try:
        runpy.run_path(script, run_name="__main__")
        print("RAN " + call)
    except Refused as error:
        print("REFUSED " + json.dumps([call, str(error)]))
    except Exception as error:   # the script's own failure, named as a calibration names it
        print("REFUSED " + json.dumps([call, cuda_emulation.Emulation(None).unfollowed(error, script)]))
"""


def fake_site(tmp_path):
    """An installed-packages folder outside the project: a stand-in for Triton whose launch
    fails as it does without a GPU, and a compiled extension that links CUDA's runtime."""
    import importlib.machinery

    site = tmp_path / "site"
    shutil.copytree(FIXTURES / "site", site)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (site / f"fused_cuda{suffix}").write_bytes(elf_needing(b"libcudart.so.12", b"libc.so.6"))
    return site


def elf_needing(*libraries: bytes) -> bytes:
    """The smallest 64-bit ELF shared object our reader takes: a .dynstr and a .dynamic
    naming `libraries` as DT_NEEDED."""
    import struct

    strings = b"\0" + b"".join(name + b"\0" for name in libraries)
    offsets = [strings.index(b"\0" + name + b"\0") + 1 for name in libraries]
    dynamic = b"".join(struct.pack("<qQ", 1, o) for o in offsets) + struct.pack("<qQ", 0, 0)
    strtab_at, dynamic_at = 64, 64 + len(strings)
    sections_at = dynamic_at + len(dynamic)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, sections_at)
    struct.pack_into("<HH", header, 0x3A, 64, 3)
    sections = (bytes(64) + struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, strtab_at, len(strings), 0, 0, 1, 0)
                + struct.pack("<IIQQQQIIQQ", 0, 6, 0, 0, dynamic_at, len(dynamic), 1, 0, 8, 16))
    return bytes(header) + strings + dynamic + sections


@pytest.mark.slow
def test_what_cannot_be_followed_is_refused_at_the_helpers_line(tmp_path, monkeypatch):
    """Each in one process under the emulation, its refusal raised through the script's
    retry loop (`except Exception`) to the runner: the line named is the helper's call,
    not the trainer's train() nor the retry; a compiled CUDA extension imported without a
    fallback stops at its import."""
    ref = project(tmp_path, monkeypatch, "refused.py")
    site = fake_site(tmp_path)
    calls = ("flex", "graph", "graphed", "cpp", "custom", "bincount", "extension")
    env = {**os.environ, "PYTHONPATH": str(site), "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1"}
    proc = subprocess.run([sys.executable, "-c", RUN_EACH.format(workloads=str(WORKLOADS)), str(ref.script),
                           *calls], capture_output=True, text=True, env=env, timeout=120, cwd=ref.script.parent)
    got = dict(json.loads(line[len("REFUSED "):]) for line in proc.stdout.splitlines() if line.startswith("REFUSED "))
    assert set(got) == set(calls), proc.stdout + proc.stderr[-2000:]
    head = "not followed under CUDA's emulation on this machine's CPU: "
    expected = {
        "flex": "FlexAttention (torch.nn.attention.flex_attention.flex_attention), called at refused.py "
                "line 42: `return flex_attention(q, q, q)`: Triton generates its kernel",
        "graph": "a CUDA graph (torch.cuda.CUDAGraph), called at refused.py line 49: "
                 "`torch.cuda.CUDAGraph()`: a graph replays kernels",
        "graphed": "a CUDA graph (torch.cuda.make_graphed_callables), called at refused.py line 51",
        "cpp": "a CUDA extension built at run time (torch.utils.cpp_extension.load), called at refused.py "
               "line 54: `load(\"fused\", [\"fused_kernel.cu\"])`",
        "custom": "myops::fused, a custom operator, called at refused.py line 61: "
                  "`return torch.ops.myops.fused(x)`: it has no meta kernel",
        "bincount": "torch.bincount, called at refused.py line 63: `torch.bincount(x.argmax(-1))`",
    }
    for call, words in expected.items():
        assert got[call].startswith(head + words), got[call]
    assert got["extension"].startswith("stopped under CUDA's emulation on this machine's CPU at refused.py "
                                       "line 31: `import fused_cuda   # noqa: F401,F811`"), got["extension"]
    assert "fused_cuda: a compiled CUDA extension (it links CUDA's runtime) is not loaded" in got["extension"]
    assert all("\n" not in line for line in got.values())


@pytest.mark.slow
def test_a_calibration_ends_at_the_call_it_cannot_follow_and_a_fallback_is_said(tmp_path, monkeypatch):
    """Calibrated as predict does: a Triton kernel launched inside the retry loop ends the
    run at once (not at the time limit) with the launch's line; a script that falls back
    where its CUDA extension is not loaded is counted, and the answer says so."""
    import time

    ref = project(tmp_path, monkeypatch, "refused.py")
    monkeypatch.setenv("PYTHONPATH", str(fake_site(tmp_path)))
    monkeypatch.setenv(calibrate.TIMEOUT_ENV, "90")
    started = time.monotonic()
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, ("--call", "triton"), [], lambda line: None)
    assert time.monotonic() - started < 60
    assert str(raised.value) == (
        f"calibration: {ref.name}: not followed under CUDA's emulation on this machine's CPU: a Triton kernel "
        "launched (add[grid](...)), called at refused.py line 56: `add[(1,)](x, x)`: Triton compiles it "
        "for the GPU; the meta device can neither run nor count it")
    subject = calibrate.script_subject(ref, ("--call", "fallback"), [], lambda line: None)
    assert "not loaded, the script's fallback counted instead: fused_cuda" in subject.profile.source


# --------------------------------------------------------------------------- 9: tensor parallel
@pytest.mark.slow
def test_tensor_parallel_is_counted_on_rank_0s_shards(tmp_path, monkeypatch, cli):
    """init_device_mesh over the fake group of the world asked, parallelize_module on the
    meta device: at 4 GPUs each linear is a quarter of the model on rank 0, its counted
    products a quarter of the FLOPs, the all-reduce of the row-parallel output its
    communication (none overlapped), and the 4 GPUs share one batch: no speedup claimed."""
    ref = project(tmp_path, monkeypatch, "tensor_parallel.py")
    cal = calibrate.calibration_for(ref, (), lambda line: None, (4, 1))
    assert cal.params == (64 * 256 + 256 + 256 * 64) // 4 + 64 and cal.meshes == (((4,), ()),)
    products = {row[4] for row in cal.ops if row[:2] == ("forward", "aten.addmm")}
    assert products == {2 * 16 * 64 * 256 // 4}
    assert [name for name, _, _ in cal.collectives] == ["all_reduce"] and cal.tensor_parallel == 4
    code, out, err = cli("predict", str(ref.script), "--gpu", "H200 SXM", "--gpus", "4", "--format", "json")
    assert code == 0, err
    (answer,) = json.loads(out)
    assert answer["speedup"] is None and answer["throughput"] > 0
    assert any("tensor parallelism's collectives over 4 GPUs (1 all_reduce)" in s for s in answer["sources"])


# --------------------------------------------------------------------------- 10: a rank's index, attention
@pytest.mark.slow
def test_a_device_index_is_cuda_and_attention_is_the_kernel_a_gpu_picks(tmp_path, monkeypatch):
    """model.to(local_rank) puts it on the GPU; scaled_dot_product_attention in fp32 is the
    memory-efficient kernel a GPU runs, forward and backward, not the CPU's math."""
    ref = project(tmp_path, monkeypatch, "attention.py")
    names = {row[1] for row in calibrated(ref).ops}
    assert {"aten._scaled_dot_product_efficient_attention",
            "aten._scaled_dot_product_efficient_attention_backward"} <= names
    assert "aten._softmax" not in names and "aten.bmm" not in names
