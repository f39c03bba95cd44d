"""The CLI starts without the heavy libraries."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_cli_loads_no_heavy_library():
    code = ("import sys, gpubench.cli; "
            "print(' '.join(m for m in ('torch', 'pandas', 'matplotlib', 'paramiko', "
            "'gpubench.providers.lambda_cloud', 'gpubench.mock') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
