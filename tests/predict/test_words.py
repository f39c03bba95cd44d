"""Predictions in words (gpubench/predict/words.py): an interval in one unit where both
ends read in it, the advise table's columns (a duration itself: tests/test_format.py)."""

from __future__ import annotations

from gpubench.predict.words import say_range


def test_a_range_names_its_unit_once_where_both_ends_share_it():
    assert say_range(18 * 60, 37 * 60) == "18-37 min"
    assert say_range(44.3 * 3600, 3.8 * 86400) == "44.3 h-3.8 days"
    assert say_range(0.002, 0.004) == "2.0-4.0 ms"
    assert say_range(0.0926, 0.1447) == "92.6-144.7 ms"
