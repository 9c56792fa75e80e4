"""The runner interface: run a map stage over blocks in parallel, release results in order."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Protocol

from seqline.orchestration.events import BlockRetried, HeadOfLine, Occupancy, Subscriber
from seqline.pipeline.blocks import SEQ, Block
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.reorder import AdaptiveWindow, ReorderBuffer, first_window
from seqline.pipeline.tasks import BlockResult, MapTask, SourceTask, StageFailure

__all__ = ["Engine", "Runner", "poisoned", "retry_after_death", "run_windowed"]

log = logging.getLogger("seqline")

# A retried block waits this long times its attempt number: a machine hiccup (memory
# pressure, the OOM killer's pick) gets a moment to pass, a poison block fails in seconds.
BACKOFF_SECONDS = 0.2


class Runner(ABC):
    """Runs `MapTask`s over blocks on some engine, at most `window` blocks in flight.

    What it sees as it goes (blocks in flight and held for order, blocks run again) it
    publishes as events (`publish`), per stage; it keeps no figures for others to read.
    """

    name = "runner"

    def __init__(self, workers: int = 2, window: int | None = None,
                 publish: Subscriber | None = None) -> None:
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {workers}.")
        # Unless the user fixed it, the window widens behind a straggler (AdaptiveWindow), so
        # ordering does not idle the workers.
        self.workers = workers
        self.window = first_window(workers, window)
        self.adaptive = window is None
        if self.window < 1:
            raise ConfigError(f"--window must be at least 1, got {self.window}.")
        self.publish: Subscriber = publish or _ignore

    @property
    def most_in_flight(self) -> int:
        """The most blocks a stage ever has in flight: the bound on its memory."""
        return AdaptiveWindow.widest(self.window, self.workers) if self.adaptive else self.window

    @abstractmethod
    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        """Run `task` on every block; yield results in block order (or as done if unordered).

        Raises:
            StageError: the first failing block in block order, with the worker's exception.
        """

    def map_fused(self, tasks: list[MapTask],
                  blocks: Iterable[Block]) -> Iterator[list[BlockResult]]:
        """Run `tasks` one after the other on every block; yield each block's results in block
        order, one per task that ran on it (a task does not run after one that failed or kept
        no rows). Failures are returned, not raised. Only engines whose stages are batch
        jobs (Beam) have it: elsewhere stages stream into each other already, each with its
        own window of workers (see plan.FUSING_RUNNERS)."""
        raise NotImplementedError(f"the {self.name} runner does not fuse stages")

    def running(self, handle: Any) -> tuple[int, str | None, float | None]:
        """The attempt running a block now, the worker running it and since when (Unix
        seconds), for the block that holds the others back. This default: the handle's
        `attempt` (1 without one), no worker, no time (then: when it was handed over)."""
        return getattr(handle, "attempt", 1), None, None

    def close(self) -> None:  # noqa: B027 - engines without workers to release need nothing
        """Release the engine's workers."""

    def abort(self) -> None:  # noqa: B027 - engines without workers to stop need nothing
        """Stop the workers now, dropping the blocks in flight (the run was cancelled).

        Called from the driver's main thread while stage threads may be waiting on results;
        those waits must then end (with any exception) instead of blocking.
        """

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Engine(Protocol):
    """What the windowed loop needs of an engine: start one block, wait for some, cancel."""

    def submit(self, task: MapTask, block: Block) -> Hashable:
        """Start `task(block)`; return a handle to wait on."""

    def wait(self, handles: list[Any]) -> list[tuple[Any, BlockResult]]:
        """Block until at least one handle is done; return every finished one with its result."""

    def cancel(self, handles: list[Any]) -> None:
        """Best effort: stop work whose result nobody will read (after a failure)."""

    def running(self, handle: Any) -> tuple[int, str | None, float | None]:
        """The attempt running a handle's block, its worker and since when (see Runner)."""


def run_windowed(engine: Engine, task: MapTask, blocks: Iterable[Block], runner: Runner, *,
                 ordered: bool = True) -> Iterator[BlockResult]:
    """The submit/wait loop shared by engines that take one block at a time (local, Ray).

    Block b + window is not submitted before block b's result has been yielded; the window
    (fixed, or adaptive: see AdaptiveWindow), the reorder buffer and error propagation live
    here, once, for every such engine. It publishes an Occupancy per block admitted and a
    HeadOfLine per wait for results.
    """
    buffer: ReorderBuffer[BlockResult] = ReorderBuffer(runner.window, ordered=ordered)
    window = AdaptiveWindow(runner.window, runner.workers) if runner.adaptive else None
    head = _Head(engine, task, ordered)
    source = iter(blocks)
    pending: dict[Hashable, int] = {}
    exhausted = False
    try:
        while True:
            while not exhausted and buffer.can_admit():
                block = next(source, None)
                if block is None:
                    exhausted = True
                    break
                handle = engine.submit(task, block)
                pending[handle] = index = buffer.admit()
                head.admitted(index, handle, block)
                runner.publish(Occupancy(stage=task.stage, in_flight=buffer.in_flight,
                                         held=buffer.held))
            if not pending:
                return
            for handle, result in engine.wait(list(pending)):
                index = pending.pop(handle)
                buffer.put(index, result)
                head.finished(index, result)
            held = buffer.held
            ready = buffer.pop_ready()
            head.released(ready)
            if window is not None and not exhausted:
                buffer.capacity = window.capacity(buffer, head.held_bytes)
            runner.publish(head.told(buffer.in_flight, held, waiting=buffer.held > 0))
            for result in ready:
                result.raise_if_failed()
                yield result
    finally:
        if pending:
            engine.cancel(list(pending))


class _Head:
    """What holds a stage's reorder buffer back, followed block by block in O(1): the seqs
    released in order and finished, the results waiting (records, bytes), and the block they
    wait for. Seqs are read from a block only when told (one wait's newest released and
    finished block), and its worker asked of the engine only when the block held up (or its
    attempt) changes: a few microseconds a wait (benchmarks/head_of_line.py).

    A source stage's blocks say what to read; its records are numbered as they leave in
    order, so its watermark counts the records released, and the block held up starts
    right after it.
    """

    def __init__(self, engine: Engine, task: MapTask, ordered: bool) -> None:
        self.engine, self.stage, self.ordered = engine, task.stage, ordered
        self.numbered_on_leaving = isinstance(task, SourceTask)
        self.blocks: dict[int, tuple[Hashable, Block, float]] = {}  # handle, block, handed at
        self.sizes: dict[int, tuple[int, int]] = {}  # held results' records and bytes
        self.next = 0  # the index released next
        self.last_released: Block | None = None
        self.last_done: Block | None = None  # the finished block of the highest index
        self.held_records = self.held_bytes = 0
        self.records_released = 0
        self.seqs: dict[int, int | None] = {}  # last seq of a block told lately, by index
        self.described: tuple[int, int, str | None, float | None, int | None] | None = None

    def admitted(self, index: int, handle: Hashable, block: Block) -> None:
        self.blocks[index] = (handle, block, time.time())

    def finished(self, index: int, result: BlockResult) -> None:
        block = self.blocks[index][1]
        if self.last_done is None or index > self.last_done.index:
            self.last_done = block
        batch = result.batch
        # the Arrow buffers a held result keeps alive (a slice keeps its parent's), counted
        # without nbytes' walk over slices, which costs ~30 µs a block
        size = (batch.num_rows, batch.get_total_buffer_size()) if batch is not None else (0, 0)
        self.sizes[index] = size
        self.held_records += size[0]
        self.held_bytes += size[1]

    def released(self, results: list[BlockResult]) -> None:
        for result in results:
            records, size = self.sizes.pop(result.index)
            self.held_records -= records
            self.held_bytes -= size
            self.last_released = self.blocks.pop(result.index)[1]
            self.records_released += result.counts.records_in
            self.next = result.index + 1

    def told(self, in_flight: int, held: int, *, waiting: bool) -> HeadOfLine:
        """The event after a wait: `held` before the release, `waiting` after it."""
        if self.numbered_on_leaving:
            watermark = self.records_released - 1 if self.records_released else None
            seq_done = None
        else:
            watermark = self._last_seq(self.last_released) if self.ordered else None
            seq_done = self._last_seq(self.last_done)
        blocker: dict[str, Any] = {}
        if waiting and self.ordered and self.next in self.blocks:
            handle, block, handed = self.blocks[self.next]
            attempt, worker, since, first = self._describe(handle, block)
            blocker = {"blocker_block": self.next, "blocker_seq": first,
                       "blocker_attempt": attempt, "blocker_worker": worker,
                       "blocker_since": since or handed}
        return HeadOfLine(stage=self.stage, in_flight=in_flight, held=held,
                          watermark=watermark, seq_done=seq_done,
                          held_records=self.held_records, held_bytes=self.held_bytes,
                          **blocker)

    def _last_seq(self, block: Block | None) -> int | None:
        """The block's last seq, read once (a stalled line tells the same blocks again)."""
        if block is None:
            return None
        if block.index not in self.seqs:
            if len(self.seqs) > 8:  # only the newest released and finished are asked again
                self.seqs.clear()
            self.seqs[block.index] = _seq_at(block, -1)
        return self.seqs[block.index]

    def _describe(self, handle: Hashable, block: Block
                  ) -> tuple[int, str | None, float | None, int | None]:
        """The engine's word on the block held up and its first seq, asked again only when
        it is another block or attempt, or its worker was not known yet (still queued)."""
        kept = self.described
        if kept is not None and kept[0] == block.index and kept[2] is not None \
                and kept[1] == getattr(handle, "attempt", 1):
            return kept[1], kept[2], kept[3], kept[4]
        attempt, worker, since = self.engine.running(handle)
        first = self.records_released if self.numbered_on_leaving else _seq_at(block, 0)
        self.described = (block.index, attempt, worker, since, first)
        return attempt, worker, since, first


def _seq_at(block: Block, at: int) -> int | None:
    """One seq of a block (0: its first, -1: its last) as one Arrow scalar: ~1 µs, where
    Block.seq converts the whole column (~5-30 µs for 16,384 records)."""
    seq = block.batch.column(SEQ)
    return seq[at].as_py() if len(seq) else None


def retry_after_death(runner: Runner, task: MapTask, block: Block, attempt: int) -> None:
    """Count, say and wait before running again a block whose worker died on `attempt`."""
    runner.publish(BlockRetried(stage=task.stage, block=block.index, first_seq=block.first_seq,
                                attempt=attempt + 1))
    log.warning("stage %r: the worker running block %d (first seq %s) died; running it again "
                "(attempt %d of %d)", task.stage, block.index, block.first_seq, attempt + 1,
                task.retries + 1)
    time.sleep(BACKOFF_SECONDS * attempt)


def poisoned(stage: str, block: Block, attempts: int) -> BlockResult:
    """A block that killed its worker on every attempt: the run fails, naming it."""
    error = StageError(
        f"stage {stage!r}: block {block.index} (first seq {block.first_seq}) killed its "
        f"worker process on all {attempts} attempts (a segfault in native code, os._exit, "
        "or the kernel's OOM killer). Run with --workers 1 to see it fail on its own.",
        stage=stage, block=block.index, seq=block.first_seq)
    return BlockResult(stage, block.index, block.first_seq, failure=StageFailure.of(error))


def _ignore(event: object) -> None:
    """Where a runner's events go when nobody listens."""
