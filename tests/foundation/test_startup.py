"""The CLI starts without the heavy libraries."""

from __future__ import annotations

import subprocess
import sys

from gpubench.launch.base import Machine
from gpubench.sweep import default_counts, parse_counts


def test_importing_the_cli_loads_no_heavy_library():
    code = ("import sys, gpubench.cli; "
            "print(' '.join(m for m in ('torch', 'pandas', 'matplotlib', 'paramiko', "
            "'gpubench.providers.lambda_cloud', 'gpubench.mock') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_default_sweep_counts():
    cpu = Machine("local", "cpu", "cpu", 0, 0.0, "cpu")
    assert default_counts(cpu) == [1, 2]
    assert default_counts(Machine("x", "t", "H100", 8, 1.0)) == [1, 2, 4, 8]
    assert default_counts(Machine("x", "t", "H100", 6, 1.0)) == [1, 2, 4]
    assert parse_counts("1, 2,2,4") == [1, 2, 4]
