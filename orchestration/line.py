"""The assembly line: every stage on a thread of its own, joined by bounded queues.

A stage's output goes onto a `Belt` of a few blocks; when the next stage falls behind the belt
fills and the stage waits (backpressure), and when the stage before is slow the next one
waits on an empty belt. Both waits are timed, per stage, so a run shows where its time went.
Stages that read stored records (the trainer, a stage naming an earlier stage in `inputs:`)
follow that stage's `ShardFeed` instead, reading each shard once it is written.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from seqline.orchestration.events import Subscriber, WaitEnded, WaitStarted
from seqline.orchestration.processes import raise_if_cancelled
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import ConfigError, StageError, disk_full, disk_full_message
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.storage import Folder
from seqline.pipeline.tfrecord import read_feed

__all__ = ["AssemblyLine", "Belt", "Stopped"]

T = TypeVar("T")
_END = object()
_POLL = 0.05  # seconds between checks for a stopped line while waiting on a belt


class Stopped(Exception):
    """Another stage failed and the line is stopping; this stage ends without an error."""


class Belt(Generic[T]):
    """A bounded queue of blocks from one stage to the next, timing the waits at both ends
    (or of block results, from the engine job that a fused stage runs in).

    A wait longer than one poll is published as it starts and ends, on the waiting stage:
    `producer` waiting on `output`, `consumer` on `input`.
    """

    def __init__(self, capacity: int, stop: threading.Event, producer: str = "",
                 consumer: str = "", publish: Subscriber | None = None) -> None:
        if capacity < 1:
            raise ConfigError(f"--queue must be at least 1 block, got {capacity}.")
        self._queue: queue.Queue = queue.Queue(capacity)
        self._stop = stop
        self._waiting = {"output": producer, "input": consumer}
        self._publish = publish
        self.waited_put = 0.0  # the producer, blocked on a full belt
        self.waited_get = 0.0  # the consumer, blocked on an empty belt

    def _waited(self, on: str, start: float, polls: int) -> float:
        seconds = time.perf_counter() - start
        if polls and self._publish is not None:
            self._publish(WaitEnded(stage=self._waiting[on], on=on, seconds=seconds))
        return seconds

    def _poll(self, on: str, polls: int) -> None:
        """One poll timed out: say the wait started (once), or stop with the line."""
        if self._stop.is_set():
            raise Stopped from None
        if polls == 1 and self._publish is not None:
            self._publish(WaitStarted(stage=self._waiting[on], on=on))

    def put(self, item: T) -> None:
        start, polls = time.perf_counter(), 0
        while True:
            try:
                self._queue.put(item, timeout=_POLL)
                break
            except queue.Full:
                polls += 1
                self._poll("output", polls)
        self.waited_put += self._waited("output", start, polls)

    def close(self) -> None:
        self.put(_END)  # type: ignore[arg-type]  # the end mark, never yielded

    def __iter__(self) -> Iterator[T]:
        while True:
            start, polls = time.perf_counter(), 0
            while True:
                try:
                    item = self._queue.get(timeout=_POLL)
                    break
                except queue.Empty:
                    polls += 1
                    self._poll("input", polls)
            self.waited_get += self._waited("input", start, polls)
            if item is _END:
                return
            yield item


class AssemblyLine:
    """The run's stage threads and what they tell each other: feeds, plans and commits.

    Implements `seqline.pipeline.specs.Line` for the driver stages.
    """

    def __init__(self, folder: Folder) -> None:
        self.folder = folder  # the run's, named when a disk fills up without saying where
        self.stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._errors: list[tuple[str, BaseException]] = []
        self._feeds: dict[str, ShardFeed] = {}
        self._announced: dict[str, Future] = {}
        self._committed: dict[str, Future] = {}

    def add_stage(self, stage: str, feed: ShardFeed | None = None) -> None:
        self._announced[stage], self._committed[stage] = Future(), Future()
        if feed is not None:
            self._feeds[stage] = feed

    def start(self, stage: str, work: Callable[[], Folder], after: str | None = None) -> None:
        """Run `work` (which commits the stage and returns its folder) on a thread; `after`:
        once that stage has committed."""
        thread = threading.Thread(target=self._run, args=(stage, work, after), daemon=True,
                                  name=f"seqline-{stage}")
        self._threads[stage] = thread
        thread.start()

    def _run(self, stage: str, work: Callable[[], Folder], after: str | None) -> None:
        try:
            if after is not None:
                self.committed(after)
            self.mark_committed(stage, work())
        except Stopped:
            self._abort(stage, Stopped(f"stage {stage!r} stopped"))
        except BaseException as exc:  # every failure reaches join(), on the caller's thread
            self._errors.append((stage, exc))
            self.stop.set()
            self._abort(stage, exc)
            for other in self._feeds.values():  # wake readers blocked on any feed
                other.fail(Stopped("the run is stopping"))

    def _abort(self, stage: str, exc: BaseException) -> None:
        if stage in self._feeds:
            self._feeds[stage].fail(exc)
        for futures in (self._announced, self._committed):
            if not futures[stage].done():
                futures[stage].set_exception(exc)

    def mark_committed(self, stage: str, folder: Folder) -> None:
        if not self._announced[stage].done():
            self._announced[stage].set_result(None)
        self._committed[stage].set_result(folder)

    def announce(self, stage: str) -> Callable[[Any], None]:
        return self._announced[stage].set_result

    def announced(self, stage: str) -> Any:
        return self._announced[stage].result()

    def committed(self, stage: str) -> Folder:
        return self._committed[stage].result()

    def wait_committed(self, stage: str) -> Folder:
        """`committed`, for a stage thread: a line that stops (a cancel, another failure)
        ends the wait, as it ends a wait on a belt."""
        future = self._committed[stage]
        while True:
            try:
                return future.result(timeout=_POLL)
            except TimeoutError:
                if self.stop.is_set():
                    raise Stopped from None

    def is_committed(self, stage: str) -> bool:
        future = self._committed.get(stage)
        return future is not None and future.done() and future.exception() is None

    @property
    def failed_stage(self) -> str | None:
        """The stage whose failure stopped the line (the first), if one did."""
        return self._errors[0][0] if self._errors else None

    def feed(self, stage: str) -> ShardFeed:
        if stage not in self._feeds:
            raise ConfigError(f"stage {stage!r} does not store records, so no later stage can "
                              "read them; read a tfrecord_write or preprocess stage.")
        return self._feeds[stage]

    def blocks_of(self, stage: str, on_wait: Callable[[float], None]) -> Iterator[Block]:
        """Stage `stage`'s stored records as blocks, one per shard, as they are written;
        `on_wait` is told each wait for a shard not written yet, in seconds."""
        for index, batch in enumerate(read_feed(self.feed(stage), on_wait=on_wait)):
            yield Block(index, batch)

    def join(self, order: list[str]) -> None:
        """Wait for every stage; raise the first failure (the cause; later ones follow it).

        Ctrl-C or SIGTERM (a KeyboardInterrupt here, or a cancel the signal raised where
        Python dropped it: processes.raise_if_cancelled) stops the line and is raised at once:
        the caller stops the engine, whose workers the stages may be waiting on, then
        `halt`s.
        """
        try:
            for stage in order:
                thread = self._threads.get(stage)
                while thread is not None and thread.is_alive():
                    thread.join(timeout=0.2)
                    raise_if_cancelled()
        except KeyboardInterrupt:
            self.stop.set()
            for feed in self._feeds.values():
                feed.fail(Stopped("interrupted"))
            raise
        if self._errors:
            stage, error = self._errors[0]
            if isinstance(error, StageError | ConfigError):
                raise error
            full = disk_full(error)
            if full is not None:
                raise StageError(f"stage {stage!r}: {disk_full_message(full, str(self.folder))}",
                                 stage=stage) from error
            raise StageError(f"stage {stage!r} failed: {type(error).__name__}: {error}",
                             stage=stage) from error

    def halt(self, timeout: float) -> None:
        """Stop every stage and wait up to `timeout` seconds, in all, for their threads.

        A thread still running then (a driver stage inside a long library call) is left to
        end with the process: its thread is a daemon, and its output is never committed.
        """
        self.stop.set()
        for feed in self._feeds.values():
            feed.fail(Stopped("the run is stopping"))
        deadline = time.monotonic() + timeout
        for thread in self._threads.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
