"""The reorder buffer: results arrive in any order, blocks leave in index order."""

from __future__ import annotations

from typing import Generic, TypeVar

from seqline.pipeline.errors import InternalError

__all__ = ["AdaptiveWindow", "ReorderBuffer", "first_window"]

T = TypeVar("T")


class ReorderBuffer(Generic[T]):
    """Releases results in block-index order, holding at most `capacity` blocks in flight.

    Invariant: block indices are dense (0, 1, 2, ...); a missing index holds everything after
    it. A block is *in flight* from `admit()` until it is released, so block b + capacity is
    not admitted before block b has been released: `capacity` bounds memory and is the
    backpressure on whoever submits work. The owner may change `capacity` between waits
    (AdaptiveWindow); blocks already in flight stay.

    With `ordered=False` results leave as they arrive (the benchmark's unordered baseline);
    the in-flight bound is the same.
    """

    def __init__(self, capacity: int, *, ordered: bool = True) -> None:
        if capacity < 1:
            raise InternalError(f"reorder buffer capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.ordered = ordered
        self._admitted = 0
        self._released = 0
        self._held: dict[int, T] = {}
        self.max_in_flight = 0
        self.max_held = 0

    @property
    def held(self) -> int:
        """Results handed in but not released: waiting for an earlier block."""
        return len(self._held)

    @property
    def in_flight(self) -> int:
        return self._admitted - self._released

    def can_admit(self) -> bool:
        return self.in_flight < self.capacity

    def admit(self) -> int:
        """Take the next block index into flight; the caller submits that block's work."""
        if not self.can_admit():
            raise InternalError("admit() on a full reorder buffer")
        index = self._admitted
        self._admitted += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return index

    def put(self, index: int, result: T) -> None:
        """Hand in the result of an admitted block, in any order."""
        stale = self.ordered and index < self._released
        if index in self._held or index >= self._admitted or stale:
            raise InternalError(f"block {index} was not in flight or arrived twice")
        self._held[index] = result
        self.max_held = max(self.max_held, len(self._held))

    def pop_ready(self) -> list[T]:
        """Release what may leave now: the consecutive run from the next index, in order."""
        if not self.ordered:
            ready, self._held = list(self._held.values()), {}
        else:
            ready = []
            while self._released + len(ready) in self._held:
                ready.append(self._held.pop(self._released + len(ready)))
        self._released += len(ready)
        return ready


# How far an adaptive window may widen: past this many blocks per worker, or this many bytes
# of results held for order, the workers wait for the head of the line rather than the
# driver's memory growing.
MAX_BLOCKS_PER_WORKER = 32
MAX_HELD_BYTES = 256 * 2**20


def first_window(workers: int, window: int | None) -> int:
    """A stage's blocks in flight at first: the window the user fixed, else 4x the workers (a
    few blocks queued per worker hide the engine's hand-over, while memory stays at a few
    blocks per worker; AdaptiveWindow then widens it behind a straggler)."""
    return window or 4 * workers


class AdaptiveWindow:
    """The blocks a stage keeps in flight when the user did not fix `--window`.

    A fixed window counts results held for order against the work it hands out, so behind a
    straggler the workers run out of blocks while finished ones wait: ordering then costs
    throughput (0.85 of unordered at 4x workers; decision 61). This window counts only
    blocks not yet finished: it is `start` plus the results held, so the engine always has
    `start` blocks to run, as it would if results left as they finish. What ordering costs is
    then only the memory of held results, bounded by MAX_HELD_BYTES and MAX_BLOCKS_PER_WORKER;
    at the bound the window stops widening and the workers wait.
    """

    def __init__(self, start: int, workers: int) -> None:
        self.start = start
        self.limit = self.widest(start, workers)

    @staticmethod
    def widest(start: int, workers: int) -> int:
        """The most blocks the window ever lets into flight."""
        return max(start, MAX_BLOCKS_PER_WORKER * workers)

    def capacity(self, buffer: ReorderBuffer[T], held_bytes: int) -> int:
        """The capacity for `buffer` after a wait, given the bytes its held results keep."""
        wanted = min(self.limit, self.start + buffer.held)
        if held_bytes >= MAX_HELD_BYTES and wanted > buffer.capacity:
            return buffer.capacity
        return wanted
