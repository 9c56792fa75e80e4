"""Arrow <-> tf.train.Example with tfx-bsl's C++ coders (no TensorFlow), in a canonical order."""

from __future__ import annotations

import base64
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqline.pipeline.arrays import binaries, binary_lengths, empties, int64s
from seqline.pipeline.tfrecord.example_order import in_name_order
from seqline.pipeline.tfrecord.framing import CorruptRecord, Records
from seqline.pipeline.tfrecord.scalar_decoder import decode_scalars
from seqline.pipeline.tfrecord.scalar_encoder import encode_scalars, tagged_varints, varint_sizes

__all__ = ["decode", "encode", "normalize", "schema_from_text", "schema_to_text"]


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

    The entries of every row are in name order: the canonical form C++ protobuf's
    deterministic serialization gives, so the same records give the same bytes on every
    runner. A batch of scalar columns (the usual case) is written with NumPy and Arrow kernels
    (scalar_encoder.py, about 6x faster). Others go to tfx-bsl's encoder, which writes a feature map
    in protobuf's hash order, varying from call to call: the entries of every row are then put
    in name order (example_order.py). If the names cannot be told apart cheaply, each column
    is encoded alone (a one-entry map has one order) and the features are joined per row in
    name order with Arrow kernels, at about twice the cost.

    Example: a row {x: 3, name: "a"} becomes an Example with features name: bytes_list [b"a"]
    and x: int64_list [3], in that order; a null becomes a feature with no value.
    """
    scalars = encode_scalars(batch)
    if scalars is not None:
        return scalars
    columns = [_as_feature(col) for col in batch.columns]
    whole = pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
    ordered = in_name_order(binaries(_encoder().encode(whole)), batch.schema.names)
    if ordered is not None:
        return ordered
    features = []
    for name in sorted(batch.schema.names):
        one = pa.RecordBatch.from_arrays([_as_feature(batch.column(name))], names=[name])
        features.append(_strip_tag(binaries(_encoder().encode(one))))
    if not features:
        return binaries([b""] * batch.num_rows)
    n = batch.num_rows
    joined = pc.binary_join_element_wise(*features, empties(n)) if len(features) > 1 \
        else features[0]
    return pc.binary_join_element_wise(_tagged_lengths(joined), joined, empties(n))


# An Example is field 1 (features), length-delimited: the tag byte 0x0a, a varint length.
_FEATURES_TAG = 0x0A
_NO_STOP = np.iinfo(np.int32).max  # binary_slice needs an explicit stop in pyarrow 25


def _strip_tag(examples: pa.BinaryArray) -> pa.BinaryArray:
    """Each one-feature Example minus its tag and length: its single map entry."""
    total = pc.binary_length(examples).to_numpy(zero_copy_only=False).astype(np.int64)
    prefix = 1 + varint_sizes(total - 2)  # a payload under 128 bytes has a 1-byte length...
    for size in (2, 3, 4):  # ...else solve payload = total - 1 - size(payload)
        prefix = np.where(varint_sizes(np.maximum(total - 1 - size, 0)) == size, 1 + size,
                          prefix)
    stripped = None
    for start in np.unique(prefix):
        part = pc.binary_slice(examples, int(start), _NO_STOP)
        stripped = part if stripped is None else pc.if_else(pa.array(prefix == start), part,
                                                            stripped)
    return stripped if stripped is not None else examples


def _tagged_lengths(payloads: pa.BinaryArray) -> pa.BinaryArray:
    """Per row, the bytes 0x0a + varint(len(payload)), built as one Arrow array in NumPy."""
    return tagged_varints(binary_lengths(payloads), _FEATURES_TAG)


def _as_feature(col: pa.Array) -> pa.Array:
    """tfx-bsl's encoder takes list columns of int64, float32 or binary; wrap scalars."""
    if pa.types.is_large_list(col.type):
        if _is_text(col.type.value_type):
            return col.cast(pa.large_list(pa.large_binary()))
        return col
    # Nulls filled only where there are some: a fill value makes pyarrow import pandas (0.3 s
    # a worker; arrays.py).
    values = col.cast(pa.string()).cast(pa.large_binary()) if _is_text(col.type) else col
    if col.null_count:
        values = values.fill_null(b"" if _is_text(col.type) else 0)
    offsets = int64s(np.arange(len(col) + 1, dtype=np.int64))
    mask = col.is_null() if col.null_count else None
    return pa.LargeListArray.from_arrays(offsets, values, mask=mask)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_date(t) \
        or pa.types.is_timestamp(t)


def decode(records: list[bytes] | Records, schema: pa.Schema) -> pa.RecordBatch:
    """Parse serialized Examples into a batch of `schema` (a normalized schema): read in
    place by scalar_decoder.py when they are scalar columns laid out as seqline writes them,
    else by tfx-bsl's decoder (C++). The same batch either way.

    Raises:
        CorruptRecord: a record is not a tf.train.Example, or a scalar column holds a list.
    """
    if isinstance(records, Records):
        values = decode_scalars(np.frombuffer(records.buffer, np.uint8), records.starts,
                                records.starts + records.lengths, schema)
        if values is not None:
            return pa.RecordBatch.from_arrays(
                [_typed(v, field) for v, field in zip(values, schema, strict=True)],
                schema=schema)
        records = records.as_list()
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
    return _typed(pc.list_element(col, 0), field)


def _typed(values: pa.Array, field: pa.Field) -> pa.Array:
    """A scalar column's decoded values (int64, float32, large_binary) as `field`'s type."""
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
    kinds = {"int64_list": schema_pb2.INT, "float_list": schema_pb2.FLOAT,
             "bytes_list": schema_pb2.BYTES}
    for field in schema_from_text(schema_text):
        feature = proto.feature.add()
        feature.name = field.name
        feature.type = kinds[feature_kind(field.type)]
    return ExamplesToRecordBatchDecoder(proto.SerializeToString())


def feature_kind(t: pa.DataType) -> str:
    """Which of tf.train.Example's three lists holds a column of type `t` (or of lists of it):
    int64 in an int64_list, floats in a float_list, anything else as bytes."""
    t = t.value_type if pa.types.is_large_list(t) else t
    return "int64_list" if pa.types.is_int64(t) else \
        "float_list" if pa.types.is_floating(t) else "bytes_list"


def schema_to_text(schema: pa.Schema) -> str:
    """An Arrow schema as base64 text, exact (Arrow's own IPC form), for manifests."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


