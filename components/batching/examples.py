"""Reading a plan's examples from stored records: streamed as stored, or held in memory.

Both readers are the cutter (`Cutter`) fed the records in seq order, so they give the same
batches; the in-memory `Batches` adds what needs a whole split at once, the shuffles.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from seqline.components.batching.cutter import Batch, Batcher, Cutter
from seqline.components.batching.plan import Plan, epoch_rng, per_record
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.storage import Folder
from seqline.pipeline.tfrecord import read_artifact, read_fed_shard, schema_from_text

__all__ = ["CUT_RECORDS", "Batches", "StreamedBatches", "TrainingInput", "load_batches",
           "source_feed", "stored_source", "stream_batches"]

# Records fed to the cutter at once by `Batches`: a cut then holds 2**16 windows' row numbers
# (7 MB for 14-record windows), however long the split.
CUT_RECORDS = 2**16


class TrainingInput(Protocol):
    """Where training's examples come from: held in memory or streamed as stored."""

    @property
    def plan(self) -> Plan:
        """The batching plan the examples follow."""

    def batches(self, split: str, epoch: int = 0) -> Iterator[Batch]:
        """(x, y, seq) per batch of `split`, in the order epoch `epoch` consumes them."""

    def first(self, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Features and labels of the first `k` train records; None if there are none.

        Normalization statistics and the class count come from them, so training can
        start before the rest has arrived.
        """

    def release(self) -> int:
        """Frees what the input holds; returns how many shards were taken from memory."""


class Batches:
    """A plan applied to records held in memory: the cutter fed all of them, for any epoch.

    The cutter is fed row numbers in place of features and labels, so what it hands back says
    which rows make each example and which row holds its label; the features and labels are
    gathered from those rows. Shuffles need a whole split at once, which is why they are
    here: a record shuffle permutes the train records' features before windows are cut (labels
    and seq stay, so a window holds unrelated records: order destroyed, on purpose); an
    example shuffle permutes whole train examples. Both are seeded per epoch; eval never moves.

    The selected columns are held as float32 (1 M records x 10 features is 40 MB); the
    records are in seq order, as the artifact stores them.

    Example: 20 records, batch_size 4, eval_fraction 0.25, window {length: 3}: train examples
    start at rows 0-11 (labels at rows 3-14) in 3 batches, eval at rows 15-16 (labels 18-19).
    """

    def __init__(self, plan: Plan, x: np.ndarray, y: np.ndarray, seq: np.ndarray,
                 columns: Mapping[str, np.ndarray] | None = None) -> None:
        self.plan = plan
        self.columns = dict(columns or {SEQ: seq})  # every stored column, for slicing
        self._x, self._y, self._seq = x, y, seq

    @property
    def records(self) -> int:
        """How many records the examples are cut from."""
        return len(self._seq)

    def batches(self, split: str, epoch: int = 0) -> Iterator[Batch]:
        """(x, y, seq) per batch: exact `batch_size`, the last one kept or dropped by plan."""
        x = self._features(split, epoch)
        for rows, labels, seq in self._examples(split, epoch):
            yield x[rows], self._y[labels], seq

    def example_seq(self, split: str, epoch: int = 0) -> np.ndarray:
        """The seq of every example of `split` in consumption order (the audit's stream)."""
        return self._seq[self.label_rows(split, epoch)]

    def label_rows(self, split: str, epoch: int = 0) -> np.ndarray:
        """The row of every example's label in consumption order (to slice by its columns)."""
        return _joined([labels for _, labels, _ in self._examples(split, epoch)])

    def first(self, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Features (never shuffled) and labels of the first `k` train records."""
        batch = next(self._cut(per_record(self.plan, k), "train"), None)
        return None if batch is None else (self._x[batch[0]], self._y[batch[1]])

    def release(self) -> int:
        return 0  # nothing was taken from a feed

    def _examples(self, split: str, epoch: int) -> Iterator[Batch]:
        """(feature rows, label rows, seq) per batch, in the order epoch `epoch` takes them."""
        if split == "train" and self.plan.shuffle == "examples":
            return self._shuffled(epoch)
        return self._cut(self.plan, split)

    def _cut(self, plan: Plan, split: str) -> Iterator[Batch]:
        """The cutter fed every record, as row numbers: which rows make each batch.

        Fed a chunk at a time with the total known, as a stored artifact is streamed, so
        one cut holds the row numbers of a chunk's windows, not of the whole split's.
        """
        rows = np.arange(self.records)
        cutter = Cutter(plan, split)
        for start in range(0, self.records, CUT_RECORDS):
            end = start + CUT_RECORDS
            cutter.feed(rows[start:end], rows[start:end], self._seq[start:end])
            yield from cutter.cut(self.records, True)
        yield from cutter.finish()

    def _shuffled(self, epoch: int) -> Iterator[Batch]:
        """The train examples, whole, permuted for `epoch`, then cut into exact batches."""
        every = list(self._cut(replace(self.plan, remainder="keep"), "train"))
        if not every:
            return
        rows, labels, seq = (np.concatenate(parts) for parts in zip(*every, strict=True))
        order = epoch_rng(self.plan, epoch).permutation(len(seq))
        batcher = Batcher(self.plan.batch_size, self.plan.remainder)
        yield from batcher.add((rows[order], labels[order], seq[order]))
        yield from batcher.finish()

    def _features(self, split: str, epoch: int) -> np.ndarray:
        """The features as `split` reads them in `epoch`: train records permuted, if asked."""
        if split != "train" or self.plan.shuffle != "records":
            return self._x
        every = per_record(self.plan, max(self.records, 1))
        train = _joined([labels for _, labels, _ in self._cut(every, "train")])
        x = self._x.copy()
        x[train] = self._x[train[epoch_rng(self.plan, epoch).permutation(len(train))]]
        return x


def _joined(rows: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(rows) if rows else np.empty(0, np.int64)


@dataclass(frozen=True)
class StreamedBatches:
    """An unshuffled plan's examples read from the source's shards as they are stored."""

    plan: Plan
    feed: ShardFeed

    def batches(self, split: str, epoch: int = 0) -> Iterator[Batch]:
        """(x, y, seq) per batch; every epoch is the same, as nothing is shuffled."""
        return stream_batches(self.plan, self.feed, split)

    def first(self, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Features and labels of the first `k` train records, read without taking them."""
        batch = next(stream_batches(per_record(self.plan, k), self.feed, "train", take=False),
                     None)
        return None if batch is None else (batch[0], batch[1])

    def release(self) -> int:
        """Lets the feed drop the records it holds; how many shards came from memory."""
        self.feed.release()
        return self.feed.taken


def load_batches(run: Folder, plan: Plan, stage: str) -> Batches:
    """Read the plan's source records (in manifest order) into memory for batching.

    Args:
        run: the run's folder, `<root>/runs/<run_id>`.
        plan: the batching plan; its `source` is the stage whose records are read.
        stage: the stage reading them, named in errors.

    Raises:
        StageError: the source stored no records.
    """
    stage_dir = run / plan.source
    stored = list(read_artifact(stage_dir, read_manifest(stage_dir)))
    table = pa.Table.from_batches(stored) if stored else None
    if table is None or table.num_rows == 0:
        raise StageError(f"stage {stage!r}: its input {plan.source!r} stored no records to "
                         "batch.", stage=stage)
    columns = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}
    x, y, seq = _arrays(plan, columns)
    return Batches(plan, x, y, seq, columns)


def _arrays(plan: Plan, columns: Mapping[str, Any]) -> Batch:
    """Features as float32 (NaN as 0), the label as stored, and seq, from record columns."""
    n = len(columns[SEQ])
    x = np.column_stack([np.asarray(columns[f]).astype(np.float32) for f in plan.features]) \
        if plan.features else np.zeros((n, 0), np.float32)
    return np.nan_to_num(x), np.asarray(columns[plan.label]), \
        np.asarray(columns[SEQ]).astype(np.int64)


def stored_source(run: Folder, source: str) -> tuple[Folder, dict[str, Any]]:
    """The folder and manifest of stage `source`, which must store records.

    Raises:
        ConfigError: the stage stores no records (it is not a TFRecord stage).
    """
    stage_dir = run / source
    manifest = read_manifest(stage_dir)
    if not manifest.get("schema"):
        raise ConfigError(f"stage {source!r} stores no records to batch; read a "
                          "tfrecord_write or preprocess stage.")
    return stage_dir, manifest


def source_feed(run: Folder, source: str) -> ShardFeed:
    """The committed records of stage `source` as a complete feed."""
    stage_dir, manifest = stored_source(run, source)
    return ShardFeed.stored(stage_dir, manifest, schema_from_text(manifest["schema"]))


def stream_batches(plan: Plan, feed: ShardFeed, split: str, take: bool = True
                   ) -> Iterator[Batch]:
    """(x, y, seq) batches of an unshuffled split, read from the source's stored shards.

    The shards are followed as they are written: a shard is read once it exists and holds
    records the split can use now, so the trainer's first epoch runs while the stages before
    it are still writing, and memory holds a shard and the rows not yet decided, never the
    whole artifact. Shards the feed still holds in memory are taken from there (`take`)
    instead of decoded. The batches are the same as `Batches.batches(split)`: both are the
    cutter fed the same records in the same order.
    """
    cutter = Cutter(plan, split)
    shards: list[dict[str, Any]] = []
    done, read, total = False, 0, 0
    while True:
        while read < len(shards) and cutter.fed < cutter.horizon(total, done):
            records = read_fed_shard(feed, shards[read], take)
            read += 1
            # only the columns batches use: a string column would become a Python object
            # per record
            cutter.feed(*_arrays(plan, {n: records.column(n).to_numpy(zero_copy_only=False)
                                        for n in {*plan.features, plan.label, SEQ}}))
            yield from cutter.cut(total, done)
        if done and (read == len(shards) or cutter.fed >= cutter.horizon(total, done)):
            yield from cutter.cut(total, done)
            yield from cutter.finish()
            return
        shards, done = feed.wait(len(shards))  # the rows held need more records to decide
        total = sum(s["records"] for s in shards)
