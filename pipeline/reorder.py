"""The reorder buffer: results arrive in any order, blocks leave in index order."""

from __future__ import annotations

from typing import Generic, TypeVar

from seqline.pipeline.errors import InternalError

__all__ = ["ReorderBuffer"]

T = TypeVar("T")


class ReorderBuffer(Generic[T]):
    """Releases results in block-index order, holding at most `capacity` blocks in flight.

    Invariant: block indices are dense (0, 1, 2, ...); a missing index holds everything after
    it. A block is *in flight* from `admit()` until it is released, so block b + capacity is
    not admitted before block b has been released: `capacity` bounds memory and is the
    backpressure on whoever submits work.

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
