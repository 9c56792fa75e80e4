"""A stage's data profile: per column counts, moments, quantiles (t-digest) and top values,
mergeable, and the same bytes for the same blocks."""

from __future__ import annotations

import atexit
import base64
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasketches import tdigest_double

from seqline.pipeline.arrays import numbers
from seqline.pipeline.blocks import SEQ

__all__ = ["DIGEST_K", "SAMPLE_PER_BLOCK", "ColumnProfile", "Profile", "kind_of"]

# Apache DataSketches' t-digest at compression 400: a sketch of a few KB whatever the row
# count, most exact at the tails; on the demo's columns every quartile's rank is within
# 1.5 % (tests/unit/test_profile.py; at its default 200, within 2.5 %). Not KLL, whose
# compaction draws random bits that DataSketches seeds itself: the same blocks gave other
# bytes on every run and runner, where a t-digest fed the same values in seq order writes
# the same (decision 52).
DIGEST_K = 400
# A block feeds at most this many of its values to a column's sketch (every n-th value):
# the sketch's updates were most of the profile's cost (the t-digest's ~78 ms per million
# values and column, against ~5 ms for all the exact figures: benchmarks/PROFILE.md), so a
# block of ingest's 16,384 records gives it one in 8 (~10 ms per million). A sample of 2,048
# adds a rank error of about 1/sqrt(2,048) ~ 2.2 % to a single block's quantiles, shrinking
# as blocks add up (decision 52). Counts, nulls, min, max, mean and std
# are always exact, over every value; blocks of at most 2,048 records are sketched whole.
SAMPLE_PER_BLOCK = 2048
# Strings: distinct values counted exactly up to this many; past it the rarest are dropped
# and the counts are marked approximate (an id column must not grow the profile by its rows).
EXACT_DISTINCT = 1024
# Values kept in profile.json per string column: what a table of top values shows.
TOP_KEPT = 20
# Bars of a column's histogram (from its sketch): enough for a shape, small in a table.
HISTOGRAM_BINS = 16
QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)

Kind = Literal["number", "string", "other"]


def kind_of(type_: pa.DataType) -> Kind:
    """How a column is profiled: numbers (and booleans, as 0/1) get moments and quantiles,
    strings top values, anything else (dates, lists, bytes) counts and nulls only."""
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_boolean(type_):
        return "number"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "string"
    return "other"


# Every column profile alive, whose sketches are dropped as the interpreter exits: nanobind,
# DataSketches' binding, prints each instance still alive then as a leak on stderr (27 lines
# after the one line of a run cancelled mid-stage, whose stage threads still hold profiles).
# (By id: a dataclass with equality is not hashable.)
_LIVE: weakref.WeakValueDictionary[int, ColumnProfile] = weakref.WeakValueDictionary()


@atexit.register
def _drop_sketches() -> None:
    for column in list(_LIVE.values()):
        column.sketch = None


@dataclass
class ColumnProfile:
    """One column's profile: exact count, nulls, min, max, mean and M2 (merged by Chan's
    formula), a t-digest of its numbers or counts of its strings.

    Example: ColumnProfile.of(pa.array([1.0, None, 3.0])) -> count 2, nulls 1, min 1.0,
    max 3.0, mean 2.0, std 1.414… (sample standard deviation, as pandas').
    """

    kind: Kind
    count: int = 0  # values that are not null (nor NaN)
    nulls: int = 0  # nulls and NaNs, as pandas counts them missing
    min: Any = None
    max: Any = None
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations from the mean
    sketch: tdigest_double | None = None
    top: dict[str, int] | None = None
    approximate_top: bool = False
    # distinct strings counted, where `top` holds only the most frequent (read from JSON)
    distinct: int | None = None

    def __post_init__(self) -> None:
        _LIVE[id(self)] = self

    @property
    def distinct_share(self) -> float:
        """Distinct strings per value: near 1 for ids and dates, whose shares say nothing."""
        distinct = self.distinct if self.distinct is not None else len(self.top or {})
        return distinct / self.count if self.count else 0.0

    @classmethod
    def of(cls, column: pa.Array | pa.ChunkedArray) -> ColumnProfile:
        """The profile of one block's column (pyarrow.compute over the whole array)."""
        if pa.types.is_dictionary(column.type):  # Parquet's categories: profiled as values
            column = pc.cast(column, column.type.value_type)
        profile = cls(kind_of(column.type))
        profile.nulls = column.null_count
        if profile.kind == "number":
            profile._add_numbers(column)
        elif profile.kind == "string":
            profile._add_strings(column)
        else:
            profile.count = len(column) - column.null_count
        return profile

    def _add_numbers(self, column: pa.Array | pa.ChunkedArray) -> None:
        if pa.types.is_boolean(column.type):
            column = pc.cast(column, pa.int8())
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        # NumPy over a view of the values: a block's figures in a few microseconds each,
        # where each Arrow kernel's call costs ~15 µs (most of a small block's profile)
        found = numbers(column.drop_null() if column.null_count else column)
        if found.dtype.kind == "f":
            nan = np.isnan(found)
            if nan.any():
                found = found[~nan]
                self.nulls += len(nan) - len(found)
        self.count = len(found)
        self.sketch = tdigest_double(DIGEST_K)
        if not self.count:
            return
        self.min, self.max = found.min().item(), found.max().item()
        self.mean = float(found.mean(dtype=np.float64))
        self.m2 = float(found.var(dtype=np.float64)) * self.count
        step = -(-len(found) // SAMPLE_PER_BLOCK)  # ceil: at most SAMPLE_PER_BLOCK values
        # sorted here (a copy, which the sketch needs: it refuses Arrow's read-only views):
        # the sketch sorts what it is given, and NumPy's sort of sorted values is the
        # cheaper half of that work
        sample = found[::step].astype(np.float64)
        sample.sort()
        self.sketch.update(sample)

    def _add_strings(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.count = len(column) - column.null_count
        self.top = {}
        if not self.count:
            return
        counted = pc.value_counts(column)  # one row per distinct value: per value, not record
        # min and max of the distinct values: a few, where comparing every string is not
        bounds = pc.min_max(counted.field("values"))
        self.min, self.max = bounds["min"].as_py(), bounds["max"].as_py()
        if len(counted) > EXACT_DISTINCT:
            keep = pc.select_k_unstable(counted.field("counts"), EXACT_DISTINCT,
                                        sort_keys=[("dummy", "descending")])
            counted = counted.take(keep)
            self.approximate_top = True
        for value, n in zip(counted.field("values").to_pylist(),
                            counted.field("counts").to_pylist(), strict=True):
            if value is not None:
                self.top[value] = n

    def merge(self, other: ColumnProfile) -> None:
        """Add `other` (the same column, other records) into this profile."""
        n = self.count + other.count
        if other.count:
            delta = other.mean - self.mean
            self.mean += delta * other.count / n
            self.m2 += other.m2 + delta * delta * self.count * other.count / n
            self.min = other.min if self.min is None else min(self.min, other.min)
            self.max = other.max if self.max is None else max(self.max, other.max)
        self.count, self.nulls = n, self.nulls + other.nulls
        if self.sketch is not None and other.sketch is not None:
            self.sketch.merge(other.sketch)
        if self.top is not None and other.top is not None:
            for value, count in other.top.items():
                self.top[value] = self.top.get(value, 0) + count
            self.approximate_top |= other.approximate_top
            if len(self.top) > EXACT_DISTINCT:
                kept = sorted(self.top.items(), key=lambda kv: -kv[1])[:EXACT_DISTINCT]
                self.top, self.approximate_top = dict(kept), True

    @property
    def std(self) -> float | None:
        """The sample standard deviation (ddof 1, as pandas' describe); None below 2 values."""
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else None

    def quantiles(self) -> dict[str, float]:
        """p1 … p99 from the sketch."""
        if self.sketch is None or self.sketch.is_empty():
            return {}
        found = [self.sketch.get_quantile(q) for q in QUANTILES]
        return {f"p{round(q * 100)}": float(v) for q, v in zip(QUANTILES, found, strict=True)}

    def histogram(self) -> dict[str, list[float]] | None:
        """HISTOGRAM_BINS equal-width bars from min to max, their counts from the sketch."""
        if self.sketch is None or self.sketch.is_empty() or self.min is None:
            return None
        low, high = float(self.min), float(self.max)
        if high <= low:
            return {"edges": [low, high], "counts": [float(self.count)]}
        edges = np.linspace(low, high, HISTOGRAM_BINS + 1).tolist()
        shares = self.sketch.get_pmf(edges[1:-1])
        return {"edges": edges, "counts": [round(s * self.count, 1) for s in shares]}

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; the sketch as base64 of its own serialize()."""
        data: dict[str, Any] = {
            "kind": self.kind, "count": self.count, "nulls": self.nulls,
            "min": _plain(self.min), "max": _plain(self.max)}
        if self.kind == "number":
            data |= {"mean": _plain(self.mean) if self.count else None, "m2": _plain(self.m2),
                     "std": _plain(self.std), "quantiles": self.quantiles(),
                     "histogram": self.histogram(),
                     "tdigest": (base64.b64encode(self.sketch.serialize()).decode()
                                 if self.sketch else None)}
        if self.top is not None:
            kept = sorted(self.top.items(), key=lambda kv: (-kv[1], kv[0]))
            data |= {"top": [[v, n] for v, n in kept[:TOP_KEPT]], "distinct": len(self.top),
                     "approximate_top": self.approximate_top or len(kept) > TOP_KEPT}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnProfile:
        """The profile `to_json` wrote (strings: only the top values it kept)."""
        sketch = data.get("tdigest")
        return cls(data["kind"], data["count"], data["nulls"], data.get("min"), data.get("max"),
                   data.get("mean") or 0.0, data.get("m2") or 0.0,
                   tdigest_double.deserialize(base64.b64decode(sketch)) if sketch else None,
                   {v: n for v, n in data["top"]} if data.get("top") is not None else None,
                   bool(data.get("approximate_top")), data.get("distinct"))


def _plain(value: Any) -> Any:
    """JSON has no NaN or infinity: those are written as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


@dataclass
class Profile:
    """The profile of consecutive records: each column's (the seq column is not a feature),
    their count and seq range. Profiles of blocks merge into the profile of their union."""

    rows: int = 0
    seq_min: int | None = None
    seq_max: int | None = None
    columns: dict[str, ColumnProfile] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: pa.RecordBatch | pa.Table) -> Profile:
        """One block's profile (or consecutive blocks', as one table).

        Example: a block of seq 10-12 with `t` = [1.0, 2.0, 6.0] -> rows 3, seq 10-12,
        columns {"t": count 3, mean 3.0, …}.
        """
        profile = cls(rows=batch.num_rows)
        if SEQ in batch.schema.names and batch.num_rows:
            bounds = pc.min_max(batch.column(SEQ))
            profile.seq_min, profile.seq_max = bounds["min"].as_py(), bounds["max"].as_py()
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name != SEQ:
                profile.columns[name] = ColumnProfile.of(column)
        return profile

    def merge(self, other: Profile) -> None:
        """Add `other` (later records of the same stage) into this profile."""
        self.rows += other.rows
        if other.seq_min is not None:
            self.seq_min = other.seq_min if self.seq_min is None else min(self.seq_min,
                                                                         other.seq_min)
            self.seq_max = other.seq_max if self.seq_max is None else max(self.seq_max or 0,
                                                                         other.seq_max or 0)
        for name, column in other.columns.items():
            if name in self.columns:
                self.columns[name].merge(column)
            else:
                self.columns[name] = _copy(column)

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "seq_min": self.seq_min, "seq_max": self.seq_max,
                "columns": {name: c.to_json() for name, c in self.columns.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Profile:
        return cls(data["rows"], data.get("seq_min"), data.get("seq_max"),
                   {name: ColumnProfile.from_json(c) for name, c in data["columns"].items()})


def _copy(column: ColumnProfile) -> ColumnProfile:
    """A column profile that merging into will not change `column` (its sketch copied)."""
    sketch = tdigest_double.deserialize(column.sketch.serialize()) if column.sketch else None
    top = dict(column.top) if column.top is not None else None
    return ColumnProfile(column.kind, column.count, column.nulls, column.min, column.max,
                         column.mean, column.m2, sketch, top, column.approximate_top,
                         column.distinct)
