"""The shard writer: one block's records as one TFRecord shard, written by the worker itself.

The sink gets its folder as text: a local path (the stage's temporary folder, renamed into
place at commit) or an fsspec URL (the stage's final prefix on an object store). On an object
store every attempt writes its own object, `shard-<block>-<attempt>.tfrecord.gz`, in one PUT:
a retried block never overwrites what another attempt wrote, a worker killed mid-write leaves
no object or a whole one that no manifest lists, and only the shard the driver puts in the
committed manifest is ever read (pipeline/artifacts.py, pipeline/storage.py).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from seqline.pipeline.arrays import binary_lengths
from seqline.pipeline.storage import folder, storage_of
from seqline.pipeline.tasks import Written
from seqline.pipeline.tfrecord.coding import encode, normalize
from seqline.pipeline.tfrecord.compression import DEFAULT_LEVEL, gzip_compress
from seqline.pipeline.tfrecord.framing import frame

__all__ = ["ShardSink"]


class ShardSink:
    """Writes one block's output as one TFRecord shard; runs in the workers, in parallel.

    Shards are named by block index, so their names sort in seq order and no worker needs
    to know any other's progress; the driver lists them in the manifest in block order.
    """

    def __init__(self, folder: str, compression: str = "gzip", level: int = DEFAULT_LEVEL
                 ) -> None:
        self.folder, self.compression, self.level = folder, compression, level

    def __call__(self, index: int, batch: pa.RecordBatch) -> Written:
        batch = normalize(batch)
        if batch.num_rows == 0:
            return Written(batch, None)  # no empty shard file for a fully filtered block
        suffix = ".tfrecord.gz" if self.compression == "gzip" else ".tfrecord"
        records = encode(batch)
        data = frame(records)
        if self.compression == "gzip":
            # One gzip member, by libdeflate: the same bytes on every runner and machine.
            data = gzip_compress(data, self.level)
        place = folder(self.folder)  # fsspec keeps its clients: a worker opens one once
        storage = storage_of(place)
        name = storage.attempt_name(f"shard-{index:06d}{suffix}")
        # Not durable yet: the stage's commit makes every shard it lists durable at once
        # (StageArtifact.commit), where an fsync here stalled this worker ~1 ms a shard.
        storage.write_atomically(place / name, data)
        seq = batch.column("__seq__")
        return Written(batch, {"path": name, "records": batch.num_rows, "bytes": len(data),
                               "sha256": hashlib.sha256(data).hexdigest(),
                               "seq_first": seq[0].as_py(), "seq_last": seq[-1].as_py()},
                       binary_lengths(records))
