"""--since: relative and absolute forms, as UTC times."""

from __future__ import annotations


def test_since_forms():
    from datetime import datetime, timezone

    from gpubench.report.filters import parse_since

    now = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)
    assert parse_since("7d", now) == "2026-03-03T12:00:00Z"
    assert parse_since("12h", now) == "2026-03-10T00:00:00Z"
    assert parse_since("2026-01-31") == "2026-01-31T00:00:00Z"
    assert parse_since("2026-01-31T14:00+02:00") == "2026-01-31T12:00:00Z"
