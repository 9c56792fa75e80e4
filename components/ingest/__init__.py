"""ingest: read CSV, JSON Lines, Parquet or TFRecord files into blocks, each record with its seq.

On the driver, or on the runner's workers a range of a file each (components/ingest/ranges.py):
the same blocks either way.
"""

from __future__ import annotations

import glob
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
from pydantic import AfterValidator, BeforeValidator, Field

from seqline.components.ingest.ranges import (
    Range,
    bad_record_error,
    plan_ranges,
    read_parallel,
    read_parts,
    schema_mismatch,
)
from seqline.components.ingest.readers import Part, Source, first_part_schema
from seqline.pipeline.blocks import SEQ, recut, seq_of, with_seq
from seqline.pipeline.deadletters import DeadLetter
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.params import StageParams
from seqline.pipeline.specs import Sample, SourceSpec, StageSpec
from seqline.pipeline.tasks import BlockResult, Counts, MapBlocks

__all__ = ["SPEC", "IngestParams", "read_blocks", "resolve_sources"]

# 16,384 rows: large enough that per-block overhead (a task, a pickle) is noise, small enough
# that a window of 4x2 blocks of a wide table stays in the tens of MB.
DEFAULT_BLOCK_RECORDS = 16_384
# Ranges of 16 MiB: a worker parses one in well under a second (Arrow, one core), and a window
# of 4x2 ranges in flight holds about 128 MiB of text plus its columns.
DEFAULT_RANGE_BYTES = 16 * 1024 * 1024
# `parallel: auto` reads on the workers from 1 GiB of input files (as stored) on. Below
# that the driver's Arrow reader (multi-threaded, no trip back) finishes first on one machine:
# measured 2x faster in wall time on 205 MiB with 2 cores, see benchmarks/INGEST.md. Above
# it the CPU the driver frees (about 60%), and workers on other nodes, are worth the trip.
PARALLEL_MIN_BYTES = 1024 * 1024 * 1024
# TFRecords are decoded by seqline (NumPy, one core) wherever they are read, not by a
# multi-threaded Arrow reader: on the driver that one core is the stage's limit. `auto` reads
# them on the workers from 16 MiB on (gzip shards of 65,536 Examples, 2 cores: driver and
# workers even at 8 shards, 12.5 MiB; at 16 shards the workers 8 % faster and the driver's CPU
# 2.4 -> 1.3 s; at 4 shards the driver 8 % faster; benchmarks/INGEST.md).
TFRECORD_PARALLEL_MIN_BYTES = 16 * 1024 * 1024


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
            "{column: Arrow type name}; inferred from the first file when absent. A "
            "TFRecord feature is read as a type its list holds: int64 (int64_list), float or "
            "double (float_list), string, binary or a date (bytes_list)."))
    parallel: bool | Literal["auto"] = Field("auto", description=(
        "Read on the runner's workers: true, false, or auto (when the input is 1 GiB or "
        "more, 16 MiB or more of TFRecords, and makes at least 2 ranges). The same records, "
        "seq and dead letters either way."))
    range_bytes: int = Field(DEFAULT_RANGE_BYTES, ge=1024, description=(
        "Bytes of input per worker task when reading in parallel: files are cut at line ends "
        "(CSV, JSON Lines) or between row groups (Parquet); compressed and TFRecord files are "
        "read whole."))


def read_blocks(stage: StageSpec[IngestParams], base_dir: Path,
                map_blocks: MapBlocks | None = None) -> Iterator[BlockResult]:
    """Read the stage's files in declared order (glob matches sorted) as numbered blocks.

    Seq is the record's rank across all files: file order, then record order; a bad record
    keeps its seq and goes to dead letters (with an error budget) or fails the run. Given the
    runner's `map_blocks`, large inputs are read on the workers (see `parallel`), with the
    same records, seq, blocks and dead letters as read here on the driver.

    Example: paths ["a.csv", "b.csv"] with 3 and 2 rows give seq 0-2 from a.csv, 3-4 from
    b.csv; if a.csv's second row were malformed, seq 1 would be a dead letter.

    Raises:
        StageError: a bad record without an error budget (naming file, line and seq), or a
            file that cannot be read at all.
    """
    letters: list[DeadLetter] = []
    reader = _DriverReader(stage, letters)
    sources = resolve_sources(stage, base_dir)
    ranges = _ranges_for_workers(stage, sources, map_blocks)
    # Fixed once, here, as driver ingest would; None: not one good record, nothing to split.
    schema = reader.first_schema_of(sources) if ranges else None
    if map_blocks is not None and ranges and schema is not None:
        batches: Iterator[pa.RecordBatch] = read_parallel(
            stage.where, stage.name, stage.params.format, schema, ranges, map_blocks,
            reader.take, reader.read_file)
    else:
        batches = reader.read_all(sources)
    index = 0
    for block in recut(batches, stage.params.block_records):
        # A block carries the dead letters before its last record: the same blocks in both
        # modes, however the readers' pieces fell.
        last = int(seq_of(block.batch)[-1])
        held = next((i for i, x in enumerate(letters) if x.seq > last), len(letters))
        yield _result(stage, index, block.batch, letters[:held])
        del letters[:held]
        index += 1
    if letters:  # bad records after the last good one
        yield _result(stage, index, None, letters)


def _ranges_for_workers(stage: StageSpec[IngestParams], sources: list[Source],
                        map_blocks: MapBlocks | None) -> list[Range]:
    """The plan for reading on the workers, or [] to read on the driver (see `parallel`)."""
    params = stage.params
    if map_blocks is None or params.parallel is False:
        return []
    ranges, total = plan_ranges(sources, params.format, params.range_bytes)
    least = TFRECORD_PARALLEL_MIN_BYTES if params.format == "tfrecord" else PARALLEL_MIN_BYTES
    if params.parallel == "auto" and (total < least or len(ranges) < 2):
        return []
    return ranges


def _result(stage: StageSpec[IngestParams], index: int, batch: pa.RecordBatch | None,
            letters: list[DeadLetter]) -> BlockResult:
    dead = tuple(letters)
    rows = batch.num_rows if batch is not None else 0
    first = int(seq_of(batch)[0]) if rows else None
    counts = Counts(records_in=rows + len(dead), records_out=rows, dead_lettered=len(dead))
    if batch is None:
        batch = pa.RecordBatch.from_pydict({SEQ: pa.array([], pa.int64())})
    return BlockResult(stage.name, index, first, batch, counts, dead_letters=dead)


class _DriverReader:
    """Reading files on the driver, part by part; the first file's first records fix the schema."""

    def __init__(self, stage: StageSpec[IngestParams], letters: list[DeadLetter]) -> None:
        self.stage, self.letters = stage, letters
        self.types = {k: pa.type_for_alias(v) for k, v in (stage.params.column_types or {}).items()}
        self.first_schema: pa.Schema | None = None

    def read_all(self, sources: list[Source]) -> Iterator[pa.RecordBatch]:
        base = 0  # seq of the current file's first record
        for source in sources:
            base += yield from self.read_file(source, base, 0)

    def read_file(self, source: Source, base: int, skip: int
                  ) -> Generator[pa.RecordBatch, None, int]:
        """The file's records from its record `skip` on, numbered from seq `base`; returns
        the file's record count (bad records included)."""
        end = 0
        for part in self._parts(source):
            for bad in part.bad:
                if bad.record >= skip:
                    self.take(DeadLetter(base + bad.record, bad.reason, source.name, bad.line,
                                         bad.raw))
            end = part.end
            if part.batch.num_rows == 0 or end <= skip:
                continue
            self._check_schema(source, part.batch.schema)
            batch = with_seq(part.batch, base + part.records)
            yield batch.filter(pa.array(part.records >= skip)) if skip else batch
        return end

    def first_schema_of(self, sources: list[Source]) -> pa.Schema | None:
        """The schema driver ingest would fix: its first non-empty part's (read, not kept)."""
        if self.stage.params.format == "tfrecord" and sources:
            known = first_part_schema(sources[0], self.types)
            if known is not None:
                self._check_schema(sources[0], known)
                return self.first_schema
        for source in sources:
            for part in self._parts(source):
                if part.batch.num_rows:
                    self._check_schema(source, part.batch.schema)
                    return self.first_schema
        return None

    def take(self, letter: DeadLetter) -> None:
        if self.stage.errors is None:
            raise bad_record_error(self.stage.where, self.stage.name, letter)
        self.letters.append(letter)

    def _parts(self, source: Source) -> Iterator[Part]:
        return read_parts(self.stage.where, self.stage.name, source, self.stage.params.format,
                          self.types)

    def _check_schema(self, source: Source, schema: pa.Schema) -> None:
        if self.first_schema is None:
            self.first_schema = schema
            self.types = dict(zip(schema.names, schema.types, strict=True))
        elif schema != self.first_schema:
            raise schema_mismatch(self.stage.where, self.stage.name, source.name, schema,
                                  self.first_schema)


def resolve_sources(stage: StageSpec[IngestParams], base_dir: Path) -> list[Source]:
    """Expand `paths`: relative to the pipeline file or fsspec URLs; globs sorted; must exist."""
    found: list[Source] = []
    for pattern in stage.params.paths:
        matches = _expand_url(pattern) if "://" in pattern else _expand_local(pattern, base_dir)
        if not matches:
            raise ConfigError(
                f"{stage.where}: input file {pattern!r} not found"
                + ("" if "://" in pattern else f" (looked for {_local(pattern, base_dir)})")
                + ". Paths are relative to the pipeline file's folder (to base_dir= for a "
                  "Pipeline made in Python); check the name or glob.")
        found.extend(matches)
    return found


def _local(pattern: str, base_dir: Path) -> Path:
    return Path(pattern) if Path(pattern).is_absolute() else base_dir / pattern


def _expand_local(pattern: str, base_dir: Path) -> list[Source]:
    full = str(_local(pattern, base_dir))
    matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
    return [Source(m, local=True) for m in matches if Path(m).is_file()]


def _expand_url(url: str) -> list[Source]:
    from fsspec.core import url_to_fs  # only for URLs (see readers.py's _PLAIN_SUFFIXES)

    fs, path = url_to_fs(url)
    names = sorted(fs.glob(path)) if glob.has_magic(path) else [path]
    names = [n for n in names if fs.isfile(n)]
    return [Source(fs.unstrip_protocol(n), local=False) for n in names]


def _validate(stage: StageSpec[IngestParams], base_dir: Path) -> None:
    resolve_sources(stage, base_dir)


def input_files(stage: StageSpec[IngestParams], base_dir: Path) -> list[str]:
    """The files the stage reads, in source order (what its cache key hashes)."""
    return [source.name for source in resolve_sources(stage, base_dir)]


def _preview(stage: StageSpec[IngestParams], base_dir: Path, sample: Sample | None
             ) -> pa.RecordBatch | None:
    """Before anything runs: the first block, read on the driver (as Ray Data's `schema()`
    reads the first block); None when there is not one good record in it."""
    first = next(read_blocks(stage, base_dir), None)  # the reader closes as it is dropped
    return first.batch if first is not None and first.batch is not None else None


SPEC = SourceSpec(name="ingest", params=IngestParams, run=read_blocks, writes="stream",
                  validate=_validate, files=input_files, preview=_preview,
                  doc="Files -> blocks with __seq__ in source order.")
