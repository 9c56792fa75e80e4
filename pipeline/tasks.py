"""Running one map stage on one block: the user function, the order check and the counts."""

from __future__ import annotations

import functools
import logging
import os
import pickle
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from seqline.pipeline.blocks import SEQ, Block, batch_from_ipc, batch_to_ipc, seq_of
from seqline.pipeline.deadletters import DeadLetter
from seqline.pipeline.errors import StageError, disk_full, disk_full_message
from seqline.pipeline.isolate import RowFailed, apply_isolating

__all__ = ["BlockResult", "Counts", "MapBlocks", "MapTask", "ReadFn", "ShardCheck", "SourceTask",
           "StageFailure", "Written", "check_order"]

log = logging.getLogger("seqline")
if os.environ.get("SEQLINE_LOG_LEVEL"):  # -q on the driver, in a worker process (environment.py)
    log.setLevel(os.environ["SEQLINE_LOG_LEVEL"])

BatchFn = Callable[[pa.RecordBatch], pa.RecordBatch]
# A call of a stage's function that raised waits this long times its attempt number before it
# is tried again (`retry_user_errors`): a flaky service gets a moment to recover.
USER_RETRY_BACKOFF_SECONDS = 0.5


class Written(NamedTuple):
    """What a ShardWriter did with a block's output: the batch as stored, a description of the
    shard (its manifest entry; None when nothing was written) and, for a TFRecord shard, each
    record's length as framed: the read back checks these against the bytes it reads instead
    of walking the records one by one to find them (seq_scan.scan_seq)."""

    batch: pa.RecordBatch
    shard: dict | None
    framed: np.ndarray | None = None


# Writes a block's output where the stage keeps it (see pipeline/tfrecord/): a Written, or its
# first two fields.
ShardWriter = Callable[[int, pa.RecordBatch], Written | tuple[pa.RecordBatch, dict | None]]
# A shard read back from storage and checked against its description: the problems found and
# its seq (None if unreadable). verify takes a clean one instead of reading the shard again.
ShardCheck = tuple[list[str], np.ndarray | None]


@dataclass(frozen=True)
class Counts:
    """A stage's accounting: records_in + exploded = records_out + filtered + dead_lettered.

    `exploded` counts the extra rows an explode emits (one input row giving 3 rows adds 2).
    """

    records_in: int = 0
    records_out: int = 0
    filtered: int = 0
    exploded: int = 0
    dead_lettered: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def balanced(self) -> bool:
        return (self.records_in + self.exploded
                == self.records_out + self.filtered + self.dead_lettered)


@dataclass(frozen=True)
class StageFailure:
    """An exception raised in a worker, carried back to the driver as data.

    Engines differ in how (and whether) they ship exceptions across processes, so workers
    never raise: they return this, and the driver raises one `StageError` the same way on
    every runner, with the original exception chained when it could be pickled.
    """

    message: str
    traceback: str
    pickled: bytes | None
    seq: int | None = None  # the failing record, when the worker could tell which one

    @classmethod
    def of(cls, exc: BaseException, seq: int | None = None) -> StageFailure:
        try:
            pickled: bytes | None = pickle.dumps(exc)
        except Exception:  # an unpicklable exception still reaches the driver as text
            pickled = None
        text = "".join(traceback.format_exception(exc))
        return cls(f"{type(exc).__name__}: {exc}", text, pickled, seq)

    def original(self) -> BaseException | None:
        try:
            return pickle.loads(self.pickled) if self.pickled else None
        except Exception:  # e.g. the exception's class is not importable on the driver
            return None


@dataclass(frozen=True)
class BlockResult:
    """What a worker sends back for one block: output, counts, dead letters, shard; or a failure."""

    stage: str
    index: int
    first_seq: int | None
    batch: pa.RecordBatch | None = None
    counts: Counts = field(default_factory=Counts)
    failure: StageFailure | None = None
    dead_letters: tuple[DeadLetter, ...] = ()
    shard: dict | None = None
    read: ShardCheck | None = None  # the shard read back by the worker (MapTask.read_back)
    retried: tuple[str, ...] = ()  # the calls of the function tried again (retry_user_errors)

    def __reduce__(self):  # the output batch crosses processes as Arrow IPC, see batch_to_ipc
        data = None if self.batch is None else batch_to_ipc(self.batch)
        return (_rebuild_result, (self.stage, self.index, self.first_seq, data, self.counts,
                                  self.failure, self.dead_letters, self.shard, self.read,
                                  self.retried))

    def raise_if_failed(self) -> None:
        """Raise the worker's failure on the driver as a StageError naming stage, block, seq."""
        if self.failure is None:
            return
        original = self.original_error()
        if isinstance(original, StageError):  # already says where and why
            raise original
        seq = self.failure.seq
        where = (f"seq {seq} (block {self.index})" if seq is not None
                 else f"block {self.index} (first seq {self.first_seq})")
        raise StageError(
            f"stage {self.stage!r} failed on {where}: {self.failure.message}\n\n"
            f"Worker traceback:\n{self.failure.traceback}",
            stage=self.stage, block=self.index, seq=self.first_seq if seq is None else seq,
        ) from original

    def original_error(self) -> BaseException | None:
        return self.failure.original() if self.failure else None


def _rebuild_result(stage: str, index: int, first_seq: int | None, data: pa.Buffer | None,
                    counts: Counts, failure: StageFailure | None,
                    dead_letters: tuple[DeadLetter, ...], shard: dict | None,
                    read: ShardCheck | None = None, retried: tuple[str, ...] = ()
                    ) -> BlockResult:
    batch = None if data is None else batch_from_ipc(data)
    return BlockResult(stage, index, first_seq, batch, counts, failure, dead_letters, shard, read,
                       retried)


@dataclass(frozen=True)
class MapTask:
    """One map stage's work, shippable to any worker: a stage name and a function on batches.

    `fn` must be picklable by reference (a module-level function or a `functools.partial` of
    one), so that local processes, Beam workers and Ray tasks all run the same code.
    `dead_letters` sets rows that fail `fn` aside instead of failing the block (the stage has
    an error budget); `sink` writes each block's output as a shard, in the worker;
    `input_records` asks the driver to re-cut the input into blocks of that size first;
    `read_back` reads each shard written back from storage and checks it, in the worker, for
    `seqline verify` (decision 50), so that the driver does not.
    """

    stage: str
    fn: BatchFn
    dead_letters: bool = False
    sink: ShardWriter | None = None
    input_records: int | None = None
    retries: int = 3  # a block whose worker died runs again this many times (the runner's job)
    retry_user_errors: int = 0  # a call of `fn` that raised is tried again this many times
    read_back: Callable[[dict, np.ndarray | None], ShardCheck] | None = None

    def __call__(self, block: Block) -> BlockResult:
        said: list[str] = []  # the calls of `fn` tried again, told by the driver (`retried`)
        fn = self.fn if not self.retry_user_errors else functools.partial(
            _retrying, self.fn, self.stage, block, self.retry_user_errors, said)
        try:
            out, letters = apply_isolating(fn, block.batch, self.dead_letters)
            positions = check_order(self.stage, block, out)
            written = self._write(block, out)
            out = written.batch
        except RowFailed as exc:
            return BlockResult(self.stage, block.index, block.first_seq,
                               failure=StageFailure.of(exc.error, seq=exc.seq),
                               retried=tuple(said))
        except Exception as exc:  # carried to the driver, see StageFailure
            return BlockResult(self.stage, block.index, block.first_seq,
                               failure=StageFailure.of(exc), retried=tuple(said))
        return BlockResult(self.stage, block.index, block.first_seq, out,
                           _count(len(block), positions, len(letters)), None,
                           tuple(letters), written.shard, self._read_back(written),
                           tuple(said))

    def _read_back(self, written: Written) -> ShardCheck | None:
        if self.read_back is None or written.shard is None:
            return None
        try:
            return self.read_back(written.shard, written.framed)
        except Exception:  # verify reads it at the end, and says what is wrong
            return None

    def _write(self, block: Block, out: pa.RecordBatch) -> Written:
        if self.sink is None:
            return Written(out, None)
        try:
            return Written(*self.sink(block.index, out))
        except Exception as exc:
            full = disk_full(exc)
            if full is not None:
                raise StageError(
                    f"stage {self.stage!r}, block {block.index} (first seq {block.first_seq}): "
                    f"{disk_full_message(full, '.')}",
                    stage=self.stage, block=block.index, seq=block.first_seq) from exc
            raise StageError(
                f"stage {self.stage!r}, block {block.index} (first seq {block.first_seq}): "
                f"cannot store the output as tf.train.Example records: {exc}",
                stage=self.stage, block=block.index, seq=block.first_seq) from exc


def check_order(stage: str, block: Block, out: object) -> np.ndarray:
    """Check the stage contract and return, per output row, the position of its input row.

    The contract: the output is a RecordBatch whose seq is non-decreasing and drawn from the
    input block. Cost: one searchsorted over the block, no per-row Python.

    Raises:
        StageError: naming the stage, the block and the first offending seq.
    """
    where = f"stage {stage!r}, block {block.index} (first seq {block.first_seq})"
    if not isinstance(out, pa.RecordBatch):
        raise StageError(
            f"{where}: the function returned {type(out).__name__}, expected a "
            "pyarrow.RecordBatch. Return a batch built from the input (e.g. batch.filter(...)).",
            stage=stage, block=block.index, seq=block.first_seq)
    if SEQ not in out.schema.names:
        raise StageError(
            f"{where}: the output has no {SEQ!r} column. Keep the input's {SEQ!r} column on "
            "every row you return; it is how seqline proves order.",
            stage=stage, block=block.index, seq=block.first_seq)
    in_seq, out_seq = block.seq, seq_of(out)
    if len(out_seq) > 1 and (np.diff(out_seq) < 0).any():
        bad = int(np.argmax(np.diff(out_seq) < 0)) + 1
        raise StageError(
            f"{where}: the function reordered rows: seq {out_seq[bad]} comes after "
            f"{out_seq[bad - 1]}. A map stage may drop rows or emit several per row, but must "
            "keep input order; don't sort or shuffle inside the function.",
            stage=stage, block=block.index, seq=int(out_seq[bad]))
    positions = np.searchsorted(in_seq, out_seq)
    inside = positions < len(in_seq)
    foreign = ~inside
    foreign[inside] = in_seq[positions[inside]] != out_seq[inside]
    if foreign.any():
        seq = int(out_seq[np.argmax(foreign)])
        raise StageError(
            f"{where}: output seq {seq} is not one of the block's input seq. Don't create or "
            f"change {SEQ!r}; copy it from the row the output came from.",
            stage=stage, block=block.index, seq=seq)
    return positions


def _count(records_in: int, positions: np.ndarray, dead_lettered: int = 0) -> Counts:
    per_input = np.bincount(positions, minlength=records_in)
    return Counts(
        records_in=records_in,
        records_out=len(positions),
        filtered=int((per_input == 0).sum()) - dead_lettered,
        exploded=int((per_input[per_input > 1] - 1).sum()),
        dead_lettered=dead_lettered,
    )


def _retrying(fn: BatchFn, stage: str, block: Block, times: int, said: list[str],
              batch: pa.RecordBatch) -> Any:
    """`fn(batch)`, called again up to `times` times while it raises (`retry_user_errors`);
    each call tried again is a line in `said`, which the block's result carries to the driver:
    a worker's own log reaches neither the run's log nor, on every engine, the terminal."""
    for attempt in range(1, times + 2):
        try:
            return fn(batch)
        except Exception as exc:
            if attempt > times:
                raise
            said.append(f"stage {stage!r}: the function raised on block {block.index} (first "
                        f"seq {block.first_seq}): "
                        f"{' '.join(f'{type(exc).__name__}: {exc}'.split())}; calling it again "
                        f"(attempt {attempt + 1} of {times + 1})")
            time.sleep(USER_RETRY_BACKOFF_SECONDS * attempt)
    raise AssertionError("unreachable")


# A source task's function: read what the input rows describe (e.g. byte ranges of files) and
# return the records read, numbered from 0 in `SEQ`, with the bad ones as dead letters numbered
# the same way; or None for the batch when the input cannot be read as described (the source
# then reads it another way).
ReadFn = Callable[[pa.RecordBatch], tuple[pa.RecordBatch | None, list[DeadLetter]]]


@dataclass(frozen=True)
class SourceTask(MapTask):
    """A source stage's work on the workers: each block describes what to read, not records.

    Its output is new records, so it is not held to `check_order` (the output's seq is not
    drawn from the input): `fn` numbers records from 0 within the block, and the source stage
    on the driver offsets them by the records of all earlier blocks (a prefix sum; results
    arrive in block order). Counts: every record read is in, and out or dead-lettered.
    """

    fn: ReadFn  # type: ignore[assignment]  # a source reads; see ReadFn

    def __call__(self, block: Block) -> BlockResult:
        try:
            out, letters = self.fn(block.batch)
        except Exception as exc:  # carried to the driver, see StageFailure
            return BlockResult(self.stage, block.index, block.first_seq,
                               failure=StageFailure.of(exc))
        rows = 0 if out is None else out.num_rows
        counts = Counts(records_in=rows + len(letters), records_out=rows,
                        dead_lettered=len(letters))
        return BlockResult(self.stage, block.index, block.first_seq, out, counts,
                           dead_letters=tuple(letters))


# A runner's `map_blocks`, handed to a source stage (ingest) so that it can give ranges of its
# files to the workers without knowing the engine: results come back in block order.
MapBlocks = Callable[[MapTask, Iterable[Block]], Iterator[BlockResult]]
