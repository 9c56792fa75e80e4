"""TFRecord shards of tf.train.Example: Arrow in and out with tfx-bsl's C++ coders, no TensorFlow.

The framing (per record: uint64 length, masked CRC32C of the length, the bytes, masked CRC32C
of the bytes) is written here with NumPy rather than by `tf.io.TFRecordWriter`: the writer
takes one Python call per record and needs TensorFlow imported in every worker, while this
frames a whole shard in a few vectorized passes (measured 0.7 us/record against 1.5 us for
TF's writer, byte-identical output; tests/unit/test_tfrecords.py checks both against
tf.data).
"""

from __future__ import annotations

import base64
import io
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqline.components.example_order import in_name_order
from seqline.pipeline.errors import StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.storage import Folder, Location

__all__ = ["CorruptRecord", "decode", "encode", "frame", "iter_records",
           "normalize", "read_artifact", "read_shard", "schema_from_text", "schema_to_text"]

# 12 = 8 (length) + 4 (masked CRC of the length); a record ends with 4 more (CRC of the data).
_HEADER, _FOOTER = 12, 4
_MASK_DELTA = 0xA282EAD8  # TFRecord's CRC mask constant (tensorflow/core/lib/hash/crc32c.h)
_GZIP_MAGIC = b"\x1f\x8b"
# 8 MiB: decompress and parse this much at a time when reading, so a large input file is
# streamed in bounded memory while per-chunk overhead stays negligible.
_READ_CHUNK = 8 << 20


class CorruptRecord(ValueError):
    """A TFRecord file whose framing or checksums are wrong at a given record."""


# --------------------------------------------------------------------------- Arrow <-> Example

def normalize(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Cast a batch to the types a tf.train.Example round trip gives back.

    Integers and booleans become int64, floats float32 (Example's float_list is 32-bit),
    large strings string, binaries binary, lists large_list of those; strings, dates and
    timestamps are kept (stored as bytes and restored on read). Streams and artifacts of a
    stage therefore hold the same values, whether a later stage reads one or the other.

    Raises:
        TypeError: naming a column whose type has no Example encoding.
    """
    columns = [_normalize_column(name, col)
               for name, col in zip(batch.schema.names, batch.columns, strict=True)]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _normalize_column(name: str, col: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type) \
            or pa.types.is_fixed_size_list(col.type):
        inner = _scalar_type(name, col.type.value_type, nested=True)
        return col.cast(pa.large_list(inner))
    return col.cast(_scalar_type(name, col.type), safe=True)


def _scalar_type(name: str, t: pa.DataType, nested: bool = False) -> pa.DataType:
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return pa.int64()
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pa.float32()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if not nested and (pa.types.is_date(t) or pa.types.is_timestamp(t)):
        return t
    raise TypeError(
        f"column {name!r} has type {t}, which tf.train.Example cannot hold. Convert it in a "
        "preprocess function (to numbers or strings), or declare the column's type in the "
        "ingest `schema:`.")


def encode(batch: pa.RecordBatch) -> pa.BinaryArray:
    """Serialize a normalized batch as tf.train.Example protos, one per row, in C++.

    tfx-bsl's encoder writes an Example's feature map in protobuf's hash order, which varies
    from call to call; the same records must give the same bytes on every runner. So the
    entries of every row are put in name order (example_order.py): the canonical form C++
    protobuf's deterministic serialization gives, with no per-row Python. If the names cannot
    be told apart cheaply, each column is encoded alone (a one-entry map has one order) and
    the features are joined per row in name order with Arrow kernels, at about twice the cost.

    Example: a row {x: 3, name: "a"} becomes an Example with features name: bytes_list [b"a"]
    and x: int64_list [3], in that order; a null becomes a feature with no value.
    """
    columns = [_as_feature(col) for col in batch.columns]
    whole = pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
    ordered = in_name_order(pa.array(_encoder().encode(whole), pa.binary()), batch.schema.names)
    if ordered is not None:
        return ordered
    features = []
    for name in sorted(batch.schema.names):
        one = pa.RecordBatch.from_arrays([_as_feature(batch.column(name))], names=[name])
        features.append(_strip_tag(pa.array(_encoder().encode(one), pa.binary())))
    if not features:
        return pa.array([b""] * batch.num_rows, pa.binary())
    joined = pc.binary_join_element_wise(*features, b"") if len(features) > 1 else features[0]
    return pc.binary_join_element_wise(_tagged_lengths(joined), joined, b"")


# An Example is field 1 (features), length-delimited: the tag byte 0x0a, a varint length.
_FEATURES_TAG = 0x0A
_NO_STOP = np.iinfo(np.int32).max  # binary_slice needs an explicit stop in pyarrow 25


def _strip_tag(examples: pa.BinaryArray) -> pa.BinaryArray:
    """Each one-feature Example minus its tag and length: its single map entry."""
    total = pc.binary_length(examples).to_numpy(zero_copy_only=False).astype(np.int64)
    prefix = 1 + _varint_size(total - 2)  # a payload under 128 bytes has a 1-byte length...
    for size in (2, 3, 4):  # ...else solve payload = total - 1 - size(payload)
        prefix = np.where(_varint_size(total - 1 - size) == size, 1 + size, prefix)
    stripped = None
    for start in np.unique(prefix):
        part = pc.binary_slice(examples, int(start), _NO_STOP)
        stripped = part if stripped is None else pc.if_else(pa.array(prefix == start), part,
                                                            stripped)
    return stripped if stripped is not None else examples


def _varint_size(value: np.ndarray) -> np.ndarray:
    return 1 + (value >= 1 << 7) + (value >= 1 << 14) + (value >= 1 << 21) + (value >= 1 << 28)


def _tagged_lengths(payloads: pa.BinaryArray) -> pa.BinaryArray:
    """Per row, the bytes 0x0a + varint(len(payload)), built as one Arrow array in NumPy."""
    length = pc.binary_length(payloads).to_numpy(zero_copy_only=False).astype(np.int64)
    sizes = 1 + _varint_size(length)
    offsets = np.zeros(len(length) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), np.uint8)
    out[offsets[:-1]] = _FEATURES_TAG
    for k in range(5):
        more = sizes - 1 > k + 1  # another varint byte follows this one
        here = sizes - 1 > k
        byte = ((length >> (7 * k)) & 0x7F) | np.where(more, 0x80, 0)
        out[(offsets[:-1] + 1 + k)[here]] = byte[here]
    return pa.Array.from_buffers(pa.binary(), len(length),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _as_feature(col: pa.Array) -> pa.Array:
    """tfx-bsl's encoder takes list columns of int64, float32 or binary; wrap scalars."""
    if pa.types.is_large_list(col.type):
        if _is_text(col.type.value_type):
            return col.cast(pa.large_list(pa.large_binary()))
        return col
    if _is_text(col.type):
        values = col.cast(pa.string()).cast(pa.large_binary()).fill_null(b"")
    else:
        values = col.fill_null(0)
    offsets = pa.array(np.arange(len(col) + 1, dtype=np.int64))
    mask = col.is_null() if col.null_count else None
    return pa.LargeListArray.from_arrays(offsets, values, mask=mask)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_date(t) \
        or pa.types.is_timestamp(t)


def decode(records: list[bytes], schema: pa.Schema) -> pa.RecordBatch:
    """Parse serialized Examples into a batch of `schema` (a normalized schema), in C++.

    Raises:
        CorruptRecord: a record is not a tf.train.Example, or a scalar column holds a list.
    """
    try:
        raw = _decoder(schema_to_text(schema)).DecodeBatch(records)
    except RuntimeError as exc:  # tfx-bsl reports DATA_LOSS for unparsable protos
        raise CorruptRecord(f"not a tf.train.Example: {exc}") from exc
    columns = [_from_feature(raw.column(field.name), field) for field in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _from_feature(col: pa.Array, field: pa.Field) -> pa.Array:
    if pa.types.is_large_list(field.type):
        return col.cast(field.type)
    lengths = pc.list_value_length(col).fill_null(1)
    if pc.any(pc.not_equal(lengths, 1)).as_py():
        raise CorruptRecord(
            f"feature {field.name!r} holds lists of several values, expected one value per "
            "record; declare it as a list column.")
    values = pc.list_element(col, 0)
    if _is_text(field.type) and not pa.types.is_binary(field.type):
        values = values.cast(pa.string())
    return values.cast(field.type)


# tfx-bsl's coders keep per-call state (the decoder fails with "FinishFeature() must be
# called before DecodeFeature()" when shared), so each thread gets its own.
_CODERS = threading.local()


def _encoder() -> Any:
    if not hasattr(_CODERS, "encoder"):
        from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder  # C++, no TF

        _CODERS.encoder = RecordBatchToExamplesEncoder()
    return _CODERS.encoder


def _decoder(schema_text: str) -> Any:
    decoders = _CODERS.__dict__.setdefault("decoders", {})
    if schema_text not in decoders:
        decoders[schema_text] = _new_decoder(schema_text)
    return decoders[schema_text]


def _new_decoder(schema_text: str) -> Any:
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    proto = schema_pb2.Schema()
    for field in schema_from_text(schema_text):
        t = field.type.value_type if pa.types.is_large_list(field.type) else field.type
        feature = proto.feature.add()
        feature.name = field.name
        feature.type = (schema_pb2.INT if pa.types.is_int64(t) else
                        schema_pb2.FLOAT if pa.types.is_floating(t) else schema_pb2.BYTES)
    return ExamplesToRecordBatchDecoder(proto.SerializeToString())


def schema_to_text(schema: pa.Schema) -> str:
    """An Arrow schema as base64 text, exact (Arrow's own IPC form), for manifests."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


# --------------------------------------------------------------------------- framing

def _crc_table() -> np.ndarray:
    poly = 0x82F63B78  # CRC-32C (Castagnoli), reflected
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table[i] = c
    return table


_CRC_TABLE = _crc_table()


def _masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def _length_crcs(lengths: np.ndarray) -> np.ndarray:
    """Masked CRC32C of each 8-byte length, all at once: a table step per byte, over rows."""
    octets = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
    crc = np.full(len(lengths), 0xFFFFFFFF, np.uint32)
    for k in range(8):
        crc = _CRC_TABLE[(crc ^ octets[:, k]) & 0xFF] ^ (crc >> np.uint32(8))
    return _masked(crc ^ np.uint32(0xFFFFFFFF))


def _data_crcs(records: pa.BinaryArray | list[bytes]) -> np.ndarray:
    if isinstance(records, pa.Array):
        offsets = np.frombuffer(records.buffers()[1], np.int32, len(records) + 1,
                                records.offset * 4)
        data = (records.buffers()[2] or pa.py_buffer(b"")).to_pybytes()  # y# wants bytes
        crcs = (google_crc32c.value(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:],
                                                               strict=True))
        return _masked(np.fromiter(crcs, np.uint32, len(records)))
    return _masked(np.fromiter(map(google_crc32c.value, records), np.uint32, len(records)))


def frame(records: pa.BinaryArray | list[bytes]) -> bytes:
    """Records in TFRecord framing, byte-identical to tf.io.TFRecordWriter's output."""
    if isinstance(records, list):
        records = pa.array(records, pa.binary())
    n = len(records)
    lengths = pc.binary_length(records).to_numpy(zero_copy_only=False).astype(np.int64)
    headers = np.empty((n, _HEADER), np.uint8)
    headers[:, :8] = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
    headers[:, 8:] = _length_crcs(lengths).astype("<u4").view(np.uint8).reshape(-1, 4)
    footers = _data_crcs(records).astype("<u4")
    framed = pc.binary_join_element_wise(
        _fixed_width(headers.ravel(), n, _HEADER), records,
        _fixed_width(footers.view(np.uint8), n, _FOOTER), b"")
    offsets = np.frombuffer(framed.buffers()[1], np.int32, n + 1, framed.offset * 4)
    return framed.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]] if n else b""


def _fixed_width(data: np.ndarray, n: int, width: int) -> pa.BinaryArray:
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(data))])


def iter_records(stream: IO[bytes], name: str, compression: str = "auto"
                 ) -> Iterator[list[bytes]]:
    """Read a TFRecord stream as lists of records, a chunk at a time, checking every CRC.

    `compression` is "gzip", "none" or "auto" (gzip if the stream starts with gzip's magic).

    Raises:
        CorruptRecord: naming `name`, the record number and the byte offset.
    """
    chunks = _decompressed(stream, compression)
    buffer = b""
    offset = 0  # of buffer[0] in the uncompressed stream
    number = 0
    for chunk in chunks:
        buffer += chunk
        records, used = _split(buffer, name, offset, number)
        if records:
            yield records
        number += len(records)
        buffer, offset = buffer[used:], offset + used
    if buffer:
        raise CorruptRecord(f"{name}: truncated record {number} at byte {offset}: "
                            f"{len(buffer)} bytes left over after the last whole record. The "
                            "file was cut short or is not a TFRecord file.")


def _decompressed(stream: IO[bytes], compression: str) -> Iterator[bytes]:
    first = stream.read(_READ_CHUNK)
    if compression == "none" or (compression == "auto" and not first.startswith(_GZIP_MAGIC)):
        while first:
            yield first
            first = stream.read(_READ_CHUNK)
        return
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
    data = first
    while data:
        try:
            yield inflate.decompress(data)
            while inflate.unused_data:  # concatenated gzip members
                rest, inflate = inflate.unused_data, zlib.decompressobj(zlib.MAX_WBITS | 16)
                yield inflate.decompress(rest)
        except zlib.error as exc:
            raise CorruptRecord(f"not a readable gzip stream: {exc}") from exc
        data = stream.read(_READ_CHUNK)


def _split(buffer: bytes, name: str, offset: int, number: int) -> tuple[list[bytes], int]:
    """The whole records at the start of `buffer`, checked, and how many bytes they used."""
    starts: list[int] = []
    lengths: list[int] = []
    pos, size, unpack = 0, len(buffer), struct.Struct("<Q").unpack_from
    while pos + _HEADER <= size:
        (length,) = unpack(buffer, pos)
        if pos + _HEADER + length + _FOOTER > size:
            break
        starts.append(pos)
        lengths.append(length)
        pos += _HEADER + length + _FOOTER
    if not starts:
        return [], 0
    begin = np.array(starts, np.int64)
    length_arr = np.array(lengths, np.int64)
    view = np.frombuffer(buffer, np.uint8, count=pos)
    stored = view[begin[:, None] + np.arange(8, 12)].copy().view("<u4").ravel()
    bad = np.flatnonzero(stored != _length_crcs(length_arr))
    if len(bad):
        i = int(bad[0])
        raise CorruptRecord(f"{name}: record {number + i} at byte {offset + starts[i]} has a "
                            "corrupt length (its CRC does not match). The file is damaged or "
                            "not a TFRecord file.")
    records = [buffer[s + _HEADER:s + _HEADER + n] for s, n in zip(starts, lengths, strict=True)]
    stored = view[(begin + _HEADER + length_arr)[:, None] + np.arange(4)].copy().view("<u4")
    bad = np.flatnonzero(stored.ravel() != _data_crcs(records))
    if len(bad):
        i = int(bad[0])
        raise CorruptRecord(f"{name}: record {number + i} at byte {offset + starts[i]} is "
                            "corrupt (its data CRC does not match). The file is damaged.")
    return records, pos


# --------------------------------------------------------------------------- shards

def __getattr__(name: str) -> Any:
    """ShardSink moved to shard_sink.py (it writes; this module frames and reads)."""
    if name == "ShardSink":
        from seqline.components.shard_sink import ShardSink

        return ShardSink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_shard(path: Folder, compression: str) -> list[bytes]:
    """A shard's records: a local file or an object (read whole: one GET, no range requests)."""
    if isinstance(path, Location):
        stream: IO[bytes] = io.BytesIO(path.read_bytes())
        return [r for chunk in iter_records(stream, str(path), compression) for r in chunk]
    with open(path, "rb") as f:
        return [r for chunk in iter_records(f, str(path), compression) for r in chunk]


def read_artifact(stage_dir: Folder, manifest: dict[str, Any], prefetch: int = 2
                  ) -> Iterator[pa.RecordBatch]:
    """A committed TFRecord artifact's records as batches, one per shard, in manifest order."""
    schema = schema_from_text(manifest["schema"])
    yield from read_feed(ShardFeed.stored(stage_dir, manifest, schema), prefetch)


def read_feed(feed: ShardFeed, prefetch: int = 2,
              on_wait: Callable[[float], None] | None = None) -> Iterator[pa.RecordBatch]:
    """A stage's records as batches, one per shard, in seq order, while they are written.

    Shards are read and decoded `prefetch` ahead on threads (zlib and the decoder release
    the GIL) and yielded strictly in order; when the reader catches up with the writer it
    waits for the next shard, and `on_wait` is told how long.
    """
    shards: list[dict[str, Any]] = []
    done, submitted = False, 0
    with ThreadPoolExecutor(max(prefetch, 1)) as pool:
        ahead: deque = deque()
        while True:
            while submitted < len(shards) and len(ahead) < max(prefetch, 1):
                ahead.append(pool.submit(read_fed_shard, feed, shards[submitted]))
                submitted += 1
            if ahead:
                yield ahead.popleft().result()
                continue
            if done:
                return
            start = time.perf_counter()
            shards, done = feed.wait(submitted)
            if on_wait:
                on_wait(time.perf_counter() - start)


def read_fed_shard(feed: ShardFeed, shard: dict[str, Any], take: bool = False
                   ) -> pa.RecordBatch:
    """One shard of a feed, decoded; the feed's folder may be renamed by a commit meanwhile.

    `take`: the records the feed still holds in memory, if it does (see ShardFeed).
    """
    held = feed.take(shard) if take else None
    if held is not None:
        return held
    path = feed.path(shard)
    try:
        try:
            data = read_shard(path, feed.compression)
        except FileNotFoundError:  # the stage committed meanwhile: its folder was renamed
            data = read_shard(feed.moved(shard, path), feed.compression)
        return decode(data, feed.schema())
    except (CorruptRecord, OSError) as exc:
        raise StageError(f"stored records of stage {feed.stage!r} are unreadable: {exc}. "
                         "`seqline verify` checks the whole run; rerun the stage that wrote "
                         "them.", stage=feed.stage) from exc
