"""Predictions in words (gpubench/predict/words.py): a time too short for tenths of a
second in ms or µs, an interval in one unit where both ends read in it, the advise
table's columns."""

from __future__ import annotations

import pytest

from gpubench.predict.words import say_duration, say_range


@pytest.mark.parametrize("seconds, text", [
    (4.2e-7, "<1 µs"), (4.5e-5, "45 µs"), (3.2e-3, "3.2 ms"), (0.04, "40 ms"), (0.4, "0.4 s"),
    (40, "40 s"), (720, "12 min"), (9000, "2.5 h"), (3.2 * 86400, "3.2 days"),
])
def test_a_duration_is_never_zero(seconds, text):
    assert say_duration(seconds) == text


def test_a_range_names_its_unit_once_where_both_ends_share_it():
    assert say_range(18 * 60, 37 * 60) == "18-37 min"
    assert say_range(44.3 * 3600, 3.8 * 86400) == "44.3 h-3.8 days"
    assert say_range(0.002, 0.004) == "2.0-4.0 ms"
