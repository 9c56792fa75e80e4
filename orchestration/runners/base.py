"""The runner interface: run a map stage over blocks in parallel, release results in order."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Protocol

from seqline.orchestration.events import BlockRetried, Occupancy, Subscriber
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.reorder import ReorderBuffer
from seqline.pipeline.tasks import BlockResult, MapTask, StageFailure

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
        # 4x the workers: enough that one slow block (a straggler) does not idle the others,
        # while memory stays at a few blocks per worker. See benchmarks/ for the measurement.
        self.workers = workers
        self.window = window or 4 * workers
        if self.window < 1:
            raise ConfigError(f"--window must be at least 1, got {self.window}.")
        self.publish: Subscriber = publish or _ignore

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


def run_windowed(engine: Engine, task: MapTask, blocks: Iterable[Block], runner: Runner, *,
                 ordered: bool = True) -> Iterator[BlockResult]:
    """The submit/wait loop shared by engines that take one block at a time (local, Ray).

    Block b + window is not submitted before block b's result has been yielded; the window,
    the reorder buffer and error propagation live here, once, for every such engine.
    """
    buffer: ReorderBuffer[BlockResult] = ReorderBuffer(runner.window, ordered=ordered)
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
                pending[engine.submit(task, block)] = buffer.admit()
                runner.publish(Occupancy(stage=task.stage, in_flight=buffer.in_flight,
                                         held=buffer.held))
            if not pending:
                return
            for handle, result in engine.wait(list(pending)):
                buffer.put(pending.pop(handle), result)
            held = buffer.held
            ready = buffer.pop_ready()
            runner.publish(Occupancy(stage=task.stage, in_flight=buffer.in_flight, held=held))
            for result in ready:
                result.raise_if_failed()
                yield result
    finally:
        if pending:
            engine.cancel(list(pending))


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
