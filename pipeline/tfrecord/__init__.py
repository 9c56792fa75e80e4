"""The TFRecord format: Arrow <-> tf.train.Example coding, framing, and shards written and read.

    coding.py         normalize, encode, decode; a schema as manifest text
    scalar_encoder.py Examples of scalar columns written in NumPy (tfx-bsl's bytes)
    scalar_decoder.py and read back in place, column by column
    example_order.py  an Example's features in name order, so equal records give equal bytes
    framing.py        TFRecord framing and its CRCs, read back chunk by chunk
    compression.py    a shard as one gzip member, by libdeflate, and inflated at once
    writing.py        ShardSink: one block's records as one shard, written by a worker
    reading.py        a shard, a committed artifact, or a stage's feed as it grows, in order

Components and orchestration import it alike; it imports no engine (tfx-bsl's coders load on
first use, TensorFlow never).
"""

from seqline.pipeline.tfrecord.coding import (
    decode,
    encode,
    feature_kind,
    normalize,
    schema_from_text,
    schema_to_text,
)
from seqline.pipeline.tfrecord.framing import (
    CorruptRecord,
    Records,
    frame,
    iter_record_chunks,
    iter_records,
)
from seqline.pipeline.tfrecord.reading import read_artifact, read_fed_shard, read_feed, read_shard
from seqline.pipeline.tfrecord.writing import ShardSink

__all__ = ["CorruptRecord", "Records", "ShardSink", "decode", "encode", "feature_kind", "frame",
           "iter_record_chunks", "iter_records", "normalize",
           "read_artifact", "read_fed_shard", "read_feed", "read_shard", "schema_from_text",
           "schema_to_text"]
