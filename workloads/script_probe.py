"""Run a user's script unchanged, and say what each of its processes really did.

    torchrun --nproc_per_node=N script_probe.py train.py --its --args

installs a few probes, then runs train.py as `__main__` (its `__file__`,
`sys.argv` and `sys.path[0]` as if torchrun had started it itself), and when the
process ends writes one line to stderr:

    GPUBENCH_PROBE {"rank": 0, "world": 2, "group": {"backend": "gloo", "size": 2}, ...}

with whether a process group was formed (its backend and size), which models
were wrapped in DDP or FSDP, and which training frameworks the script imported
(Lightning, Accelerate: how they decided to run). gpubench reads these lines from
the run's output (gpubench.sweep.probe) and refuses, as a measurement, a run
whose processes did not form one group of the expected size.

Standard library and torch only: it is shipped with the suite to machines that
have no gpubench. Nothing here changes what the script computes: the probes only
note that a call happened, then make it.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import runpy
import sys

PREFIX = "GPUBENCH_PROBE "

_seen = {"group": None, "wrapped": [], "accelerate": None}


def _note_group() -> None:
    """The default process group as it stands now, if there is one."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            backend = str(dist.get_backend())
            if backend == "undefined":  # one backend per device type: "cpu:gloo,cuda:nccl"
                backend = str(dist.get_backend_config())
            _seen["group"] = {"backend": backend, "size": dist.get_world_size()}
    except Exception:  # a probe must never be what fails the script
        pass


def _after(function, note):
    """`function`, noting what `note` reads once it has returned."""
    @functools.wraps(function)
    def probed(*args, **kwargs):
        result = function(*args, **kwargs)
        note()
        return result
    probed.__gpubench_probe__ = True
    return probed


def _before(function, note):
    @functools.wraps(function)
    def probed(*args, **kwargs):
        note()
        return function(*args, **kwargs)
    probed.__gpubench_probe__ = True
    return probed


def _wrapped(kind: str):
    def note() -> None:
        _note_group()
        _seen["wrapped"].append(kind)
    return note


def _install() -> None:
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d
    except Exception:
        return
    for module in (dist, distributed_c10d):
        for name, probe in (("init_process_group", _after), ("destroy_process_group", _before)):
            original = getattr(module, name, None)
            if original is not None and not getattr(original, "__gpubench_probe__", False):
                setattr(module, name, probe(original, _note_group))
    _wrap_init("torch.nn.parallel", "DistributedDataParallel", "DDP")
    _wrap_init("torch.distributed.fsdp", "FullyShardedDataParallel", "FSDP")
    for where in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            module = __import__(where, fromlist=["fully_shard"])
        except Exception:
            continue
        original = getattr(module, "fully_shard", None)
        if original is not None and not getattr(original, "__gpubench_probe__", False):
            setattr(module, "fully_shard", _after(original, _wrapped("FSDP2")))


def _wrap_init(module_name: str, class_name: str, kind: str) -> None:
    """Note each construction of the class (a class is one object wherever it was
    imported from, so patching its __init__ catches every use)."""
    try:
        cls = getattr(__import__(module_name, fromlist=[class_name]), class_name)
    except Exception:
        return
    if not getattr(cls.__init__, "__gpubench_probe__", False):
        cls.__init__ = _after(cls.__init__, _wrapped(kind))


def _frameworks() -> dict:
    """The training frameworks the script imported, and how they chose to run."""
    found = {}
    for name in ("lightning", "pytorch_lightning", "accelerate", "transformers", "deepspeed"):
        if name in sys.modules:
            found[name] = getattr(sys.modules[name], "__version__", "")
    state = sys.modules.get("accelerate.state")
    if state is not None:
        try:
            shared = getattr(state, "PartialState")._shared_state
            kind = shared.get("distributed_type")
            if kind is not None:
                found["accelerate_distributed_type"] = str(getattr(kind, "value", kind))
        except Exception:
            pass
    return found


def _report() -> None:
    _note_group()
    report = {
        "rank": int(os.environ.get("RANK", "0") or 0),
        "world": int(os.environ.get("WORLD_SIZE", "1") or 1),
        "group": _seen["group"],
        "wrapped": sorted(set(_seen["wrapped"])),
        "frameworks": _frameworks(),
    }
    try:
        sys.stderr.write(PREFIX + json.dumps(report, sort_keys=True) + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def main(argv: list[str]) -> None:
    if not argv:
        sys.stderr.write("usage: script_probe.py SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    _install()
    atexit.register(_report)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
