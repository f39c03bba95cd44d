"""What `gpubench report` checks before it draws, called directly: --workload,
--plot-format and whether matplotlib is there for --plot and --html."""

from __future__ import annotations

import sys

import pytest

from gpubench.errors import UsageError
from gpubench.report.filters import only_workload
from gpubench.report.normalise import records_frame
from gpubench.report.plots import PLOT_FORMATS, plot_file_formats, require_matplotlib

from .helpers import rec


def test_only_workload_keeps_its_records():
    frame = records_frame([rec(1, 100.0, 3.6), {**rec(1, 50.0, 3.6), "workload": "other"}])
    assert list(only_workload(frame, "other")["throughput"]) == [50.0]
    with pytest.raises(UsageError, match=r"^--workload: no records of 'nope' in /tmp/r$"):
        only_workload(frame, "nope", "/tmp/r")


def test_plot_formats():
    assert PLOT_FORMATS == ("png", "svg", "both")
    assert plot_file_formats("png") == ("png",) and plot_file_formats("svg") == ("svg",)
    assert plot_file_formats("both") == ("png", "svg")
    with pytest.raises(UsageError, match=r"^--plot-format: 'gif' is not one of png, svg, both$"):
        plot_file_formats("gif")


def test_require_matplotlib(monkeypatch):
    require_matplotlib("--plot")  # installed here: no error
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(UsageError) as e:
        require_matplotlib("--html")
    assert str(e.value) == ("--html needs matplotlib, which is not installed: bash scripts/setup.sh "
                            "(or pip install -e '.[plots]' in the checkout)")
