"""ingest: read CSV, JSON Lines or Parquet files into blocks and give each record its seq."""

from __future__ import annotations

import glob
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from seqline.pipeline.blocks import Block, to_blocks
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import REQUIRED, ComponentSpec, StageSpec, did_you_mean

__all__ = ["SPEC", "read_blocks", "resolve_paths"]

FORMATS = ("csv", "jsonl", "parquet")

# 16,384 rows: large enough that per-block overhead (a task, a pickle) is noise, small enough
# that a window of 4x2 blocks of a wide table stays in the tens of MB.
DEFAULT_BLOCK_RECORDS = 16_384


def read_blocks(stage: StageSpec, base_dir: Path) -> Iterator[Block]:
    """Read the stage's files in declared order (glob matches sorted) as numbered blocks.

    Seq is the record's rank across all files: file order, then row order.

    Example: paths ["a.csv", "b.csv"] with 3 and 2 rows give seq 0-2 from a.csv, 3-4 from b.csv.
    """
    params = SPEC.params_with_defaults(stage)
    paths = resolve_paths(stage, base_dir)
    batches = _read_files(stage, params["format"], paths, params["schema"])
    return to_blocks(batches, int(params["block_records"]))


def resolve_paths(stage: StageSpec, base_dir: Path) -> list[Path]:
    """Expand the `paths` parameter: relative to the pipeline file, globs sorted, must exist."""
    paths = stage.params.get("paths")
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise ConfigError(
            f"{stage.where}: `paths` must be a non-empty list of file paths or globs.")
    found: list[Path] = []
    for pattern in paths:
        full = Path(pattern) if Path(pattern).is_absolute() else base_dir / pattern
        matches = sorted(glob.glob(str(full))) if glob.has_magic(pattern) else [str(full)]
        matches = [m for m in matches if Path(m).is_file()]
        if not matches:
            raise ConfigError(
                f"{stage.where}: input file {pattern!r} not found (looked for {full}). "
                "Paths are relative to the pipeline file's folder; check the name or the glob.")
        found.extend(Path(m) for m in matches)
    return found


def _read_files(stage: StageSpec, fmt: str, paths: list[Path],
                schema: dict[str, str] | None) -> Iterator[pa.RecordBatch]:
    column_types = {k: pa.type_for_alias(v) for k, v in (schema or {}).items()}
    first_schema: pa.Schema | None = None
    for path in paths:
        for batch in _read_file(stage, fmt, path, column_types):
            if first_schema is None:
                first_schema = batch.schema
                if fmt == "csv":  # later files must parse exactly like the first
                    column_types = {f.name: f.type for f in first_schema}
            elif batch.schema != first_schema:
                raise StageError(
                    f"{stage.where}: {path} has columns {batch.schema.names} of types "
                    f"{[str(t) for t in batch.schema.types]}, unlike the first file's "
                    f"{first_schema}. All files of one ingest must share a schema; declare it "
                    "with `schema:` or split the stage.", stage=stage.name)
            yield batch


def _read_file(stage: StageSpec, fmt: str, path: Path,
               column_types: dict[str, pa.DataType]) -> Iterator[pa.RecordBatch]:
    try:
        if fmt == "csv":
            convert = pacsv.ConvertOptions(column_types=column_types)
            with pacsv.open_csv(path, convert_options=convert) as reader:
                yield from reader
        elif fmt == "jsonl":
            yield from pajson.read_json(path).to_batches()
        else:
            yield from pq.ParquetFile(path).iter_batches()
    except (pa.ArrowInvalid, OSError) as exc:
        raise StageError(f"{stage.where}: cannot read {path} as {fmt}: {exc}",
                         stage=stage.name) from exc


def _validate(stage: StageSpec, base_dir: Path) -> None:
    params = SPEC.params_with_defaults(stage)
    if params["format"] not in FORMATS:
        raise ConfigError(f"{stage.where}: unknown format {params['format']!r}."
                          f"{did_you_mean(str(params['format']), list(FORMATS))} "
                          f"Formats: {', '.join(FORMATS)}.")
    if not isinstance(params["block_records"], int) or params["block_records"] < 1:
        raise ConfigError(f"{stage.where}: `block_records` must be a positive integer.")
    for column, alias in (params["schema"] or {}).items():
        try:
            pa.type_for_alias(alias)
        except ValueError as exc:
            raise ConfigError(f"{stage.where}: column {column!r} has unknown type {alias!r}; "
                              "use an Arrow type name such as int64, double or string.") from exc
    resolve_paths(stage, base_dir)


PARAMETERS: dict[str, Any] = {
    "format": REQUIRED,
    "paths": REQUIRED,
    "block_records": DEFAULT_BLOCK_RECORDS,
    "schema": None,  # {column: arrow type name}; inferred from the first file when absent
}

SPEC = ComponentSpec("ingest", "source", PARAMETERS, _validate, read_blocks,
                     doc="Files -> blocks with __seq__ in source order.")
