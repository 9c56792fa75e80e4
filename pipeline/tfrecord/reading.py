"""Reading stored shards: a shard's records, a committed artifact, a stage's feed as it grows."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from seqline.pipeline.errors import StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.storage import Folder, storage_of
from seqline.pipeline.tfrecord.coding import decode, schema_from_text
from seqline.pipeline.tfrecord.framing import CorruptRecord, Records, iter_record_chunks

__all__ = ["read_artifact", "read_feed", "read_fed_shard", "read_shard"]


def read_shard(path: Folder, compression: str) -> Records:
    """A shard's records: a local file, or an object read whole (one GET, no range requests)."""
    with storage_of(path).open(path, "rb") as f:
        return Records.joined(list(iter_record_chunks(f, str(path), compression)))


def read_artifact(stage_dir: Folder, manifest: dict[str, Any], prefetch: int = 2
                  ) -> Iterator[pa.RecordBatch]:
    """A committed TFRecord artifact's records as batches, one per shard, in manifest order."""
    schema = schema_from_text(manifest["schema"])
    yield from read_feed(ShardFeed.stored(stage_dir, manifest, schema), prefetch)


def read_feed(feed: ShardFeed, prefetch: int = 2,
              on_wait: Callable[[float], None] | None = None) -> Iterator[pa.RecordBatch]:
    """A stage's records as batches, one per shard, in seq order, while they are written.

    Shards are read and decoded `prefetch` ahead on threads (file reads and the decoder
    release the GIL; libdeflate's inflate holds it, for a few ms a shard) and yielded strictly
    in order; when the reader catches up with the writer it
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
                         "`seqline verify` checks the whole run, and `seqline run … --resume "
                         "--run-id ID` writes a damaged stage again.", stage=feed.stage) from exc
