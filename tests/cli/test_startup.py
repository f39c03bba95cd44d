"""The CLI starts without the heavy libraries, and the installed command runs."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import run_gpubench

# Run in a fresh interpreter: prints the modules that importing the CLI loaded but
# only some commands need (each command imports its own lazily).
LOADED_BY_THE_CLI = """\
import sys, gpubench.cli
heavy = [m for m in sys.modules
         # the numeric and plotting stack, SSH, HTTP clients
         if m.startswith(("torch", "pandas", "requests", "paramiko"))
         or m in ("numpy", "matplotlib", "graphql", "gpubench.mock",
                  "gpubench.providers.lambda_cloud")
         # a provider adapter, or any module named http (the adapters' client included)
         or m.split(".")[-1] in ("lambda_cloud", "vast", "runpod", "http")]
print(sorted(heavy))
"""


def test_importing_the_cli_loads_no_heavy_library():
    out = subprocess.run([sys.executable, "-c", LOADED_BY_THE_CLI], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_installed_command_lists_the_suite():
    done = run_gpubench("workloads", timeout=60)
    assert done.returncode == 0, done.stderr
    for name in ("mnist-ddp", "resnet-ddp", "gpt-ddp", "recsys-ddp", "allreduce"):
        assert name in done.stdout
    assert "MFU" in done.stdout and "busbw" in done.stdout
