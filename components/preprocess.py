"""preprocess: a user function over blocks, run in parallel, output kept in seq order."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from seqline.components.tfrecord_write import (
    DEFAULT_LEVEL,
    Compression,
    CompressionLevel,
    make_sink,
)
from seqline.pipeline.blocks import SEQ, seq_of
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.functions import FunctionRef, load_function
from seqline.pipeline.params import StageParams
from seqline.pipeline.specs import MapSpec, Sample, StageSpec
from seqline.pipeline.storage import Folder
from seqline.pipeline.tasks import MapTask

__all__ = ["SPEC", "PreprocessParams", "apply_batch", "make_task"]


class PreprocessParams(StageParams):
    """preprocess's parameters: the user function, what it takes, and how output is stored."""

    fn: FunctionRef = Field(description=(
        "The function, 'module:function', imported from the pipeline file's folder."))
    batch_format: Literal["pyarrow", "numpy", "pandas", "record"] = Field(
        "pyarrow", description="What fn receives: a RecordBatch, a dict of arrays, a "
                               "DataFrame, or one record (a dict) at a time.")
    fn_kwargs: dict[str, Any] = Field(default_factory=dict, description=(
        "Keyword arguments passed to every call of fn."))
    compression: Compression = "gzip"
    compression_level: CompressionLevel = DEFAULT_LEVEL


def make_task(stage: StageSpec[PreprocessParams], base_dir: Path, out_dir: Folder) -> MapTask:
    """The stage as a MapTask that any runner can ship to its workers.

    Each block's output is written as one TFRecord shard by the worker that made it (the
    artifact's shards are then in seq order by block index), and streamed on to the next stage.
    With an error budget, rows the function fails on go to dead letters (see isolate.py).

    Example: fn "features:add_columns" with batch_format "pandas" calls add_columns(df) on each
    block as a DataFrame (with `__seq__`) and expects a DataFrame back.
    """
    p = stage.params
    fn = functools.partial(apply_batch, fn_ref=p.fn, batch_format=p.batch_format,
                           base_dir=str(base_dir), fn_kwargs=dict(p.fn_kwargs))
    return MapTask(stage.name, fn, dead_letters=stage.errors is not None,
                   sink=make_sink(p.compression, p.compression_level, out_dir),
                   retries=stage.retries, retry_user_errors=stage.retry_user_errors)


def apply_batch(batch: pa.RecordBatch, *, fn_ref: str, batch_format: str, base_dir: str,
                fn_kwargs: dict[str, Any] | None = None) -> Any:
    """Call the user function on `batch` in its batch format and convert the answer back.

    Returns whatever the user gave when it cannot be converted, so that the stage's contract
    check reports the wrong type with the stage and block.
    """
    fn = functools.partial(load_function(fn_ref, base_dir), **(fn_kwargs or {}))
    if batch_format == "pyarrow":
        return _as_batch(fn(batch))
    if batch_format == "numpy":
        arrays = {name: col.to_numpy(zero_copy_only=False)
                  for name, col in zip(batch.schema.names, batch.columns, strict=True)}
        out = fn(arrays)
        return pa.RecordBatch.from_pydict(out) if isinstance(out, dict) else out
    if batch_format == "pandas":
        out = fn(batch.to_pandas())
        import pandas as pd  # pandas is heavy; only this format needs it
        return pa.RecordBatch.from_pandas(out, preserve_index=False) \
            if isinstance(out, pd.DataFrame) else out
    return _apply_per_record(fn, batch)


def _apply_per_record(fn: Callable[[dict], Any], batch: pa.RecordBatch) -> pa.RecordBatch:
    """Per-record functions return a dict, None (filter) or a list of dicts (explode).

    Each output row inherits its parent's seq, so record functions never handle `__seq__`.
    """
    rows: list[dict] = []
    parents: list[int] = []
    for seq, record in zip(seq_of(batch).tolist(), batch.to_pylist(), strict=True):
        out = fn(record)
        emitted = [] if out is None else out if isinstance(out, list) else [out]
        for row in emitted:
            if not isinstance(row, dict):
                raise TypeError(f"a record function must return a dict, None or a list of "
                                f"dicts; got {type(row).__name__} for seq {seq}")
            row.pop(SEQ, None)
            rows.append(row)
            parents.append(seq)
    table = pa.Table.from_pylist(rows) if rows else None
    if table is None:
        return pa.RecordBatch.from_pydict({SEQ: pa.array([], pa.int64())})
    return _as_batch(table.append_column(SEQ, pa.array(np.array(parents, dtype=np.int64))))


def _as_batch(out: Any) -> Any:
    if isinstance(out, pa.Table):
        out = out.combine_chunks()
        batches = out.to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=out.schema)
    return out


def _validate(stage: StageSpec[PreprocessParams], base_dir: Path) -> None:
    try:
        load_function(stage.params.fn, str(base_dir))
    except ConfigError as exc:
        raise ConfigError(f"{stage.where}: {exc}") from exc


def _preview(stage: StageSpec[PreprocessParams], base_dir: Path, sample: Sample | None
             ) -> pa.RecordBatch | None:
    """Before anything runs: the function's answer for a sample of its input, so that the
    stages after it see the columns it makes; None when that is not a batch of records."""
    if sample is None:
        return None
    p = stage.params
    out = apply_batch(sample.records, fn_ref=p.fn, batch_format=p.batch_format,
                      base_dir=str(base_dir), fn_kwargs=dict(p.fn_kwargs))
    return out if isinstance(out, pa.RecordBatch) else None


SPEC = MapSpec(name="preprocess", params=PreprocessParams, run=make_task, writes="records",
               validate=_validate, preview=_preview,
               doc="Records -> records through a user function, in parallel, in order, "
                   "stored as TFRecord shards.")
