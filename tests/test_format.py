"""How numbers and money read (gpubench/format.py): a cost too small for cents is shown
with the digits it needs, never as nothing; FLOPs in the unit that fits."""

from __future__ import annotations

import pytest

from gpubench.format import format_dollars, say_flops


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
