"""Finding the rows a batch function fails on, by bisection, so one bad row costs one row."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from seqline.pipeline.blocks import SEQ, seq_of
from seqline.pipeline.deadletters import DeadLetter

__all__ = ["RowFailed", "apply_isolating"]


class RowFailed(Exception):
    """The function failed on one row (seq) even alone: carries the row's own exception."""

    def __init__(self, seq: int, error: BaseException) -> None:
        super().__init__(f"seq {seq}: {type(error).__name__}: {error}")
        self.seq, self.error = seq, error


def apply_isolating(fn: Callable[[pa.RecordBatch], Any], batch: pa.RecordBatch,
                    dead_letters: bool) -> tuple[Any, list[DeadLetter]]:
    """Call `fn(batch)`; if it raises, find the rows it fails on alone.

    Without dead letters, raise `RowFailed` for the first such row (found in O(log n) calls).
    With them, set every such row aside and return the output of the rest, concatenated in
    order (O(bad rows x log n) calls). This assumes `fn` works row by row, as a map stage's
    function must; if no single row fails, the batch-level error is raised as it was.

    Example: fn failing on seq 7 of a 16-row block, with dead letters: returns fn's output
    for the other 15 rows and one DeadLetter(seq=7, reason="ValueError: ...").
    """
    try:
        return fn(batch), []
    except Exception as exc:
        if batch.num_rows <= 1 or not dead_letters:
            first = _first_failing(fn, batch) if batch.num_rows > 1 else (0, exc)
            if first is None:
                raise
            raise RowFailed(int(seq_of(batch)[first[0]]), first[1]) from first[1]
        if _fails_everywhere(fn, batch):
            raise  # a broken function, not bad rows: fail instead of dead-lettering them all
        outs: list[Any] = []
        bad: list[tuple[int, BaseException]] = []
        _bisect(fn, batch, 0, outs, bad)
        if not bad:
            raise
    letters = [_letter(batch, row, error) for row, error in bad]
    return _concat(outs), letters


def _concat(outs: list[Any]) -> Any:
    """The outputs of the good parts as one batch (or the first non-batch, for the check)."""
    odd = next((o for o in outs if not isinstance(o, pa.RecordBatch)), None)
    if odd is not None:
        return odd
    if not outs:
        return pa.RecordBatch.from_pydict({SEQ: pa.array([], pa.int64())})
    return pa.concat_batches(outs) if sum(o.num_rows for o in outs) else outs[0]


def _bisect(fn: Callable, batch: pa.RecordBatch, start: int, outs: list,
            bad: list[tuple[int, BaseException]]) -> None:
    try:
        outs.append(fn(batch))
        return
    except Exception as exc:
        if batch.num_rows == 1:
            bad.append((start, exc))
            return
    half = batch.num_rows // 2
    _bisect(fn, batch.slice(0, half), start, outs, bad)
    _bisect(fn, batch.slice(half), start + half, outs, bad)


def _first_failing(fn: Callable, batch: pa.RecordBatch) -> tuple[int, BaseException] | None:
    """The lowest row that fails alone, descending into the left half whenever it fails."""
    start, part, error = 0, batch, None
    while part.num_rows > 1:
        half = part.num_rows // 2
        try:
            fn(part.slice(0, half))
        except Exception:
            part = part.slice(0, half)
            continue
        start, part = start + half, part.slice(half)
    try:
        fn(part)
    except Exception as exc:
        error = exc
    return (start, error) if error is not None else None


def _fails_everywhere(fn: Callable, batch: pa.RecordBatch) -> bool:
    """True if the first, middle and last rows each fail alone: the function is broken."""
    rows = {0, batch.num_rows // 2, batch.num_rows - 1}
    for row in rows:
        try:
            fn(batch.slice(row, 1))
            return False
        except Exception:
            pass
    return len(rows) == 3


def _letter(batch: pa.RecordBatch, row: int, error: BaseException) -> DeadLetter:
    record = batch.slice(row, 1).to_pylist()[0]
    for field in batch.schema:  # a float32 as written (50.7), not widened (50.70000076293945)
        if pa.types.is_float32(field.type) and record[field.name] is not None:
            record[field.name] = float(str(np.float32(record[field.name])))
    seq = record.pop("__seq__")
    return DeadLetter(seq=int(seq), reason=f"{type(error).__name__}: {error}",
                      raw=json.dumps(record, default=str, sort_keys=True))
