"""ingest: read CSV, JSON Lines, Parquet or TFRecord files into blocks, each record with its seq."""

from __future__ import annotations

import glob
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import fsspec
import pyarrow as pa
from pydantic import AfterValidator, BeforeValidator, Field

from seqline.components.readers import Part, ReadError, Source, read_source
from seqline.pipeline.blocks import SEQ, recut, seq_of, with_seq
from seqline.pipeline.deadletters import DeadLetter
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.params import StageParams
from seqline.pipeline.specs import ComponentSpec, StageSpec
from seqline.pipeline.stage import BlockResult, Counts, MapBlocks

__all__ = ["SPEC", "IngestParams", "read_blocks", "resolve_sources"]

# 16,384 rows: large enough that per-block overhead (a task, a pickle) is noise, small enough
# that a window of 4x2 blocks of a wide table stays in the tens of MB.
DEFAULT_BLOCK_RECORDS = 16_384


def _arrow_type(alias: str) -> str:
    try:
        pa.type_for_alias(alias)
    except ValueError:
        raise ValueError("an Arrow type name such as int64, double, string or "
                         "timestamp[us]") from None
    return alias


def _listed(value: object) -> object:
    return [value] if isinstance(value, str) else value  # `paths: data.csv` means one file


class IngestParams(StageParams):
    """ingest's parameters: which files, in which format, cut into blocks of how many records."""

    format: Literal["csv", "jsonl", "parquet", "tfrecord"] = Field(
        description="The files' format.")
    paths: Annotated[list[str], BeforeValidator(_listed, json_schema_input_type=list[str] | str)] \
        = Field(min_length=1, description=(
            "Files in order: paths relative to the pipeline file, globs (matches sorted) or "
            "fsspec URLs (s3://, gs://, memory://)."))
    block_records: int = Field(DEFAULT_BLOCK_RECORDS, ge=1, description=(
        "Records per block, the unit of parallel work."))
    column_types: dict[str, Annotated[str, AfterValidator(_arrow_type)]] | None = Field(
        None, alias="schema", description=(
            "{column: Arrow type name}; inferred from the first file when absent."))


def read_blocks(stage: StageSpec[IngestParams], base_dir: Path,
                map_blocks: MapBlocks | None = None) -> Iterator[BlockResult]:
    """Read the stage's files in declared order (glob matches sorted) as numbered blocks.

    Seq is the record's rank across all files: file order, then record order; a bad record
    keeps its seq and goes to dead letters (with an error budget) or fails the run.

    Example: paths ["a.csv", "b.csv"] with 3 and 2 rows give seq 0-2 from a.csv, 3-4 from
    b.csv; if a.csv's second row were malformed, seq 1 would be a dead letter.

    Raises:
        StageError: a bad record without an error budget (naming file, line and seq), or a
            file that cannot be read at all.
    """
    letters: list[DeadLetter] = []
    batches = _read_all(stage, resolve_sources(stage, base_dir), letters)
    index = 0
    for block in recut(batches, stage.params.block_records):
        yield _result(stage, index, block.batch, letters)
        index += 1
    if letters:  # bad records after the last good one
        yield _result(stage, index, None, letters)


def _result(stage: StageSpec[IngestParams], index: int, batch: pa.RecordBatch | None,
            letters: list[DeadLetter]) -> BlockResult:
    dead = tuple(letters)
    letters.clear()
    rows = batch.num_rows if batch is not None else 0
    first = int(seq_of(batch)[0]) if rows else None
    counts = Counts(records_in=rows + len(dead), records_out=rows, dead_lettered=len(dead))
    if batch is None:
        batch = pa.RecordBatch.from_pydict({SEQ: pa.array([], pa.int64())})
    return BlockResult(stage.name, index, first, batch, counts, dead_letters=dead)


def _read_all(stage: StageSpec[IngestParams], sources: list[Source],
              letters: list[DeadLetter]) -> Iterator[pa.RecordBatch]:
    types = {k: pa.type_for_alias(v) for k, v in (stage.params.column_types or {}).items()}
    first_schema: pa.Schema | None = None
    base = 0  # seq of the current file's first record
    for source in sources:
        end = 0
        for part in _parts(stage, source, stage.params.format, types):
            for bad in part.bad:
                letter = DeadLetter(base + bad.record, bad.reason, source.name, bad.line, bad.raw)
                if stage.errors is None:
                    raise _bad_record_error(stage, letter)
                letters.append(letter)
            end = part.end
            if part.batch.num_rows == 0:
                continue
            if first_schema is None:
                first_schema = part.batch.schema
                types = dict(zip(first_schema.names, first_schema.types, strict=True))
            elif part.batch.schema != first_schema:
                raise StageError(
                    f"{stage.where}: {source.name} has columns {part.batch.schema.names} of "
                    f"types {[str(t) for t in part.batch.schema.types]}, unlike the first "
                    f"file's {first_schema}. All files of one ingest must share a schema; "
                    "declare it with `schema:` or split the stage.", stage=stage.name)
            yield with_seq(part.batch, base + part.records)
        base += end


def _parts(stage: StageSpec[IngestParams], source: Source, fmt: str,
           types: dict[str, pa.DataType]) -> Iterator[Part]:
    try:
        yield from read_source(source, fmt, types)
    except ReadError as exc:
        raise StageError(f"{stage.where}: {exc}", stage=stage.name) from exc
    except OSError as exc:
        raise StageError(f"{stage.where}: cannot read {source.name}: {exc}",
                         stage=stage.name) from exc


def _bad_record_error(stage: StageSpec[IngestParams], letter: DeadLetter) -> StageError:
    return StageError(
        f"{stage.where}: bad record in {letter.where()}: {letter.reason}\n"
        f"  the line: {letter.raw!r}\n"
        "Fix the input, or give the pipeline an error budget (e.g. `errors: {max_fraction: "
        "0.01}`) to set bad records aside as dead letters.",
        stage=stage.name, seq=letter.seq)


def resolve_sources(stage: StageSpec[IngestParams], base_dir: Path) -> list[Source]:
    """Expand `paths`: relative to the pipeline file or fsspec URLs; globs sorted; must exist."""
    found: list[Source] = []
    for pattern in stage.params.paths:
        matches = _expand_url(pattern) if "://" in pattern else _expand_local(pattern, base_dir)
        if not matches:
            raise ConfigError(
                f"{stage.where}: input file {pattern!r} not found"
                + ("" if "://" in pattern else f" (looked for {_local(pattern, base_dir)})")
                + ". Paths are relative to the pipeline file's folder; check the name or glob.")
        found.extend(matches)
    return found


def _local(pattern: str, base_dir: Path) -> Path:
    return Path(pattern) if Path(pattern).is_absolute() else base_dir / pattern


def _expand_local(pattern: str, base_dir: Path) -> list[Source]:
    full = str(_local(pattern, base_dir))
    matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
    return [Source(m, local=True) for m in matches if Path(m).is_file()]


def _expand_url(url: str) -> list[Source]:
    fs, path = fsspec.core.url_to_fs(url)
    names = sorted(fs.glob(path)) if glob.has_magic(path) else [path]
    names = [n for n in names if fs.isfile(n)]
    return [Source(fs.unstrip_protocol(n), local=False) for n in names]


def _validate(stage: StageSpec[IngestParams], base_dir: Path) -> None:
    resolve_sources(stage, base_dir)


SPEC = ComponentSpec("ingest", IngestParams, read_blocks, reads="files", writes="stream",
                     validate=_validate, doc="Files -> blocks with __seq__ in source order.")
