"""Cutting a split's examples out of records that arrive in seq order, a chunk at a time.

The only implementation of cutting: training's stream, the in-memory `Batches` (the cutter
fed everything) and the batching stage's digests all go through `Cutter`.

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

import numpy as np

from seqline.components.batching.plan import Plan, boundary, hash_is_eval

__all__ = ["Batch", "Batcher", "Cutter"]

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]  # x, y, seq of the examples' labels


class Batcher:
    """Examples that arrive in order, grouped into batches of exactly `size`.

    `add` yields every batch that is full; `finish` yields the last, partial one when
    `remainder` is "keep" (like tf.data) and drops it when it is "drop".
    """

    def __init__(self, size: int, remainder: str) -> None:
        self.size, self.remainder = size, remainder
        self.filling: list[Batch] = []  # examples of the batch being filled

    def add(self, examples: Batch) -> Iterator[Batch]:
        """The full batches once `examples` have joined those waiting."""
        if not len(examples[2]):
            return
        self.filling.append(examples)
        if sum(len(b[2]) for b in self.filling) < self.size:
            return
        x, y, seq = _joined(self.filling)
        whole = len(seq) - len(seq) % self.size
        for i in range(0, whole, self.size):
            yield x[i:i + self.size], y[i:i + self.size], seq[i:i + self.size]
        self.filling = [(x[whole:], y[whole:], seq[whole:])] if whole < len(seq) else []

    def finish(self) -> Iterator[Batch]:
        """The last partial batch, if kept; call once no more examples will come."""
        if self.filling and self.remainder == "keep":
            x, y, seq = _joined(self.filling)
            if len(seq):
                yield x, y, seq
        self.filling = []


def _joined(parts: list[Batch]) -> Batch:
    x, y, seq = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    return x, y, seq


class Cutter:
    """One split's examples, in order, as exact batches, from records fed in order.

    `feed` the next records; `cut(total, final)` yields every full batch of examples that is
    certainly in the split once `total` records exist (`final`: that is all of them);
    `finish` yields the last partial batch when the plan keeps it. The cutter keeps order: a
    shuffle permutes what goes in (records) or what comes out (examples), see `Batches`.

    Example: 10 records, no window, eval_fraction 0.2, batch_size 3, remainder keep: train
    is rows 0-7 in batches [0-2], [3-5], [6-7]; eval is rows 8-9 in one batch.
    """

    def __init__(self, plan: Plan, split: str) -> None:
        self.plan, self.split = plan, split
        self.next = 0  # the next candidate example start (a row number)
        self.first = 0  # row number of the buffer's first row
        self.fed = 0  # rows fed so far
        # The rows from `first` on; the first records fed set their shapes and types.
        self.x: np.ndarray = np.empty(0)
        self.y: np.ndarray = np.empty(0)
        self.seq: np.ndarray = np.empty(0, np.int64)
        self.batcher = Batcher(plan.batch_size, plan.remainder)

    def feed(self, x: np.ndarray, y: np.ndarray, seq: np.ndarray) -> None:
        """The next records in seq order: features (one row per record), labels and seq."""
        if not self.fed:
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
        """Every full batch certainly in the split once `total` records exist."""
        if not self.fed:
            return
        if self.plan.split == "hash":
            picked = hash_is_eval(self.seq, self.plan.seed, self.plan.eval_fraction)
            rows = np.flatnonzero(picked if self.split == "eval" else ~picked)
            examples: Batch | None = (self.x[rows], self.y[rows], self.seq[rows])
            self.next = self.fed  # every fed row is decided: _trim drops them all
        else:
            examples = self._cut_tail(total, final)
        self._trim()
        if examples is not None:
            yield from self.batcher.add(examples)

    def _cut_tail(self, total: int, final: bool) -> Batch | None:
        edge, reach = boundary(total, self.plan.eval_fraction), self.plan.reach
        if self.split == "train":
            stop = edge - reach
        else:
            # Eval starts at the boundary, known only at the end; rows before the boundary
            # as it stands now are train whatever comes, so they need not be kept.
            self.next = max(self.next, edge)
            if not final:
                return None
            stop = total - reach
        stop = min(stop, self.fed - reach)  # the label's record must have arrived
        starts = np.arange(self.next, max(stop, self.next), self.plan.stride)
        if not len(starts):
            return None
        self.next = int(starts[-1]) + self.plan.stride
        at = starts - self.first
        x = self.x[at[:, None] + np.arange(self.plan.length)] if self.plan.window \
            else self.x[at]
        return x, self.y[at + reach], self.seq[at + reach]

    def _trim(self) -> None:
        drop = min(self.next, self.fed) - self.first
        if drop > 0:
            self.x, self.y, self.seq = self.x[drop:], self.y[drop:], self.seq[drop:]
            self.first += drop

    def finish(self) -> Iterator[Batch]:
        """The last partial batch, if the plan keeps it; call once the stream has ended."""
        yield from self.batcher.finish()
