"""The measured exposed all-reduce beside the one the performance model expected
(a record's predicted_step_shares, gpubench/sweep/predicted.py), in words for the line
of points lost: 'exposed all-reduce 24% of the step, the model expected 9%: ...'.

The model's exposed all-reduce is the gradient bytes over its figure for the link, less
what it takes to hide behind the backward pass; a measured share well above it means a
slower link than that figure or less overlap, well below it the reverse.
"""

from __future__ import annotations

from gpubench.workloads import step_parts

# How far apart the shares must be to be called so: both more than this many points
# and more than this ratio (a 2% against 1% is noise, not a slow link).
APART_POINTS = 5.0
APART_RATIO = 1.5


def expected_words(measured: dict | None, expected: dict | None, basis: str | None = None) -> str | None:
    """The exposed all-reduce's share as measured and as expected, and what the difference
    says; None without both breakdowns."""
    if not isinstance(measured, dict) or not isinstance(expected, dict):
        return None
    got, wanted = 100.0 * measured[step_parts.COMM], 100.0 * expected[step_parts.COMM]
    text = f"exposed all-reduce {got:.0f}% of the step, the model expected {wanted:.0f}%"
    figure = f"the model's {basis} figure for it" if basis else "the model's figure for it"
    if got - wanted > APART_POINTS and got > APART_RATIO * wanted:
        return f"{text}: the link is slower than {figure}, or less of the all-reduce hid behind the backward"
    if wanted - got > APART_POINTS and wanted > APART_RATIO * got:
        return f"{text}: the link is faster than {figure}, or more of the all-reduce hid behind the backward"
    return text
