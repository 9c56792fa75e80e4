"""The gap finder: a stored stage's missing and duplicated seq, as bounded lists of intervals."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MOST_INTERVALS", "duplicated", "missing", "said"]

# Intervals kept per kind in a verdict: enough to see the pattern of a fault (every 256th
# seq, one shard's range), bounded so that a stage that lost every other record does not
# write a verdict the size of its input. The counts are always whole.
MOST_INTERVALS = 20


def missing(expected: np.ndarray, present: np.ndarray) -> dict[str, Any] | None:
    """The seq of `expected` that `present` lacks, as intervals; None when none is missing.

    Both arrays sorted and distinct (verify's `_distinct`): one pass of searchsorted.

    Example: expected 0..22, present without 11, 12 and 20 -> {"records": 3, "intervals": 2,
    "first": [[11, 12], [20, 20]]}.
    """
    at = np.searchsorted(present, expected)
    found = at < len(present)
    found[found] = present[at[found]] == expected[found]
    return _ranges(expected[~found], len(expected) - int(found.sum()))


def duplicated(seq: np.ndarray) -> dict[str, Any] | None:
    """The seq stored more than once, as intervals of seq; None when every seq is stored once.

    `records` counts the extra copies (a seq stored three times counts 2), as the accounting
    would count them: records_out over the distinct seq.

    Example: seq [0, 1, 2, 2, 3, 4, 4, 5, 5, 5] -> {"records": 4, "intervals": 2,
    "first": [[2, 2], [4, 5]]}.
    """
    ordered = seq if not len(seq) or (seq[1:] >= seq[:-1]).all() else np.sort(seq)
    again = ordered[1:] == ordered[:-1]
    if not again.any():
        return None
    repeated = ordered[1:][again]
    distinct = repeated[np.r_[True, repeated[1:] != repeated[:-1]]]
    return _ranges(distinct, int(again.sum()))


def _ranges(values: np.ndarray, records: int) -> dict[str, Any] | None:
    """Sorted distinct seq as runs of consecutive numbers: the count of records, of runs, and
    the first MOST_INTERVALS runs as [first, last] (inclusive)."""
    if not len(values):
        return None
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = values[np.r_[0, breaks + 1]]
    ends = values[np.r_[breaks, len(values) - 1]]
    first = [[int(a), int(b)] for a, b in zip(starts[:MOST_INTERVALS], ends[:MOST_INTERVALS],
                                             strict=True)]
    return {"records": records, "intervals": len(starts), "first": first}


def said(kind: str, found: dict[str, Any]) -> str:
    """One verdict line for a kind of gap, its intervals spelled out.

    Example: ("missing", {"records": 3, "intervals": 2, "first": [[11, 12], [20, 20]]}) ->
    "gaps: 3 seq missing in 2 ranges: 11..12, 20"; a stage that filters adds "(of which the
    stage counts N filtered)": its absent seq are its filtered ones and any lost.
    """
    ranges = ", ".join(f"{a}" if a == b else f"{a}..{b}" for a, b in found["first"])
    more = found["intervals"] - len(found["first"])
    if more:
        ranges += f" and {more:,} more"
    runs = f"{found['intervals']:,} range{'s' if found['intervals'] != 1 else ''}"
    if kind == "missing":
        filtered = found.get("filtered")
        note = f" (of which the stage counts {filtered:,} filtered)" if filtered else ""
        return f"gaps: {found['records']:,} seq missing in {runs}{note}: {ranges}"
    return f"duplicates: {found['records']:,} extra record{'s' if found['records'] != 1 else ''}" \
           f" of seq in {runs}: {ranges}"
