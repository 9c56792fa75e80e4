"""Cutting a split's examples out of records that arrive in seq order, a chunk at a time.

The stream's length is unknown until it ends, yet a tail split needs it: the last
`eval_fraction` of records are eval. What makes streaming possible is that the boundary
`n - round(n * eval_fraction)` never moves back as n grows. Once m records have been seen,
every example whose label lies before `boundary(m)` is certainly train, so the trainer's first
epoch can consume the stream with that lag, and the eval examples are cut when it ends.
Records behind the next example's start are dropped, so memory holds one window plus the rows
not yet decided.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from seqline.components.batching import Plan

__all__ = ["Cutter", "boundary", "hash_is_eval", "reach"]

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]  # x, y, seq of the examples' labels


def boundary(n: int, eval_fraction: float) -> int:
    """Tail split: records [0, boundary) are train, the rest eval. Never decreases with n."""
    return n - int(round(n * eval_fraction))


def reach(plan: Plan) -> int:
    """Rows from an example's first record to its label's record (0 without a window)."""
    w = plan.window
    return 0 if w is None else w["length"] - 1 + w["label_offset"]


def hash_is_eval(seq: np.ndarray, seed: int, eval_fraction: float) -> np.ndarray:
    """Hash split: SplitMix64 of (seq, seed), so a record's split depends only on its seq."""
    with np.errstate(over="ignore"):  # the hash wraps around 2**64 on purpose
        z = seq.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return ((z ^ (z >> np.uint64(31))) % np.uint64(10_000)) < eval_fraction * 10_000


class Cutter:
    """One split's examples, in order, as exact batches, from records fed in order.

    `feed` the next records; `cut(total, final)` yields every full batch of examples that is
    certainly in the split once `total` records exist (`final`: that is all of them);
    `finish` yields the last partial batch when the plan keeps it. Unshuffled plans only: a
    shuffle needs the whole split at once (see `Batches`).
    """

    def __init__(self, plan: Plan, split: str) -> None:
        self.plan, self.split = plan, split
        self.reach = reach(plan)
        self.length = plan.window["length"] if plan.window else 1
        self.stride = plan.window["stride"] if plan.window else 1
        self.next = 0  # the next candidate example start (a row number)
        self.first = 0  # row number of the buffer's first row
        self.fed = 0  # rows fed so far
        self.x: np.ndarray | None = None
        self.y: np.ndarray | None = None
        self.seq: np.ndarray | None = None
        self.filling: list[Batch] = []  # examples of the batch being filled

    def feed(self, x: np.ndarray, y: np.ndarray, seq: np.ndarray) -> None:
        if self.x is None:
            self.x, self.y, self.seq = x, y, seq
        else:
            self.x = np.concatenate([self.x, x])
            self.y = np.concatenate([self.y, y])
            self.seq = np.concatenate([self.seq, seq])
        self.fed += len(seq)

    def horizon(self, total: int, final: bool) -> int:
        """Rows worth feeding now: beyond this, no example can be cut until more arrive."""
        if self.plan.split == "hash":
            return total
        if self.split == "train":
            return boundary(total, self.plan.eval_fraction)
        return total if final else 0

    def cut(self, total: int, final: bool) -> Iterator[Batch]:
        if self.x is None:
            return
        if self.plan.split == "hash":
            picked = hash_is_eval(self.seq, self.plan.seed, self.plan.eval_fraction)
            rows = np.flatnonzero(picked if self.split == "eval" else ~picked)
            examples = (self.x[rows], self.y[rows], self.seq[rows])
            self.next = self.fed  # every fed row is decided: _trim drops them all
        else:
            examples = self._cut_tail(total, final)
        self._trim()
        if examples is not None and len(examples[2]):
            self.filling.append(examples)
            yield from self._full_batches()

    def _cut_tail(self, total: int, final: bool) -> Batch | None:
        edge = boundary(total, self.plan.eval_fraction)
        if self.split == "train":
            stop = edge - self.reach
        else:
            # Eval starts at the boundary, known only at the end; rows before the boundary
            # as it stands now are train whatever comes, so they need not be kept.
            self.next = max(self.next, edge)
            if not final:
                return None
            stop = total - self.reach
        stop = min(stop, self.fed - self.reach)  # the label's record must have arrived
        starts = np.arange(self.next, max(stop, self.next), self.stride)
        if not len(starts):
            return None
        self.next = int(starts[-1]) + self.stride
        at = starts - self.first
        x = self.x[at[:, None] + np.arange(self.length)] if self.plan.window else self.x[at]
        return x, self.y[at + self.reach], self.seq[at + self.reach]

    def _trim(self) -> None:
        drop = min(self.next, self.fed) - self.first
        if drop > 0:
            self.x, self.y, self.seq = self.x[drop:], self.y[drop:], self.seq[drop:]
            self.first += drop

    def _full_batches(self) -> Iterator[Batch]:
        size = self.plan.batch_size
        if sum(len(b[2]) for b in self.filling) < size:
            return
        x, y, seq = (np.concatenate(parts) for parts in zip(*self.filling, strict=True))
        whole = len(seq) - len(seq) % size
        for i in range(0, whole, size):
            yield x[i:i + size], y[i:i + size], seq[i:i + size]
        self.filling = [(x[whole:], y[whole:], seq[whole:])] if whole < len(seq) else []

    def finish(self) -> Iterator[Batch]:
        """The last partial batch, if the plan keeps it; call once the stream has ended."""
        if self.filling and self.plan.remainder == "keep":
            x, y, seq = (np.concatenate(parts) for parts in zip(*self.filling, strict=True))
            if len(seq):
                yield x, y, seq
        self.filling = []
