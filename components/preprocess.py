"""preprocess: a user function over blocks, run in parallel, output kept in seq order."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from seqline.components.tfrecord_write import WRITE_PARAMETERS, make_sink, validate_write
from seqline.pipeline.blocks import SEQ, seq_of
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.functions import load_function
from seqline.pipeline.specs import REQUIRED, ComponentSpec, StageSpec, did_you_mean
from seqline.pipeline.stage import MapTask

__all__ = ["SPEC", "apply_batch", "make_task"]

BATCH_FORMATS = ("pyarrow", "numpy", "pandas", "record")


def make_task(stage: StageSpec, base_dir: Path, out_dir: Path) -> MapTask:
    """The stage as a MapTask that any runner can ship to its workers.

    Each block's output is written as one TFRecord shard by the worker that made it (the
    artifact's shards are then in seq order by block index), and streamed on to the next stage.
    With an error budget, rows the function fails on go to dead letters (see isolate.py).

    Example: fn "features:add_columns" with batch_format "pandas" calls add_columns(df) on each
    block as a DataFrame (with `__seq__`) and expects a DataFrame back.
    """
    params = SPEC.params_with_defaults(stage)
    fn = functools.partial(apply_batch, fn_ref=params["fn"], batch_format=params["batch_format"],
                           base_dir=str(base_dir), fn_kwargs=params["fn_kwargs"] or {})
    return MapTask(stage.name, fn, dead_letters=stage.errors is not None,
                   sink=make_sink(params, out_dir))


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


def _validate(stage: StageSpec, base_dir: Path) -> None:
    params = SPEC.params_with_defaults(stage)
    if params["batch_format"] not in BATCH_FORMATS:
        raise ConfigError(
            f"{stage.where}: unknown batch_format {params['batch_format']!r}."
            f"{did_you_mean(str(params['batch_format']), list(BATCH_FORMATS))} "
            f"Formats: {', '.join(BATCH_FORMATS)}.")
    validate_write(stage, params)
    if not isinstance(params["fn_kwargs"] or {}, dict):
        raise ConfigError(f"{stage.where}: `fn_kwargs` must be a mapping of keyword arguments.")
    try:
        load_function(params["fn"], str(base_dir))
    except ConfigError as exc:
        raise ConfigError(f"{stage.where}: {exc}") from exc


PARAMETERS: dict[str, Any] = {
    "fn": REQUIRED,
    "batch_format": "pyarrow",
    "fn_kwargs": None,  # keyword arguments passed to every call of fn
    **WRITE_PARAMETERS,
}

SPEC = ComponentSpec("preprocess", "map", PARAMETERS, _validate, make_task,
                     doc="Records -> records through a user function, in parallel, in order, "
                         "stored as TFRecord shards.", writes_records=True)
