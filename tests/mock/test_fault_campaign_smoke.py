"""The fault campaign (benchmarks/fault_campaign.py) runs: a handful of its scenarios,
the CLI killed at random moments, the wrong account and a machine that stops itself,
end with nothing left at the provider and the summary printed."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow


def test_a_short_campaign_leaves_nothing_behind(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("fault_campaign", REPO / "benchmarks" / "fault_campaign.py")
    campaign = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fault_campaign", campaign)     # its dataclasses look it up
    spec.loader.exec_module(campaign)
    code = campaign.main(["--scenarios", "4", "--seed", "7", "--kinds", "provision,wrong-account,self-stop"])
    out = capsys.readouterr().out
    assert "4 scenarios in" in out and out.splitlines()[0].split()[:3] == ["kind", "runs", "killed"]
    all_row = next(line.split() for line in out.splitlines() if line.startswith("all "))
    assert all_row[1] == "4" and all_row[3:10] == ["0"] * 7, out
    assert code == 0, out
