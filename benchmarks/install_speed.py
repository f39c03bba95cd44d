"""Installing a small requirement set with uv and with pip, side by side, offline.

    .venv/bin/python benchmarks/install_speed.py [--rounds 5]

gpubench installs a project's requirements on a rented machine with
`uv pip install --python PY` where uv sees that python's torch, and with
`PY -m pip install` otherwise, always with a constraints file that holds torch
(and its CUDA stack) as the machine has it. This times those two commands here.

Nothing is fetched from a network. In a temporary directory the script writes six
tiny pure-Python projects (setuptools pyproject projects, a module each; gbtiny-b
needs gbtiny-a, gbtiny-c needs gbtiny-b, gbtiny-e needs gbtiny-a and gbtiny-d), builds
them once to wheels (`pip wheel --no-deps --no-build-isolation --no-index`: this venv
has setuptools but not `build`), a requirements.txt naming the six, and the constraints
file the installer would write for this python: torch, torchvision, torchaudio, triton
and every nvidia-* distribution it imports, at their versions (here torch==2.13.0+cpu
alone: NVML's bindings, nvidia-ml-py, are no part of the CUDA stack and not held).

Then one untimed warm-up round, and R rounds in which the sides take turns, the first
side alternating (A B C, C B A, ...). Each side gets a fresh venv made with
`python -m venv --without-pip` and a .pth file that puts this venv's site-packages on
its path, so that its python imports torch (and pip) as a machine's python does; only
the install commands are timed, not the venv:

  uv                uv pip install --python VENV/bin/python --no-index \\
                        --find-links WHEELS -r requirements.txt -c constraints.txt
                    with a fresh, empty uv cache each round (a freshly rented machine's)
  uv, warm cache    the same, with one cache kept across rounds (filled in the warm-up)
  pip               VENV/bin/python -m pip install --no-index \\
                        --find-links WHEELS -r requirements.txt -c constraints.txt

pip is the installer's command exactly: the venv has no pip of its own (as uv's), and
its python imports this venv's pip through the same .pth that gives it torch, as a
machine's python has pip beside its torch. (`pip --python VENV/bin/python` would
start a second interpreter, which the installer never pays; a venv made with pip
would only move pip's import from one directory to another.) Then each side runs the
same command again into the same venv: what a second run costs with no marker, both
tools' "already satisfied" path.

Both tools run without their configuration (PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG=1,
no PIP_* / UV_* from the environment, UV_OFFLINE=1, pip's cache in the temporary
directory) and with their own defaults otherwise: pip compiles the installed modules
to bytecode, uv does not.

Prints each side's install time, wall median (min-max) and CPU median (user + system
of the command and its children), first and second install, and pip over uv (ratio
of the medians); then what `uv pip show` and `pip show` say of torch in such a venv
(the installer's probe asks `uv pip show --python PY torch` to choose uv: uv 0.13.9
reads only the venv's own site-packages and answers "not found" for a torch on a .pth
path, where pip finds it, so for such a python the installer takes pip); and the load
average, with a note when the machine is busy. Exits 2 when uv is absent
(`.venv/bin/python -m pip install uv`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from gpubench.onhost.python_env import held

# name: (module, dependencies)
PROJECTS = {
    "gbtiny-a": [],
    "gbtiny-b": ["gbtiny-a>=1.0"],
    "gbtiny-c": ["gbtiny-b>=1.0,<2"],
    "gbtiny-d": [],
    "gbtiny-e": ["gbtiny-a", "gbtiny-d>=1.0"],
    "gbtiny-f": [],
}
SIDES = ("uv", "uv, warm cache", "pip")
SLUG = {"uv": "uv", "uv, warm cache": "uv-warm", "pip": "pip"}


def find_uv() -> Path | None:
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return beside
    found = shutil.which("uv")
    return Path(found) if found else None


def pinned_stack() -> list[str]:
    """torch and its CUDA stack as this python imports them, pinned as the installer pins
    them (gpubench/onhost/python_env.py's held(), gpubench/remote/deps.py's constraints)."""
    return [f"{name}=={version}" for name, version in sorted(held().items())]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k != "VIRTUAL_ENV"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               UV_NO_CONFIG="1", UV_OFFLINE="1", UV_PYTHON_DOWNLOADS="never")
    env.update(extra)
    return env


def run(cmd: list, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(map(str, cmd))}\n{done.stdout}{done.stderr}")
    return done


def timed(cmd: list, env: dict) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the command and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run(cmd, env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build_set(root: Path) -> tuple[Path, Path, Path]:
    """Six tiny projects built to wheels; a requirements.txt naming them; the constraints."""
    src, wheels = root / "src", root / "wheels"
    for name, deps in PROJECTS.items():
        module = name.replace("-", "_")
        project = src / name
        project.mkdir(parents=True)
        (project / f"{module}.py").write_text(f'"""{name}."""\n\nVALUE = {name[-1]!r}\n')
        dep_list = ", ".join(f'"{d}"' for d in deps)
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "{name}"\nversion = "1.0.0"\ndependencies = [{dep_list}]\n\n'
            f'[tool.setuptools]\npy-modules = ["{module}"]\n')
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", wheels, *sorted(src.iterdir())], clean_env(PIP_CACHE_DIR=str(root / "pip-cache")))
    built = sorted(p.name for p in wheels.glob("*.whl"))
    if len(built) != len(PROJECTS):
        sys.exit(f"built {built}, expected {len(PROJECTS)} wheels")
    requirements = root / "requirements.txt"
    requirements.write_text("".join(f"{name}>=1.0\n" for name in PROJECTS))
    constraints = root / "constraints.txt"
    constraints.write_text("".join(f"{pin}\n" for pin in pinned_stack()))
    return wheels, requirements, constraints


def machine_venv(path: Path) -> Path:
    """A venv without pip whose python imports this venv's packages (torch, pip) through a
    .pth file, as a rented machine's python has them; its python."""
    run([sys.executable, "-m", "venv", "--without-pip", path])
    python = path / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(purelib) / "_machine_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def fmt(values: list[float]) -> str:
    ms = [1000 * v for v in values]
    return f"{statistics.median(ms):7.0f} ms ({min(ms):.0f}-{max(ms):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    uv = find_uv()
    if uv is None:
        print("uv is not installed beside this python nor on PATH: "
              f"{sys.executable} -m pip install uv", file=sys.stderr)
        sys.exit(2)
    if not any(pin.startswith("torch==") for pin in pinned_stack()):
        print(f"torch is not installed in {sys.prefix}: the constraints pin it", file=sys.stderr)
        sys.exit(2)
    uv_version = run([uv, "--version"]).stdout.split()[1]
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="install-speed-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        wheels, requirements, constraints = build_set(root)
        print(f"built {len(PROJECTS)} wheels in {time.perf_counter() - start:.1f} s; "
              f"constraints: {', '.join(constraints.read_text().split())}")
        common = ["--no-index", "--find-links", wheels, "-r", requirements, "-c", constraints]
        pip_env = clean_env(PIP_CACHE_DIR=str(root / "pip-cache"))
        warm_env = clean_env(UV_CACHE_DIR=str(root / "uv-cache-warm"))

        def install(side: str, tag: str) -> tuple[tuple[float, float], tuple[float, float]]:
            python = machine_venv(root / f"venv-{SLUG[side]}-{tag}")
            if side == "pip":
                cmd, env = [python, "-m", "pip", "install", *common], pip_env
            else:
                cmd = [uv, "pip", "install", "--python", python, *common]
                fresh = clean_env(UV_CACHE_DIR=str(root / f"uv-cache-{tag}"))
                env = warm_env if side == "uv, warm cache" else fresh
            first = timed(cmd, env)
            second = timed(cmd, env)
            return first, second

        for side in SIDES:  # untimed: the page cache, pip's imports, the warm uv cache
            install(side, "warmup")
        figures = {side: {"first": [], "first_cpu": [], "second": [], "second_cpu": []} for side in SIDES}
        for i in range(args.rounds):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                (w1, c1), (w2, c2) = install(side, str(i))
                for key, value in zip(("first", "first_cpu", "second", "second_cpu"), (w1, c1, w2, c2)):
                    figures[side][key].append(value)
            print(f"  round {i + 1}: " + ", ".join(
                f"{side} {1000 * figures[side]['first'][-1]:.0f}/{1000 * figures[side]['second'][-1]:.0f} ms"
                for side in SIDES), flush=True)

        # What each tool sees of torch in such a venv: uv only reads the venv's own
        # site-packages, pip every directory on the python's sys.path.
        python = machine_venv(root / "venv-show")
        uv_show = subprocess.run([str(uv), "pip", "show", "--python", str(python), "torch"],
                                 capture_output=True, text=True, env=clean_env())
        pip_show = subprocess.run([str(python), "-m", "pip", "show", "torch"],
                                  capture_output=True, text=True, env=pip_env)

    pip_version = importlib.metadata.version("pip")
    print(f"\n{args.rounds} rounds, {len(PROJECTS)} wheels; uv {uv_version}, pip {pip_version}, "
          f"Python {sys.version.split()[0]}")
    print(f"{'tool':16s} {'first install: wall median (min-max)':>38s} {'cpu':>7s}   "
          f"{'second install':>28s} {'cpu':>7s}")
    for side in SIDES:
        fig = figures[side]
        print(f"{side:16s} {fmt(fig['first']):>38s} {1000 * statistics.median(fig['first_cpu']):4.0f} ms   "
              f"{fmt(fig['second']):>28s} {1000 * statistics.median(fig['second_cpu']):4.0f} ms")
    pip = figures["pip"]
    for side in ("uv", "uv, warm cache"):
        fig = figures[side]
        first, second = (statistics.median(pip[k]) / statistics.median(fig[k]) for k in ("first", "second"))
        print(f"{'pip / ' + side:22s} first {first:6.1f}x   second {second:6.1f}x")

    def answer(done: subprocess.CompletedProcess) -> str:
        text = (done.stdout + done.stderr).strip()
        version = re.search(r"^Version: (.+)$", text, re.M)
        if done.returncode == 0 and version:
            return f"found, {version.group(1)}"
        return f"not found (exit {done.returncode}: {text.splitlines()[-1] if text else ''})"

    print(f"\ntorch in a venv that imports it through a .pth file:\n"
          f"  uv pip show --python VENV/bin/python torch  {answer(uv_show)}\n"
          f"  VENV/bin/python -m pip show torch           {answer(pip_show)}")

    load_after = os.getloadavg()
    cores = os.cpu_count() or 1
    print(f"\nload average {load_before[0]:.1f} before, {load_after[0]:.1f} after (1 min) on {cores} cores")
    if max(load_before[0], load_after[0]) > 0.75 * cores:
        print("note: the machine was busy; both tools took turns under the same load, so the "
              "ratios hold better than the times")


if __name__ == "__main__":
    main()
