"""How numbers and money read (gpubench/format.py): a cost too small for cents is shown
with the digits it needs, never as nothing; FLOPs in the unit that fits; a time below a
second in milliseconds."""

from __future__ import annotations

import pytest

from gpubench.format import format_dollars, say_duration, say_flops


@pytest.mark.parametrize("dollars, text", [
    (12.345, "$12.35"), (0.01, "$0.01"), (0.0, "$0.00"), (0.0042, "$0.0042"),
    (5.56e-6, "$0.0000056"), (1.2e-4, "$0.0001"), (9.9e-5, "$0.000099"), (3e-10, "<$0.00000001"),
])
def test_a_cost_reads_to_the_cent_or_with_the_digits_it_needs(dollars, text):
    assert format_dollars(dollars) == text


@pytest.mark.parametrize("flops, text", [
    (1.87e6, "1.87 MFLOP"), (2048, "2.05 kFLOP"), (3.1e9, "3.1 GFLOP"), (12, "12 FLOP"),
])
def test_flops_read_in_the_unit_that_fits(flops, text):
    assert say_flops(flops) == text


@pytest.mark.parametrize("seconds, text", [
    (0.1157, "115.7 ms"), (0.04, "40.0 ms"), (0.4, "400.0 ms"), (3.2e-3, "3.2 ms"),
    (4.5e-5, "45 µs"), (4.2e-7, "<1 µs"), (0.0, "<1 µs"), (0.99996, "1.0 s"), (0.0009996, "1.0 ms"),
    (1.0, "1.0 s"), (1.25, "1.2 s"), (40, "40 s"), (720, "12 min"), (9000, "2.5 h"),
    (3.2 * 86400, "3.2 days"),
])
def test_a_time_below_a_second_reads_in_milliseconds_and_is_never_zero(seconds, text):
    assert say_duration(seconds) == text
