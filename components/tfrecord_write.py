"""tfrecord_write: store blocks as ordered TFRecord shards of tf.train.Example, in parallel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
from pydantic import Field

from seqline.pipeline.params import StageParams
from seqline.pipeline.specs import MapSpec, StageSpec
from seqline.pipeline.storage import Folder
from seqline.pipeline.tasks import MapTask
from seqline.pipeline.tfrecord import ShardSink
from seqline.pipeline.tfrecord.compression import DEFAULT_LEVEL, MAX_LEVEL

__all__ = ["DEFAULT_LEVEL", "SPEC", "Compression", "CompressionLevel", "TFRecordWriteParams",
           "make_sink", "make_task"]

# 65,536 records a shard: a few MB of Examples, enough that tf.data reads each shard in long
# sequential runs, and still many shards (so many parallel writers) per million records.
DEFAULT_SHARD_RECORDS = 65_536

Compression = Annotated[Literal["gzip", "none"], Field(
    description="Shard compression; gzip is what tf.data's compression_type='GZIP' reads.")]
CompressionLevel = Annotated[int, Field(ge=0, le=MAX_LEVEL, description=(
    "libdeflate's gzip level: 0 stores, 1 (default) is ~7x zlib 6's speed for ~6% more "
    "bytes, 6 is zlib 6's size at ~3x its speed, 10-12 are slow and smallest "
    "(benchmarks/CODEC.md)."))]


class TFRecordWriteParams(StageParams):
    """tfrecord_write's parameters: how the shards are compressed and how many records each."""

    compression: Compression = "gzip"
    compression_level: CompressionLevel = DEFAULT_LEVEL
    shard_records: int = Field(DEFAULT_SHARD_RECORDS, ge=1, description="Records per shard.")


def make_task(stage: StageSpec[TFRecordWriteParams], base_dir: Path, out_dir: Folder
              ) -> MapTask:
    """Blocks in, the same records out; each shard_records-record group written as one shard.

    The stream passes on the records as stored (normalized types, see tfrecord.normalize), so
    a later stage sees the same values whether it reads this stream or the artifact.

    Example: 150,000 records with shard_records 65,536 give shard-000000 (seq 0-65,535),
    shard-000001 (65,536-131,071) and shard-000002 (131,072-149,999).
    """
    p = stage.params
    return MapTask(stage.name, keep, sink=make_sink(p.compression, p.compression_level, out_dir),
                   input_records=p.shard_records, retries=stage.retries)


def keep(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def make_sink(compression: str, level: int, out_dir: Folder) -> ShardSink:
    return ShardSink(str(out_dir), compression, level)


SPEC = MapSpec(name="tfrecord_write", params=TFRecordWriteParams, run=make_task,
               writes="records", passes_every_record=True, cuts_blocks=True,
               doc="Blocks -> ordered TFRecord shards of tf.train.Example.")
