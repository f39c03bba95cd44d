"""What a machine's python is, for installing a project's requirements beside its torch.

Run on the machine as `python -c SOURCE` (standard library only); prints one line,
MARK followed by JSON:
- held: {name: version} of torch and its CUDA stack (torch, torchvision, torchaudio,
  triton, nvidia-*) as this python imports them: what an install must not change;
- externally_managed: PEP 668's marker beside the standard library of a python that
  is not a virtual environment (Debian's, Ubuntu's, Lambda Stack's): pip refuses it;
- site_writable: whether this user can write the python's site-packages;
- uv: the uv executable found (beside the python, on PATH, where uv's installer puts
  it), and uv_sees_torch: whether `uv pip show --python THIS torch` finds the torch
  this python imports. uv does not see a torch that comes from --system-site-packages
  or Debian's dist-packages (astral-sh/uv#7358, #8656); pip is used there instead;
- pip: whether `python -m pip` answers.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

MARK = "@gpubench-python "
HELD = ("torch", "torchvision", "torchaudio", "triton")
NOT_HELD = ("nvidia-ml-py",)  # NVML's bindings: no part of the CUDA stack torch was built with


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def is_held(name):
    """Whether the distribution `name` (canonical) is part of the stack the image chose."""
    return (name in HELD or name.startswith("nvidia-")) and name not in NOT_HELD


def held():
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata.get("Name") or "")
        if is_held(name) and name not in found:
            found[name] = dist.version  # the first on sys.path is the one imported
    return found


def externally_managed():
    if sys.prefix != sys.base_prefix:
        return False
    stdlib = sysconfig.get_path("stdlib")
    return bool(stdlib) and os.path.isfile(os.path.join(stdlib, "EXTERNALLY-MANAGED"))


def find_uv():
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    home = os.path.expanduser("~")
    for path in (beside, shutil.which("uv"), os.path.join(home, ".local", "bin", "uv"),
                 os.path.join(home, ".cargo", "bin", "uv")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def answers(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def main():
    uv = find_uv()
    purelib = sysconfig.get_path("purelib")
    info = {"executable": sys.executable, "held": held(), "externally_managed": externally_managed(),
            "in_venv": sys.prefix != sys.base_prefix,
            "site_writable": bool(purelib) and os.access(purelib, os.W_OK),
            "uv": uv, "pip": answers([sys.executable, "-m", "pip", "--version"])}
    info["uv_sees_torch"] = bool(uv) and answers([uv, "pip", "show", "--python", sys.executable, "torch"])
    print(MARK + json.dumps(info, sort_keys=True))


if __name__ == "__main__":
    main()
