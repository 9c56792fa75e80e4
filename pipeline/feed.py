"""A stage's stored shards as they are written, so a later stage can read them while it runs.

This is how the trainer's first epoch overlaps ingest and preprocessing: the stage that stores
records adds each shard here the moment a worker has written it (shards arrive in seq order),
and a reader follows the feed, reading shard k as soon as it exists instead of waiting for
the stage to commit. A committed stage's feed is simply complete from the start.

A reader that keeps up need not decode what was just written: once someone `follow`s the
feed, it also keeps each new shard's records in memory (as stored, up to `hold_bytes`, the
oldest dropped first) until a reader takes them; a reader further behind reads the file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from seqline.pipeline.errors import StageError
from seqline.pipeline.storage import Folder

__all__ = ["ShardFeed"]


class ShardFeed:
    """The ordered shard descriptions of one stage's records, growing until the stage ends."""

    def __init__(self, stage: str, folder: Folder, compression: str = "gzip",
                 hold_bytes: int = 0) -> None:
        self.stage = stage
        self.compression = compression
        self.hold_bytes = hold_bytes
        self._held: dict[str, pa.RecordBatch] = {}  # by shard path, oldest first
        self._held_total = 0
        self._followed = False
        self.taken = 0  # shards a reader took from memory instead of decoding the file
        self._folder: Folder = Path(folder) if isinstance(folder, str) else folder
        self._shards: list[dict[str, Any]] = []
        self._schema: pa.Schema | None = None
        self._done = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()

    @classmethod
    def stored(cls, stage_dir: Folder, manifest: dict[str, Any], schema: pa.Schema) -> ShardFeed:
        """The feed of a committed stage: every shard known, nothing more to come."""
        feed = cls(stage_dir.name, stage_dir, manifest["compression"])
        feed._shards, feed._schema, feed._done = list(manifest["shards"]), schema, True
        return feed

    def add(self, shard: dict[str, Any], schema: pa.Schema,
            records: pa.RecordBatch | None = None) -> None:
        """A shard is written; `records`: its records as stored, kept if someone follows."""
        with self._changed:
            self._shards.append(shard)
            self._schema = self._schema or schema
            if records is not None and self._followed and self.hold_bytes:
                self._held[shard["path"]] = records
                self._held_total += records.nbytes
                while self._held_total > self.hold_bytes:
                    self._held_total -= self._held.pop(next(iter(self._held))).nbytes
            self._changed.notify_all()

    def follow(self) -> None:
        """A reader will read the shards as they come: keep their records in memory."""
        with self._changed:
            self._followed = True

    def take(self, shard: dict[str, Any]) -> pa.RecordBatch | None:
        """The shard's records if still held in memory (then no longer held), else None."""
        with self._changed:
            records = self._held.pop(shard["path"], None)
            if records is not None:
                self._held_total -= records.nbytes
                self.taken += 1
            return records

    def release(self) -> None:
        """The reader is done with the stream: drop whatever is still held."""
        with self._changed:
            self._followed, self._held, self._held_total = False, {}, 0

    def close(self, folder: Folder) -> None:
        """The stage committed: no more shards; they now live in `folder`."""
        with self._changed:
            self._folder, self._done = folder, True
            self._changed.notify_all()

    def fail(self, error: BaseException) -> None:
        """The stage failed (or the run stopped): readers waiting on the feed raise."""
        with self._changed:
            self._error = self._error or error
            self._changed.notify_all()

    def wait(self, known: int) -> tuple[list[dict[str, Any]], bool]:
        """Block until there are more than `known` shards or the feed is done.

        Returns the shards so far and whether they are all there will be.

        Raises:
            StageError: the stage writing the feed failed.
        """
        with self._changed:
            self._changed.wait_for(
                lambda: len(self._shards) > known or self._done or self._error is not None)
            self._raise_if_failed()
            return list(self._shards), self._done

    def schema(self) -> pa.Schema | None:
        """The records' schema once the first shard exists (waits for it); None if empty."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._schema is not None or self._done or self._error is not None)
            self._raise_if_failed()
            return self._schema

    def path(self, shard: dict[str, Any]) -> Folder:
        """Where a shard is now: the stage's temporary folder until it commits, then its own."""
        with self._changed:
            return self._folder / shard["path"]

    def moved(self, shard: dict[str, Any], stale: Folder) -> Folder:
        """The shard's path once the folder it was not found in has been renamed into place.

        A stage's commit renames its folder before the feed learns the new one; a reader
        that looked in between waits for it (briefly).
        """
        with self._changed:
            self._changed.wait_for(lambda: self._folder / shard["path"] != stale
                                   or self._error is not None, timeout=60)
            return self._folder / shard["path"]

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise StageError(f"stage {self.stage!r} stopped before storing all its records: "
                             f"{type(self._error).__name__}: {self._error}",
                             stage=self.stage) from self._error
