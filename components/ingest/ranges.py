"""Ingest on the workers: the driver plans ranges of the input files, workers read them.

A range is a whole file, a run of Parquet row groups, or a newline-aligned byte range of an
uncompressed CSV or JSON Lines file. The driver reads only a few bytes around each cut (to
align it to a line) and the first records of the first file (to fix the schema, exactly as
driver ingest does); workers read and parse their ranges with Arrow's readers (the same code
as driver ingest, on the range's bytes), numbering records from 0 within the range. Results
come back in range order, so the driver gives each range's records their seq by adding the
records of all earlier ranges (a prefix sum), and their line numbers likewise.

Quoted newlines (CSV): a cut is safe when every line before it ends outside quotes. A worker
reading a cut range checks that every line of its range has an even number of `"` (doubled
quotes inside a field count twice, so stay even); as the first range starts outside quotes,
all ranges of a file passing this check means no field spans a line, and line-aligned cuts
read exactly like the whole file. A range that fails it returns nothing, and the driver reads
that file itself from the start (skipping the records it already has), as driver ingest would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import IO

import numpy as np
import pyarrow as pa

from seqline.components.ingest.readers import Part, ReadError, Source, read_source
from seqline.pipeline.blocks import SEQ, Block, with_seq
from seqline.pipeline.deadletters import DeadLetter
from seqline.pipeline.errors import StageError
from seqline.pipeline.tasks import MapBlocks, SourceTask

__all__ = ["Range", "bad_record_error", "plan_ranges", "read_parallel", "read_parts",
           "schema_mismatch"]

# The driver looks this far past a planned cut for the end of its line (then further if needed).
_ALIGN_READ = 64 * 1024
_COUNT_READ = 8 * 1024 * 1024  # chunk size when a worker counts the lines before its range
_QUOTE, _NEWLINE = ord('"'), ord("\n")


@dataclass(frozen=True)
class Range:
    """What one worker reads: bytes [start, end) of `file` (end None: the whole file, from its
    own reader, decompressing), or Parquet row groups [groups_from, groups_to)."""

    file: str
    local: bool
    start: int = 0
    end: int | None = None
    groups_from: int | None = None
    groups_to: int | None = None
    header: bytes = b""  # CSV: the file's header line, prepended to a range that starts later

    def source(self) -> Source:
        return Source(self.file, self.local)


def plan_ranges(sources: list[Source], fmt: str, range_bytes: int) -> tuple[list[Range], int]:
    """Cut the files into ranges of about `range_bytes`; also return the input's total bytes.

    Example: a 100 MB CSV with range_bytes 40 MB gives 3 ranges, cut after the line ends
    nearest past 40 MB and 80 MB; a .csv.gz file is one range (not splittable).
    """
    ranges: list[Range] = []
    total = 0
    for source in sources:
        size = source.size()
        total += size
        if fmt == "parquet":
            ranges.extend(_row_group_ranges(source, range_bytes))
        elif fmt == "tfrecord" or source.compression or size <= range_bytes:
            ranges.append(Range(source.name, source.local))  # read whole, by its own reader
        else:
            ranges.extend(_byte_ranges(source, size, fmt, range_bytes))
    return ranges, total


def _row_group_ranges(source: Source, range_bytes: int) -> Iterator[Range]:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(source.arrow_input()).metadata
    first, held = 0, 0
    for group in range(meta.num_row_groups):
        held += meta.row_group(group).total_byte_size
        if held >= range_bytes or group == meta.num_row_groups - 1:
            yield Range(source.name, source.local, groups_from=first, groups_to=group + 1)
            first, held = group + 1, 0
    if meta.num_row_groups == 0:
        yield Range(source.name, source.local)


def _byte_ranges(source: Source, size: int, fmt: str, range_bytes: int) -> Iterator[Range]:
    with source.open(decompress=False) as f:
        header = f.readline() if fmt == "csv" else b""
        start = 0
        while start < size:
            end = _line_end_after(f, max(start + range_bytes, len(header) + 1), size)
            yield Range(source.name, source.local, start, end, header=header)
            start = end


def _line_end_after(f: IO[bytes], at: int, size: int) -> int:
    """The offset just past the first newline at or after byte `at - 1` (or the file's end)."""
    if at >= size:
        return size
    f.seek(at - 1)
    offset = at - 1
    while chunk := f.read(_ALIGN_READ):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset += len(chunk)
    return size


def _range_block(index: int, r: Range) -> Block:
    return Block(index, pa.record_batch({
        "file": [r.file], "local": [r.local], "start": [r.start],
        "end": pa.array([r.end], pa.int64()), "groups_from": pa.array([r.groups_from], pa.int64()),
        "groups_to": pa.array([r.groups_to], pa.int64()), "header": pa.array([r.header]),
        SEQ: pa.array([index], pa.int64())}))  # a range block's seq is its range number


# --------------------------------------------------------------------------- on the workers

@dataclass(frozen=True)
class _Job:
    where: str  # the stage, as errors name it
    stage: str
    fmt: str
    schema: pa.Schema  # the first file's, fixed on the driver: every range parses alike


def _read_range(job: _Job, block: pa.RecordBatch) -> tuple[pa.RecordBatch | None, list[DeadLetter]]:
    """A worker's read of one range: records numbered from 0 in the range, bad ones as letters
    (line numbers in the file); None when a CSV range has a field spanning lines."""
    row = block.to_pylist()[0]
    del row[SEQ]
    r = Range(**row)
    types = dict(zip(job.schema.names, job.schema.types, strict=True))
    letters: list[DeadLetter] = []
    if r.groups_from is not None:
        batches = _read_row_groups(job, r)
    elif r.end is None:
        batches, letters = _collect(job, r, read_parts(job.where, job.stage, r.source(),
                                                       job.fmt, types), 0)
    else:
        with r.source().open(decompress=False) as f:
            f.seek(r.start)
            data = f.read(r.end - r.start)
        if job.fmt == "csv" and not _quotes_close_on_every_line(data):
            return None, []
        if r.start and data.isspace():
            batches = []
        else:
            prefix = r.header if r.start else b""
            source = Source(r.file, r.local, data=prefix + data)
            line_shift = -1 if prefix else 0
            batches, letters = _collect(job, r, read_parts(job.where, job.stage, source,
                                                           job.fmt, types), line_shift)
    return _one_batch(batches, job.schema), letters


def _collect(job: _Job, r: Range, parts: Iterator[Part], line_shift: int
             ) -> tuple[list[pa.RecordBatch], list[DeadLetter]]:
    batches: list[pa.RecordBatch] = []
    letters: list[DeadLetter] = []
    lines_before: int | None = None
    for part in parts:
        for bad in part.bad:
            line = bad.line
            if line is not None and r.start:
                if lines_before is None:  # the error path only: count the file's lines once
                    lines_before = _count_lines(r.source(), r.start)
                line += lines_before + line_shift
            letters.append(DeadLetter(bad.record, bad.reason, r.file, line, bad.raw))
        if part.batch.num_rows:
            if part.batch.schema != job.schema:
                raise schema_mismatch(job.where, job.stage, r.file, part.batch.schema, job.schema)
            batches.append(with_seq(part.batch, part.records))
    return batches, letters


def _read_row_groups(job: _Job, r: Range) -> list[pa.RecordBatch]:
    import pyarrow.parquet as pq

    assert r.groups_from is not None and r.groups_to is not None
    try:
        table = pq.ParquetFile(r.source().arrow_input()).read_row_groups(
            list(range(r.groups_from, r.groups_to)))
    except (pa.ArrowInvalid, OSError) as exc:
        raise StageError(f"{job.where}: cannot read {r.file} as Parquet: {exc}",
                         stage=job.stage) from exc
    if table.schema != job.schema:
        raise schema_mismatch(job.where, job.stage, r.file, table.schema, job.schema)
    if not table.num_rows:
        return []
    return [with_seq(b, np.arange(table.num_rows, dtype=np.int64))
            for b in table.combine_chunks().to_batches()]


def _one_batch(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema.append(pa.field(SEQ, pa.int64())))
    return pa.concat_batches(batches)


def _quotes_close_on_every_line(data: bytes) -> bool:
    """True when no quoted field spans a line end, given the range starts outside quotes."""
    if b'"' not in data:  # no quotes at all: one memchr
        return True
    raw = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(raw == _QUOTE)
    before = np.searchsorted(quotes, np.flatnonzero(raw == _NEWLINE))  # quotes before each \n
    return not (before & 1).any() and len(quotes) % 2 == 0


def _count_lines(source: Source, end: int) -> int:
    lines, done = 0, 0
    with source.open(decompress=False) as f:
        while done < end:
            chunk = f.read(min(_COUNT_READ, end - done))
            if not chunk:
                break
            lines += chunk.count(b"\n")
            done += len(chunk)
    return lines


# --------------------------------------------------------------------------- on the driver

FileReader = Callable[[Source, int, int], Generator[pa.RecordBatch, None, int]]


def read_parallel(where: str, stage: str, fmt: str, schema: pa.Schema, ranges: list[Range],
                  map_blocks: MapBlocks, take: Callable[[DeadLetter], None],
                  read_file: FileReader) -> Generator[pa.RecordBatch, None, None]:
    """The records of `ranges`, read on the workers, with seq: batches in order; bad records
    go to `take` (with seq) before the batch after them. `read_file(source, base, skip)` reads
    a file on the driver from its record `skip` on, numbering from seq `base` (the fallback)."""
    task = SourceTask(stage, functools.partial(_read_range, _Job(where, stage, fmt, schema)))
    results = map_blocks(task, (_range_block(i, r) for i, r in enumerate(ranges)))
    base = 0  # seq of the current file's first record
    done = 0  # records of the current file read so far
    current: str | None = None
    fell_back = False
    for r, result in zip(ranges, results, strict=True):
        if r.file != current:
            base, done, current, fell_back = base + done, 0, r.file, False
        if fell_back:
            continue  # the driver has read the rest of this file already
        if result.batch is None:  # a field spans lines: read this file as driver ingest does
            done = yield from read_file(r.source(), base, done)
            fell_back = True
            continue
        for letter in result.dead_letters:
            take(replace(letter, seq=base + done + letter.seq))
        batch = result.batch
        if batch.num_rows:
            yield with_seq(batch, batch.column(SEQ).to_numpy() + (base + done))
        done += result.counts.records_in


# --------------------------------------------------------------------------- shared

def read_parts(where: str, stage: str, source: Source, fmt: str,
               types: dict[str, pa.DataType]) -> Iterator[Part]:
    """`read_source`, with a file that cannot be read at all failing the stage, naming it."""
    try:
        yield from read_source(source, fmt, types)
    except ReadError as exc:
        raise StageError(f"{where}: {exc}", stage=stage) from exc
    except OSError as exc:
        raise StageError(f"{where}: cannot read {source.name}: {exc}", stage=stage) from exc


def schema_mismatch(where: str, stage: str, file: str, schema: pa.Schema,
                    first: pa.Schema) -> StageError:
    return StageError(
        f"{where}: {file} has columns {schema.names} of types {[str(t) for t in schema.types]}, "
        f"unlike the first file's {first}. All files of one ingest must share a schema; "
        "declare it with `schema:` or split the stage.", stage=stage)


def bad_record_error(where: str, stage: str, letter: DeadLetter) -> StageError:
    return StageError(
        f"{where}: bad record in {letter.where()}: {letter.reason}; the line: {letter.raw!r}. "
        "Fix the input, or give the pipeline an error budget (e.g. `errors: {max_fraction: "
        "0.01}`) to set bad records aside as dead letters.",
        stage=stage, seq=letter.seq)
