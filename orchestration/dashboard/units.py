"""Durations, sizes, counts and rates in human units: the one place the pages format numbers.

The charts' ticks follow the same rules in static/units.js. Seconds keep two decimals below a
minute ("12.30 s"), as the terminal's table prints them, so a page and `seqline run` read the
same; longer spans go to minutes and hours.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

__all__ = ["FILTERS", "count", "duration", "significant", "size", "when"]


def duration(value: Any) -> str:
    """12.3 -> "12.30 s", 75 -> "1 min 15 s", 5400 -> "1 h 30 min"; a missing value (None,
    not sampled yet) -> ""."""
    if not isinstance(value, int | float) or value != value:
        return ""
    if value < 60:
        return f"{value:.2f} s"
    if value < 3600:
        minutes, rest = divmod(round(value), 60)
        return f"{minutes} min {rest} s"
    hours, rest = divmod(round(value / 60), 60)
    return f"{hours} h {rest} min"


def count(value: Any) -> str:
    """1461 -> "1,461"; a missing value -> ""."""
    return "" if value is None else f"{value:,}" if isinstance(value, int) else \
        f"{value:,.1f}" if isinstance(value, float) else str(value)


def significant(value: Any) -> str:
    """A rate to 3 significant digits: 2697.4 -> "2,700", 93.96 -> "94.0", 0.01234 ->
    "0.0123", 0 -> "0"; a missing value -> ""."""
    if not isinstance(value, int | float) or value != value:  # None, or NaN
        return ""
    if value == 0:
        return "0"
    digits = 2 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)  # 99.96 -> 100.0: count its digits again
    digits = 2 - math.floor(math.log10(abs(rounded)))
    return f"{round(rounded, digits):,.{max(digits, 0)}f}"


def size(value: Any) -> str:
    """Bytes in decimal units (as `ls -h --si` and object stores bill them): 812 -> "812 B",
    33393 -> "33.4 kB", 181_000_000 -> "181 MB"; a missing value -> ""."""
    if not isinstance(value, int | float):
        return ""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value} B" if unit == "B" else f"{significant(value)} {unit}"
        value /= 1000
    return ""  # not reached: TB takes the rest


def when(value: Any, show: str = "local") -> Markup | str:
    """A stored time (ISO 8601) as a <time> element that reads as a person would say it.

    The page says it in UTC ("27 Nov 2026, 18:24:49 UTC"); static/times.js, when it runs,
    says it in the reader's own zone and how long ago: `show` "local" ("today 18:24:49"),
    "relative" ("5 min ago", the local time in its tooltip) or "both" ("today 18:24:49,
    5 min ago"). A missing or unreadable value -> "".
    """
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return ""
    if moment.tzinfo is None:  # the store's times are UTC
        moment = moment.replace(tzinfo=UTC)
    stamp = moment.astimezone(UTC)
    text = f"{stamp.day} {stamp:%b %Y, %H:%M:%S} UTC"
    return Markup('<time class="when" datetime="{}" data-show="{}" title="{}">{}</time>').format(
        stamp.isoformat(), show, text, text)


# The templates' filters: `|seconds`, `|count`, `|significant` (rates), `|size` (bytes),
# `|when` (times).
FILTERS = {"seconds": duration, "count": count, "significant": significant, "size": size,
           "when": when}
