"""Drift: a distance per column between two profiles, against a baseline run and along seq."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from seqline.pipeline.profile import ColumnProfile, Profile

__all__ = ["GROUP_ROWS", "THRESHOLD", "WINDOWS", "ProfileWindows", "column_distance",
           "compare"]

# A column drifts past this distance. Both measures are shares of records (KS: the largest gap
# between the two CDFs; total variation: the share of records whose value would have to
# change), so 0.1 reads "a tenth of the records moved". It sits well above the sketches'
# own error (each CDF within about 1 %) and flags a shift of half a standard deviation.
THRESHOLD = 0.1
# Seq windows a stage's profile keeps along source order: between WINDOWS and 2*WINDOWS.
WINDOWS = 8
# Records profiled at once (ProfileWindows): the default block's size.
GROUP_ROWS = 16_384
# A string column with more distinct values than this share of its values (ids, dates) is
# not compared: two samples of unique values share none, so their distance would be 1.
MOSTLY_DISTINCT = 0.5
# Points where two numeric CDFs are compared: each sketch's quantiles at these ranks.
_RANKS = np.linspace(0.0, 1.0, 65).tolist()


def column_distance(a: ColumnProfile, b: ColumnProfile) -> tuple[str, float] | None:
    """How far apart two profiles of a column are, and by which measure; None if it has none.

    Numbers: Kolmogorov-Smirnov, the largest gap between the two sketches' CDFs. Strings:
    total variation between their value shares (values beyond the kept ones pooled). Either
    way at least the change in the share of nulls, so a column gone empty drifts. Strings
    that are mostly distinct (ids, dates: MOSTLY_DISTINCT) have none.

    Example: temperatures shifted by +20 (about 3 standard deviations) -> ("ks", ~0.9).
    """
    if a.kind != b.kind or a.kind == "other":
        return None
    if a.kind == "string" and max(a.distinct_share, b.distinct_share) > MOSTLY_DISTINCT:
        return None
    nulls = abs(_share(a.nulls, a) - _share(b.nulls, b))
    if a.kind == "number":
        return "ks", max(nulls, _ks(a, b))
    return "tv", max(nulls, _tv(a, b))


def _share(n: int, column: ColumnProfile) -> float:
    total = column.count + column.nulls
    return n / total if total else 0.0


def _ks(a: ColumnProfile, b: ColumnProfile) -> float:
    empty_a = a.sketch is None or a.sketch.is_empty()
    empty_b = b.sketch is None or b.sketch.is_empty()
    if empty_a or empty_b:
        return 0.0 if empty_a == empty_b else 1.0
    assert a.sketch is not None and b.sketch is not None
    points = sorted({a.sketch.get_quantile(r) for r in _RANKS}
                    | {b.sketch.get_quantile(r) for r in _RANKS})
    cdf_a = np.asarray(a.sketch.get_cdf(points)[:-1])
    cdf_b = np.asarray(b.sketch.get_cdf(points)[:-1])
    return float(np.max(np.abs(cdf_a - cdf_b)))


def _tv(a: ColumnProfile, b: ColumnProfile) -> float:
    top_a, top_b = a.top or {}, b.top or {}
    gap, kept_a, kept_b = 0.0, 0.0, 0.0
    for value in set(top_a) | set(top_b):
        share_a, share_b = _share(top_a.get(value, 0), a), _share(top_b.get(value, 0), b)
        gap, kept_a, kept_b = gap + abs(share_a - share_b), kept_a + share_a, kept_b + share_b
    others = abs((_share(a.count, a) - kept_a) - (_share(b.count, b) - kept_b))
    return (gap + others) / 2


def compare(current: Profile, baseline: Profile,
            threshold: float = THRESHOLD) -> dict[str, dict[str, Any]]:
    """Per column of `current`: its distance to `baseline`'s, the measure, and whether it is
    past `threshold`; a column the baseline lacks (or cannot be compared) has distance None."""
    found: dict[str, dict[str, Any]] = {}
    for name, column in current.columns.items():
        other = baseline.columns.get(name)
        measured = column_distance(column, other) if other is not None else None
        distance = round(measured[1], 4) if measured else None
        found[name] = {"measure": measured[0] if measured else None, "distance": distance,
                       "threshold": threshold,
                       "drifted": distance is not None and distance > threshold}
    return found


class ProfileWindows:
    """A stage's profile built along source order, in seq windows of whole blocks.

    Blocks arrive in seq order; each joins the open window until it holds `rows` records.
    Past 2*WINDOWS windows, neighbours merge pairwise and `rows` doubles, so a stream of any
    length ends with WINDOWS to 2*WINDOWS windows of about equal size, without knowing its
    length ahead. The whole stage's profile is the merge of its windows.

    The blocks of a window are profiled together, GROUP_ROWS records at a time: a profile's
    cost is mostly fixed (a dozen Arrow kernels and a t-digest per column), and its sketch
    samples a group as it would one block (decision 52), so small blocks cost what large
    ones do. Blocks of GROUP_ROWS or more are profiled one by one, as before.
    """

    def __init__(self) -> None:
        self.windows: list[Profile] = []
        self.rows = 1  # a window's target size: grows as windows merge
        self._open = 0  # records in the open window, those waiting in `_pending` included
        self._pending: list[pa.RecordBatch] = []  # the open window's blocks not profiled yet

    def add(self, batch: pa.RecordBatch) -> None:
        """Profile one block of the stage's output (the next in seq order)."""
        if not self.windows or self._open >= self.rows:
            self._profile_pending()
            self.windows.append(Profile())
            self._open = 0
        elif self._pending and batch.schema != self._pending[0].schema:
            self._profile_pending()  # (a group is one table: one schema)
        self._pending.append(batch)
        self._open += batch.num_rows
        if sum(b.num_rows for b in self._pending) >= GROUP_ROWS:
            self._profile_pending()
        if len(self.windows) > 2 * WINDOWS:
            self._profile_pending()
            pairs = zip(self.windows[::2], self.windows[1::2] + [Profile()], strict=True)
            self.windows = [_merged(a, b) for a, b in pairs]
            self.rows = max(w.rows for w in self.windows)
            self._open = self.windows[-1].rows

    def _profile_pending(self) -> None:
        if not self._pending:
            return
        group = self._pending[0] if len(self._pending) == 1 else \
            pa.Table.from_batches(self._pending)
        self._pending = []
        profile = Profile.of(group)
        if self.windows[-1].rows:
            self.windows[-1].merge(profile)
        else:
            self.windows[-1] = profile

    def finish(self, threshold: float = THRESHOLD) -> dict[str, Any]:
        """profile.json: the whole profile, and per window its seq range and each column's
        distance to the whole (drift along source order)."""
        self._profile_pending()
        whole = Profile()
        for window in self.windows:
            whole.merge(window)
        windows = []
        for window in self.windows:
            distances = compare(window, whole, threshold)
            windows.append({"seq_min": window.seq_min, "seq_max": window.seq_max,
                            "rows": window.rows,
                            "distance": {n: d["distance"] for n, d in distances.items()}})
        return {"version": 1, **whole.to_json(), "threshold": threshold, "windows": windows}


def _merged(a: Profile, b: Profile) -> Profile:
    a.merge(b)
    return a
