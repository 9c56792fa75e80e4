"""File readers for ingest: Arrow's fast readers, and a careful path that finds the bad rows.

A reader yields `Part`s: a batch of good records with each record's index in the file (its
rank among the file's records, bad ones included) and the bad records it set aside. Ingest
turns record indices into seq, so a bad row keeps its place in source order.

Text formats (CSV, JSON Lines) are read by Arrow at full speed until Arrow reports an error.
From that record on, the file is read by the careful path: lines in chunks, each chunk parsed
by Arrow with the types fixed so far, and a chunk that fails bisected down to its bad lines.
A record is a non-empty line (the readers' defaults: no newlines inside values). Arrow's
fast path does read a quoted field over a line end as one value; the careful path does not: a
chunk that parses to fewer rows than lines is bisected like one that fails, so those lines
become bad records instead of shifting every record after them.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from seqline.pipeline import tfrecord

__all__ = ["BadRecord", "Part", "Source", "first_part_schema", "read_source"]

# 4,096 lines per careful chunk: a clean chunk costs one Arrow parse; a chunk with a bad line
# costs about 2 x log2(4096) = 24 small parses more.
_CAREFUL_LINES = 4096

# Names that say a file is not compressed: such a local file is opened by Python itself,
# without fsspec, whose import (40 ms, with asyncio) would otherwise be every local run's.
# Any other suffix is fsspec's to infer (.gz, .zst, ... and codecs registered with it).
_PLAIN_SUFFIXES = frozenset({"", ".csv", ".tsv", ".txt", ".json", ".jsonl", ".ndjson",
                             ".parquet", ".pq", ".tfrecord", ".tfrecords"})


@dataclass(frozen=True)
class Source:
    """An input file: a local path or an fsspec URL, and how to open it as bytes."""

    name: str  # as shown to users: the path or URL
    local: bool
    # A piece of the file already read (a worker's byte range, the CSV header prepended);
    # None: the whole file, read from `name`. See components/ingest/ranges.py.
    data: bytes | None = field(default=None, repr=False)

    @property
    def compression(self) -> str | None:
        """What its name says it is compressed with (fsspec's inference: "gzip" for .gz)."""
        if PurePosixPath(self.name).suffix.lower() in _PLAIN_SUFFIXES:
            return None
        from fsspec.utils import infer_compression

        return infer_compression(self.name)

    def open(self, decompress: bool = True) -> IO[bytes]:
        """The file's bytes, decompressed if its name ends in .gz, .bz2, .zst, ... (unless
        not `decompress`: as stored)."""
        if self.data is not None:
            return io.BytesIO(self.data)
        compression = self.compression if decompress else None
        if self.local and compression is None:
            return open(self.name, "rb")  # noqa: SIM115 - the caller closes it
        import fsspec

        return fsspec.open(self.name, "rb", compression=compression).open()

    def size(self) -> int:
        """The file's size in bytes, as stored."""
        if self.local:
            return os.path.getsize(self.name)
        from fsspec.core import url_to_fs

        fs, path = url_to_fs(self.name)
        return int(fs.size(path))

    def arrow_input(self) -> Any:
        """What Arrow's readers take: a path (native I/O) for local files, else a stream."""
        if self.data is not None:
            return pa.BufferReader(self.data)  # zero-copy, and read natively by Arrow
        return self.name if self.local else self.open()


@dataclass(frozen=True)
class BadRecord:
    record: int  # index among the file's records
    reason: str
    line: int | None = None
    raw: str | None = None


@dataclass
class Part:
    batch: pa.RecordBatch
    records: np.ndarray  # int64, the file record index of each row of `batch`
    bad: list[BadRecord] = field(default_factory=list)
    end: int = 0  # records of the file consumed once this part is taken, bad ones included


class ReadError(ValueError):
    """The file cannot be read at all (empty, not the format, damaged framing)."""


def read_source(source: Source, fmt: str, types: dict[str, pa.DataType]) -> Iterator[Part]:
    """Read one file as Parts. `types` fixes column types (declared, or the first file's).

    Raises:
        ReadError: the file as a whole cannot be read, with why.
    """
    if fmt == "csv":
        return _read_text(source, types, _csv_fast, _csv_parser)
    if fmt == "jsonl":
        return _read_text(source, types, _jsonl_fast, _jsonl_parser)
    if fmt == "parquet":
        return _read_parquet(source)
    return _read_tfrecord(source, types)


# --------------------------------------------------------------------------- text formats

Parser = Callable[[list[bytes]], pa.Table]


def _read_text(source: Source, types: dict[str, pa.DataType],
               fast: Callable[[Source, dict], Iterator[pa.RecordBatch]],
               make_parser: Callable[[Source, dict, list[bytes]], Parser]) -> Iterator[Part]:
    done = 0
    known = dict(types)
    try:
        for batch in fast(source, known):
            known = dict(zip(batch.schema.names, batch.schema.types, strict=True))
            yield Part(batch, np.arange(done, done + batch.num_rows, dtype=np.int64),
                       end=done + batch.num_rows)
            done += batch.num_rows
        return
    except pa.ArrowInvalid as exc:
        if "Empty" in str(exc) and done == 0:
            raise ReadError(f"{source.name} is empty{_empty_hint(fast)}") from exc
    yield from _careful(source, done, known, make_parser)


def _empty_hint(fast: Callable) -> str:
    return ": a CSV file needs at least a header line. Remove the file (or narrow the glob " \
           "that matched it)." if fast is _csv_fast else "."


def _careful(source: Source, skip: int, types: dict[str, pa.DataType],
             make_parser: Callable[[Source, dict, list[bytes]], Parser]) -> Iterator[Part]:
    """Records `skip` onward, parsed a chunk of lines at a time; bad lines set aside."""
    with source.open() as f:
        lines = _numbered_records(f)
        header = [next(lines)[1]] if make_parser is _csv_parser else []
        record = 0
        parse: Parser | None = None
        chunk: list[tuple[int, bytes]] = []
        for number, line in lines:
            if record >= skip:
                chunk.append((number, line))
            record += 1
            if len(chunk) == _CAREFUL_LINES:
                parse = parse or make_parser(source, types, header + [x for _, x in chunk])
                yield _parse_chunk(parse, chunk, record - len(chunk))
                chunk = []
        if chunk:
            parse = parse or make_parser(source, types, header + [x for _, x in chunk])
            yield _parse_chunk(parse, chunk, record - len(chunk))


def _numbered_records(f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line) for every non-empty line; the first line counts too."""
    for number, line in enumerate(f, start=1):
        if line.strip(b"\r\n"):
            yield number, line if line.endswith(b"\n") else line + b"\n"


def _parse_chunk(parse: Parser, chunk: list[tuple[int, bytes]], first: int) -> Part:
    tables: list[pa.Table] = []
    rows: list[np.ndarray] = []
    bad: list[BadRecord] = []

    def attempt(lo: int, hi: int) -> None:
        try:
            table = parse([line for _, line in chunk[lo:hi]])
            if table.num_rows != hi - lo:  # a quoted field ran over a line end: one per line
                raise pa.ArrowInvalid("a quoted field runs over the end of the line (a record "
                                      "is one line here)")
        except pa.ArrowInvalid as exc:
            if hi - lo == 1:
                number, line = chunk[lo]
                bad.append(BadRecord(first + lo, _reason(exc), number,
                                     line.decode("utf-8", "replace").rstrip("\r\n")))
                return
            mid = (lo + hi) // 2
            attempt(lo, mid)
            attempt(mid, hi)
            return
        tables.append(table)
        rows.append(np.arange(first + lo, first + hi, dtype=np.int64))

    attempt(0, len(chunk))
    good = [t for t in tables if t.num_rows]
    batch = pa.concat_tables(good).combine_chunks().to_batches(max_chunksize=None)[0] \
        if good else None
    records = np.concatenate(rows) if rows else np.empty(0, np.int64)
    if batch is None:
        schema = tables[0].schema if tables else pa.schema([])
        batch = pa.RecordBatch.from_pylist([], schema=schema)
    return Part(batch, records, bad, end=first + len(chunk))


def _reason(exc: Exception) -> str:
    """Arrow's message, minus its row number (it counts within the chunk parsed, not the file)."""
    text = re.sub(r"Row #\d+: ", "", str(exc).split("\n")[0])
    return re.sub(r"^In CSV column #(\d+): ", r"CSV column #\1: ", text)


def _csv_fast(source: Source, types: dict) -> Iterator[pa.RecordBatch]:
    convert = pacsv.ConvertOptions(column_types=types)
    with pacsv.open_csv(source.arrow_input(), convert_options=convert) as reader:
        yield from reader


def _csv_parser(source: Source, types: dict, sample: list[bytes]) -> Parser:
    """Parse CSV lines (after the header) with every column's type fixed."""
    header = sample[0]
    if len(types) < len(header.split(b",")):  # the types are not all known: infer, once
        opts = pacsv.ParseOptions(invalid_row_handler=lambda row: "skip")
        inferred = pacsv.read_csv(io.BytesIO(b"".join(sample)), parse_options=opts).schema
        types = {f.name: types.get(f.name, f.type) for f in inferred}
    convert = pacsv.ConvertOptions(column_types=types)
    read = pacsv.ReadOptions(use_threads=False)

    def parse(lines: list[bytes]) -> pa.Table:
        return pacsv.read_csv(io.BytesIO(header + b"".join(lines)), read_options=read,
                              convert_options=convert)

    return parse


def _jsonl_fast(source: Source, types: dict) -> Iterator[pa.RecordBatch]:
    options = pajson.ParseOptions(explicit_schema=pa.schema(types) if types else None)
    with pajson.open_json(source.arrow_input(), parse_options=options) as reader:
        yield from reader


def _jsonl_parser(source: Source, types: dict, sample: list[bytes]) -> Parser:
    if not types:  # infer from the lines of the sample that parse on their own
        good = [line for line in sample if _parses(line)]
        schema = pajson.read_json(io.BytesIO(b"".join(good))).schema if good else pa.schema([])
        types = dict(zip(schema.names, schema.types, strict=True))
    options = pajson.ParseOptions(explicit_schema=pa.schema(types),
                                  unexpected_field_behavior="error")

    def parse(lines: list[bytes]) -> pa.Table:
        return pajson.read_json(io.BytesIO(b"".join(lines)), parse_options=options)

    return parse


def _parses(line: bytes) -> bool:
    try:
        pajson.read_json(io.BytesIO(line))
        return True
    except pa.ArrowInvalid:
        return False


# --------------------------------------------------------------------------- binary formats

def _read_parquet(source: Source) -> Iterator[Part]:
    import pyarrow.parquet as pq  # here: with pyarrow.fs (and ssl), 24 ms of every run's start

    done = 0
    try:
        for batch in pq.ParquetFile(source.arrow_input()).iter_batches():
            yield Part(batch, np.arange(done, done + batch.num_rows, dtype=np.int64),
                       end=done + batch.num_rows)
            done += batch.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReadError(f"cannot read {source.name} as Parquet: {exc}") from exc


def _read_tfrecord(source: Source, types: dict[str, pa.DataType]) -> Iterator[Part]:
    """tf.train.Example records; bad protos are bad records, broken framing fails the file."""
    done = 0
    schema: pa.Schema | None = None
    # gzip is the TFRecord reader's own (framing.py): a shard under 8 MiB is inflated at once
    # by libdeflate, about 4x faster than Python's gzip module streaming it.
    gzip = source.compression == "gzip"
    try:
        with source.open(decompress=not gzip) as f:
            for records in tfrecord.iter_record_chunks(f, source.name):
                if schema is None:
                    inferred = _infer_example_schema(records.as_list(4096), source.name)
                    schema = pa.schema([pa.field(f.name, types.get(f.name, f.type))
                                        for f in inferred])
                    _check_kinds(inferred, schema, source.name)
                batch, bad = _decode_each_bad(records, schema, done)
                good = np.arange(done, done + len(records), dtype=np.int64)
                if bad:
                    good = np.setdiff1d(good, [b.record for b in bad])
                yield Part(batch, good, bad, end=done + len(records))
                done += len(records)
    except tfrecord.CorruptRecord as exc:
        raise ReadError(f"unreadable TFRecord file: {exc}") from exc


# What to declare for a feature stored in each of tf.train.Example's lists.
_DECLARE = {"int64_list": "int64", "float_list": "float or double",
            "bytes_list": "string or binary"}


def _check_kinds(stored: pa.Schema, read_as: pa.Schema, name: str) -> None:
    """Each feature is read as a type its list can hold: tfx-bsl refuses every record of a
    file otherwise, with a message that names neither the feature nor the type."""
    for feature, wanted in zip(stored, read_as, strict=True):
        kind = tfrecord.feature_kind(feature.type)
        if tfrecord.feature_kind(wanted.type) != kind:
            raise ReadError(
                f"{name}: feature {feature.name!r} is stored as {kind}, which cannot be read "
                f"as {wanted.type} (declared in `schema:`, or the first file's type). Declare "
                f"it as {_DECLARE[kind]}, or convert it in a preprocess stage.")


def _decode_each_bad(records: tfrecord.Records, schema: pa.Schema, first: int
                     ) -> tuple[pa.RecordBatch, list[BadRecord]]:
    try:
        return tfrecord.decode(records, schema), []
    except tfrecord.CorruptRecord:
        pass
    bad, good = [], []
    for i, record in enumerate(records):  # the error path only: one decode per record
        try:
            tfrecord.decode([record], schema)
            good.append(record)
        except tfrecord.CorruptRecord as exc:
            bad.append(BadRecord(first + i, str(exc), None, record[:200].hex()))
    return tfrecord.decode(good, schema), bad


def _is_example(decoder: Any, record: bytes) -> bool:
    try:
        decoder.DecodeBatch([record])
    except RuntimeError:
        return False
    return True


def _infer_example_schema(records: list[bytes], name: str) -> pa.Schema:
    """Types from the first records: a feature with one value in every record is a scalar.
    Records that are not Examples are left out (they become bad records when read); if none
    of them is one, the file is not a file of Examples."""
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    decoder = ExamplesToRecordBatchDecoder()
    try:
        raw = decoder.DecodeBatch(records)
    except RuntimeError as exc:
        examples = [r for r in records if _is_example(decoder, r)]  # the error path only
        if not examples:
            raise tfrecord.CorruptRecord(
                f"{name}: the first records are not tf.train.Example: {exc}") from exc
        raw = decoder.DecodeBatch(examples)
    return _schema_of(raw)


def first_part_schema(source: Source, types: dict[str, pa.DataType]) -> pa.Schema | None:
    """The schema of a TFRecord file's first part, from its first records alone, where they
    settle it: every one is an Example (so each decodes under the schema they give, and the
    part has records) and no type is declared (which could refuse them all). None where they
    do not; then only reading the part tells.

    Decoding the whole part to learn its schema cost the driver, before any worker could
    start, 20 ms of decoding and pandas' import (0.16 s: pyarrow imports pandas as it first
    converts a NumPy array): benchmarks/WHERE_TIME_GOES.md, round 9.
    """
    if types:
        return None
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    gzip = source.compression == "gzip"
    try:
        with source.open(decompress=not gzip) as f:
            records = next(tfrecord.iter_record_chunks(f, source.name), None)
        if records is None:
            return None
        return _schema_of(ExamplesToRecordBatchDecoder().DecodeBatch(records.as_list(4096)))
    except (tfrecord.CorruptRecord, RuntimeError, OSError):
        return None  # (reading the part says what is wrong, as it always has)


def _schema_of(raw: pa.RecordBatch) -> pa.Schema:
    """tfx-bsl's untyped decoding as columns: lists of one value in every record are scalars."""
    fields = []
    for name, col in zip(raw.schema.names, raw.columns, strict=True):
        inner = pa.binary() if pa.types.is_large_binary(col.type.value_type) \
            else col.type.value_type
        # (no Python value given to Arrow: that would import pandas, see first_part_schema)
        lengths = pa.compute.min_max(pa.compute.list_value_length(col)).as_py()
        scalar = lengths["min"] in (None, 1) and lengths["max"] in (None, 1)  # None: absent
        fields.append(pa.field(name, inner if scalar else pa.large_list(inner)))
    return pa.schema(fields)
