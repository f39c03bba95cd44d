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
    the root, unshard/reshard and the prefetch settings followed, its bf16 param_dtype
    the dtype of every matrix product, forward and backward."""
    ref = project(tmp_path, monkeypatch, "fsdp2_example.py")
    cal = calibrated(ref)
    assert (cal.precision, cal.fsdp_units, cal.samples, cal.tokens) == ("bf16", 4, 4, 64)
    assert math_of_products(cal) == {"bf16"}
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
    """The script calls a function of its own module (rng_helper.py) that asks for the
    CUDA RNG's state: the line named is the helper's, not the script's call of it."""
    ref = project(tmp_path, monkeypatch, "calls_a_helper.py", "rng_helper.py")
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    words = str(raised.value)
    assert words.startswith(f"calibration: {ref.name}: stopped under CUDA's emulation on this machine's CPU "
                            "at rng_helper.py line 6: `state[\"cuda\"] = torch.cuda.get_rng_state()` "
                            "(in random.py, get_rng_state)"), words
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
