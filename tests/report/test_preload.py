"""The report's pandas is imported beside the runs (gpubench.report.preload), once, and
the program's end skips the last garbage collection (gpubench.cli.entry)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from gpubench.report import preload
assert "pandas" not in sys.modules
preload.in_background()
preload.in_background()  # once per process
assert len(preload._started) == 1
preload.finished()
assert not preload._started[0].is_alive()
import pandas  # found done
print("pandas" in sys.modules, preload._started[0].name)
"""


def test_pandas_is_imported_on_a_thread_of_its_own_once():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "report-preload"]


def test_the_program_exits_with_mains_code_and_its_objects_frozen():
    source = ("import gc, sys\nfrom gpubench import cli\nsys.argv = ['gpubench', '--version']\n"
              "try:\n    cli.entry()\nfinally:\n    print(gc.get_freeze_count() > 0)\n")
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    version, frozen = done.stdout.splitlines()
    assert version.startswith("gpubench ") and frozen == "True"
