"""The pages' numbers in human units (units.py): durations, sizes, counts and rates."""

from __future__ import annotations

import pytest

from seqline.orchestration.dashboard.units import count, duration, significant, size


@pytest.mark.parametrize(("value", "shown"), [
    (None, ""), (0, "0.00 s"), (12.3, "12.30 s"), (67.4, "1 min 7 s"), (119.6, "2 min 0 s"),
    (5400, "1 h 30 min"), (float("nan"), "")])
def test_duration_reads_as_seconds_minutes_or_hours(value, shown):
    assert duration(value) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (None, ""), (812, "812 B"), (33_393, "33.4 kB"), (181_000_000, "181 MB"),
    (2_500_000_000_000_000, "2,500 TB")])
def test_size_uses_decimal_units(value, shown):
    assert size(value) == shown


def test_counts_and_rates():
    assert (count(1461), count(None), significant(2697.4), significant(0.01234)) == \
        ("1,461", "", "2,700", "0.0123")
