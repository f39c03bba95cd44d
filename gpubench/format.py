"""How numbers and money read, wherever gpubench prints them: the terminal, the
report files and the HTML page all use these."""

from __future__ import annotations


def format_cell(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:,.{max(digits - 1, 1)}f}"
    return str(value)


def format_dollars(dollars: float) -> str:
    """A cost to the cent; a fraction of a cent (a short mock or test run) to 4 places."""
    return f"${dollars:.2f}" if dollars >= 0.01 or dollars == 0 else f"${dollars:.4f}"
