"""Examples of scalar columns read into Arrow with NumPy, column by column: scalar_encoder.py's
inverse, for the Examples seqline writes (and any writer laying them out the same way).

tfx-bsl's decoder parses each record into a protobuf message, then builds list columns from
them (about 2 s per million records of five columns here), and the caller then took the one
element of each list. Here every record's map entries are walked in lockstep, one column at
a time, with vectorized reads of the wire format (seq_scan.py's): no per-record message, no
list column. A column of int64s is one varint read over all rows; of floats, one gather of
four bytes; of bytes or text, one Arrow take over the values' spans in the shard's buffer.

It reads only the layout it knows: every record's features are exactly the schema's, in name
order, each a Feature holding one value of its column's kind (packed, as every writer packs
them), or no value at all (a null: the empty Feature seqline writes for one). Anything else (a
list column, a missing or extra feature, another order, an empty list, another kind, a
malformed record) gives None, and the caller decodes with tfx-bsl, which gives the same
columns or names the problem. So a batch decoded here is the batch tfx-bsl would give.

Wire format (protobuf): Example = 0x0a varint(len) Features; Features = entries, each
0x0a varint(len) MapEntry; MapEntry = 0x0a varint(len) key, 0x12 varint(len) Feature;
Feature = 0x0a (bytes) / 0x12 (float) / 0x1a (int64) varint(len) List; List = 0x0a varint(len)
values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from seqline.pipeline.tfrecord.seq_scan import _field, _uint32s_at, _varint

__all__ = ["decode_scalars"]

_EMBEDDED = 0x0A  # Example.features, Features.feature, MapEntry.key, List.value (packed)
_VALUE = 0x12  # MapEntry.value: the Feature
_BYTES, _FLOAT, _INT64 = 0x0A, 0x12, 0x1A  # Feature's kinds


def decode_scalars(view: np.ndarray, at: np.ndarray, end: np.ndarray, schema: pa.Schema
                   ) -> list[pa.Array] | None:
    """The columns of `schema` (no list types) from the Examples at `view[at:end]`, as the
    values tfx-bsl's decoder gives (int64, float32, large_binary), or None (see above)."""
    if len(at) == 0 or any(pa.types.is_large_list(f.type) for f in schema):
        return None
    features = _field(view, at, end, _EMBEDDED)
    if features is None or not np.array_equal(features[1], end):
        return None
    pos, columns = features[0], {}
    for name in sorted(schema.names, key=str.encode):  # map entries in key (byte) order
        entry = _field(view, pos, end, _EMBEDDED)
        if entry is None:
            return None
        key = _field(view, entry[0], entry[1], _EMBEDDED)
        if key is None or not _keys_are(view, key[0], key[1], name.encode()):
            return None
        feature = _field(view, key[1], entry[1], _VALUE)
        if feature is None or not np.array_equal(feature[1], entry[1]):
            return None
        column = _column(view, *feature, schema.field(name).type)
        if column is None:
            return None
        columns[name] = column
        pos = entry[1]
    if not np.array_equal(pos, end):
        return None  # more features than the schema's
    return [columns[name] for name in schema.names]


def _keys_are(view: np.ndarray, at: np.ndarray, stop: np.ndarray, key: bytes) -> bool:
    """Every key (at `at`, ending at `stop`) is `key`: compared four bytes at a time."""
    if not (stop - at == len(key)).all():
        return False
    if len(key) < 4:
        return all((view[at + i] == byte).all() for i, byte in enumerate(key))
    for i in [*range(0, len(key) - 3, 4), len(key) - 4]:
        word = int.from_bytes(key[i:i + 4], "little")
        if not (_uint32s_at(view, at + i) == word).all():
            return False
    return True


def _column(view: np.ndarray, at: np.ndarray, end: np.ndarray, arrow_type: pa.DataType
            ) -> pa.Array | None:
    """One column's values from its Features at `view[at:end]`: an empty Feature is a null."""
    valid = at < end
    rows = np.flatnonzero(valid)
    kind = _INT64 if pa.types.is_integer(arrow_type) else \
        _FLOAT if pa.types.is_floating(arrow_type) else _BYTES
    values_at = np.zeros(len(at), np.int64)
    values_end = np.zeros(len(at), np.int64)
    if len(rows):
        listed = _field(view, at[rows], end[rows], kind)
        if listed is None or not np.array_equal(listed[1], end[rows]):
            return None
        packed = _field(view, *listed, _EMBEDDED)  # fails on an empty list: none to read
        if packed is None or not np.array_equal(packed[1], listed[1]):
            return None
        values_at[rows], values_end[rows] = packed
    mask = None if len(rows) == len(at) else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if kind == _INT64:
        value, size = _varint(view, values_at[rows], values_end[rows])
        if size is None or not np.array_equal(values_at[rows] + size, values_end[rows]):
            return None
        ints = np.zeros(len(at), np.int64)
        ints[rows] = value.view(np.int64)
        return pa.Array.from_buffers(pa.int64(), len(at), [mask, pa.py_buffer(ints)])
    if kind == _FLOAT:
        if not (values_end[rows] - values_at[rows] == 4).all():
            return None
        floats = np.zeros(len(at), np.uint32)
        floats[rows] = _uint32s_at(view, values_at[rows])
        return pa.Array.from_buffers(pa.float32(), len(at), [mask, pa.py_buffer(floats)])
    return _spans(view, values_at, values_end, mask)


def _spans(view: np.ndarray, at: np.ndarray, end: np.ndarray, mask: pa.Buffer | None
           ) -> pa.Array:
    """The bytes `view[at[i]:end[i]]` of each row as one large_binary array (null where
    `mask` says), with one Arrow take: the spans and the gaps between them, in order, are
    the elements of one binary array over the same buffer (no copy), of which the spans are
    taken."""
    empty = at == end  # a null or an empty value: placed where the last span ended
    last_end = np.maximum.accumulate(np.where(empty, 0, end))
    bounds = np.empty(2 * len(at), np.int64)
    bounds[0::2] = np.where(empty, last_end, at)
    bounds[1::2] = np.where(empty, last_end, end)
    whole = pa.Array.from_buffers(pa.large_binary(), len(bounds) - 1,
                                  [None, pa.py_buffer(bounds), pa.py_buffer(view)])
    taken = whole.take(pa.array(np.arange(0, len(bounds), 2), pa.int64()))
    if mask is None:
        return taken
    return pa.Array.from_buffers(pa.large_binary(), len(at), [mask, *taken.buffers()[1:]])
