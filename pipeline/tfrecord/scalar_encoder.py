"""tf.train.Examples of a batch of scalar columns, written with NumPy and Arrow kernels.

The usual stage output is all scalars (ints, floats, strings). For such a batch the wire
format is simple enough to write column by column, with no per-row Python and no protobuf
objects: each row's entry for a column is a few varints and tags around its value, and the
entries are joined per row in name order by one Arrow kernel. The bytes are those of tfx-bsl's
encoder with the entries put in name order (C++ protobuf's deterministic serialization), so a
shard does not depend on which path wrote it; tests/unit/test_tfrecords.py holds the two to the
same bytes. Any list column (or a repeated name) leaves the batch to tfx-bsl (returns None).

Wire format (protobuf): Example = 0x0a varint(len) Features; Features = one entry per column,
each 0x0a varint(len) MapEntry; MapEntry = 0x0a varint(len) key, 0x12 varint(len) Feature;
Feature = 0x0a BytesList | 0x12 FloatList | 0x1a Int64List, each varint(len) then its one value
(0x0a varint(len) bytes; 0x0a 0x04 float32; 0x0a varint(size) varint(value)); a null is a
Feature of no bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqline.pipeline.arrays import binary_lengths, empties

__all__ = ["encode_scalars", "tagged_varints", "varint_sizes"]

_VARINT_BYTES = 10  # the longest varint: a negative int64
_MOST_BYTES = 1 << 30  # a block's Examples stay well under binary's 2 GiB of offsets


def encode_scalars(batch: pa.RecordBatch) -> pa.BinaryArray | None:
    """One serialized Example per row of a normalized batch of scalar columns; None if a
    column is a list or not of a normalized type (or a name repeats): tfx-bsl's encoder then
    writes it."""
    names = batch.schema.names
    if len(set(names)) != len(names) or not names or not all(
            _normalized_scalar(t) for t in batch.schema.types):
        return None  # (a column not normalized would be read from its buffers wrongly)
    if batch.nbytes > _MOST_BYTES:  # the parts' offsets are int32: tfx-bsl's path then
        return None
    n = batch.num_rows
    rows = _Rows(n)
    for name in sorted(names):
        column = batch.column(name)
        if column.null_count:  # its entries differ in shape: built whole, then added
            rows.add(_entry_with_nulls(name, column, n))
        else:
            _entry(rows, name, column, n)
    features = rows.parts()
    header = _Rows(n)
    header.varint(rows.length, tag=0x0A)
    return _join([*header.parts(), *features], n)


def _normalized_scalar(t: pa.DataType) -> bool:
    """A scalar type `coding.normalize` gives (lists are large_list: tfx-bsl's)."""
    return t in (pa.int64(), pa.float32(), pa.string(), pa.binary()) \
        or pa.types.is_date(t) or pa.types.is_timestamp(t)


class _Rows:
    """Each row's bytes, built left to right: runs of parts of one width per row are kept as
    NumPy columns and become one Arrow part each; parts whose width varies are Arrow arrays.
    `length` is each row's byte count so far."""

    def __init__(self, n: int) -> None:
        self.n, self.length = n, np.zeros(n, np.int64)
        self._columns: list[np.ndarray] = []
        self._parts: list[pa.Array] = []

    def constant(self, data: bytes) -> None:
        self._columns.append(np.broadcast_to(np.frombuffer(data, np.uint8), (self.n, len(data))))
        self.length += len(data)

    def fixed(self, grid: np.ndarray) -> None:
        self._columns.append(grid)
        self.length += grid.shape[1]

    def varint(self, value: np.ndarray, tag: int | None = None) -> None:
        value = np.asarray(value).astype(np.uint64, copy=False)
        size = varint_sizes(value)
        width = int(size.max()) if self.n else 1
        lead = 0 if tag is None else 1
        grid = np.empty((self.n, lead + width), np.uint8)
        if tag is not None:
            grid[:, 0] = tag
        for k in range(width):
            byte = ((value >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
            grid[:, lead + k] = byte | (size > k + 1).astype(np.uint8) << 7
        if not self.n or (size == width).all():
            self.fixed(grid)
            return
        keep = np.arange(lead + width) < (lead + size)[:, None]
        self.add(_array(grid[keep], lead + size))

    def add(self, part: pa.Array) -> None:
        self._flush()
        self._parts.append(part)
        self.length += _lengths(part)

    def parts(self) -> list[pa.Array]:
        self._flush()
        return self._parts

    def _flush(self) -> None:
        if self._columns:
            # built column by column in a (width x rows) array, then transposed once: a
            # 1-byte column written with a stride of the whole width is slow in NumPy
            width = sum(c.shape[1] for c in self._columns)
            by_column = np.empty((width, self.n), np.uint8)
            at = 0
            for column in self._columns:
                by_column[at:at + column.shape[1]] = column.T
                at += column.shape[1]
            grid = np.ascontiguousarray(by_column.T)
            self._parts.append(_array(grid.ravel(), np.full(self.n, grid.shape[1])))
            self._columns = []


def _entry(rows: _Rows, name: str, column: pa.Array, n: int) -> None:
    """Each row's map entry for a column without nulls: key, then the Feature and its value."""
    kind = column.type
    if pa.types.is_integer(kind):
        value = _values(column, np.uint64)  # a negative one takes 10 bytes
        size = varint_sizes(value)
        feature = 4 + size  # 0x1a len [0x0a size value]
        _key(rows, name, feature)
        rows.fixed(np.stack([np.full(n, 0x1A, np.uint8), (2 + size).astype(np.uint8),
                             np.full(n, 0x0A, np.uint8), size.astype(np.uint8)], axis=1))
        rows.varint(value)
    elif pa.types.is_floating(kind):
        _key(rows, name, np.full(n, 8))
        rows.constant(b"\x12\x06\x0a\x04")
        rows.fixed(_values(column, np.float32).view(np.uint8).reshape(n, 4))  # float32 bits
    else:
        payload = _text(column)
        size = _lengths(payload)
        inner = 1 + varint_sizes(size) + size  # BytesList: 0x0a varint(len) bytes
        _key(rows, name, 1 + varint_sizes(inner) + inner)
        rows.varint(inner, tag=0x0A)
        rows.varint(size, tag=0x0A)
        rows.add(payload)


def _key(rows: _Rows, name: str, feature: np.ndarray) -> None:
    """An entry's start: its tag and length, the key, then the Feature's tag and length."""
    key = name.encode()
    head = bytes([0x0A, *_varint_of(len(key)), *key, 0x12])
    rows.varint(len(head) + varint_sizes(feature) + feature, tag=0x0A)
    rows.constant(head)
    rows.varint(feature)


def _entry_with_nulls(name: str, column: pa.Array, n: int) -> pa.Array:
    """Each row's map entry for a column with nulls (whose Feature is empty): built per row
    shape, then the nulls' entries put in place."""
    valid = _Rows(n)
    _entry(valid, name, column, n)
    entries = _join(valid.parts(), n)
    empty = _Rows(n)
    _key(empty, name, np.zeros(n, np.int64))
    return pc.if_else(column.is_null(), _join(empty.parts(), n), entries)


def _text(column: pa.Array) -> pa.Array:
    """Strings and binaries as bytes; dates and timestamps as their text (as _as_feature)."""
    if not (pa.types.is_binary(column.type) or pa.types.is_string(column.type)):
        column = column.cast(pa.string())
    return column.cast(pa.binary())


def _values(column: pa.Array, dtype: type) -> np.ndarray:
    """A normalized int64 or float32 column's values buffer as `dtype` (whatever lies under
    a null: its entry is replaced). Not `fill_null`: a fill value imports pandas."""
    return np.frombuffer(column.buffers()[1], dtype, len(column),
                         column.offset * np.dtype(dtype).itemsize)


def _join(parts: list[pa.Array], n: int) -> pa.Array:
    """Per row, the parts' bytes one after the other."""
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, empties(n))


def _array(data: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """A binary array of rows of `sizes` bytes, one after the other in `data`."""
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(sizes), [None, pa.py_buffer(offsets),
                                                           pa.py_buffer(data)])


def tagged_varints(value: np.ndarray, tag: int) -> pa.Array:
    """Per row, the byte `tag` then the varint of `value` (e.g. a length-delimited field's
    header), as one binary array."""
    rows = _Rows(len(value))
    rows.varint(value, tag=tag)
    return rows.parts()[0]


def _lengths(array: pa.Array) -> np.ndarray:
    return binary_lengths(array)  # from the offsets: a null counts 0


def varint_sizes(value: np.ndarray) -> np.ndarray:
    """Bytes of each varint (of an unsigned 64-bit value)."""
    value = np.asarray(value).astype(np.uint64, copy=False)
    size = np.ones(len(value), np.int64)
    top = int(value.max()) if len(value) else 0
    for k in range(1, _VARINT_BYTES):
        if top < 1 << (7 * k):
            break
        size += value >= np.uint64(1) << np.uint64(7 * k)
    return size


def _varint_of(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
