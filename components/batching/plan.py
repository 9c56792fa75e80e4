"""The batching plan: everything that decides which example goes in which batch, every epoch.

An example is one record (tabular) or one window of records (sequences); its seq is the seq
of the record its label comes from. The plan's `window` is a dict `{length, stride,
label_offset}` (as the manifest stores it): `length` records make the example, the next one
starts `stride` records later, and its label is `label_offset` records after its last record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = ["Plan", "boundary", "epoch_rng", "hash_is_eval", "per_record", "plan_of"]


@dataclass(frozen=True)
class Plan:
    """Everything that decides which example goes in which batch, for every epoch."""

    source: str  # the stage whose stored records are batched
    batch_size: int
    label: str
    features: tuple[str, ...]
    remainder: str  # "keep" or "drop" the last partial batch
    eval_fraction: float
    split: str  # "tail": the last records by seq are eval; "hash": a hash of seq decides
    seed: int
    window: dict[str, int] | None  # {length, stride, label_offset}
    shuffle: str | None  # None, "examples" or "records" (the latter breaks order, on purpose)

    @property
    def length(self) -> int:
        """Records in one example: the window's length, 1 without a window."""
        return self.window["length"] if self.window else 1

    @property
    def stride(self) -> int:
        """Records from one example's first record to the next example's."""
        return self.window["stride"] if self.window else 1

    @property
    def reach(self) -> int:
        """Records from an example's first record to its label's (0 without a window)."""
        w = self.window
        return 0 if w is None else w["length"] - 1 + w["label_offset"]


def plan_of(manifest: dict[str, Any]) -> Plan:
    """The plan a batching stage committed, from its manifest."""
    raw = dict(manifest["plan"])
    return Plan(**{**raw, "features": tuple(raw["features"])})


def per_record(plan: Plan, batch_size: int) -> Plan:
    """The plan with every record of a split an example: the split's records, in order.

    Training's feature statistics come from the first train records, and a record shuffle
    permutes the train records; both are this plan's train split.
    """
    return replace(plan, window=None, batch_size=batch_size, remainder="keep", shuffle=None)


def boundary(n: int, eval_fraction: float) -> int:
    """Tail split: records [0, boundary) are train, the rest eval. Never decreases with n.

    Example: `boundary(1000, 0.2)` is 800; `boundary(1001, 0.2)` is 801.
    """
    return n - int(round(n * eval_fraction))


def hash_is_eval(seq: np.ndarray, seed: int, eval_fraction: float) -> np.ndarray:
    """Hash split: SplitMix64 of (seq, seed), so a record's split depends only on its seq."""
    with np.errstate(over="ignore"):  # the hash wraps around 2**64 on purpose
        z = seq.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return ((z ^ (z >> np.uint64(31))) % np.uint64(10_000)) < eval_fraction * 10_000


def epoch_rng(plan: Plan, epoch: int) -> np.random.Generator:
    """The shuffle's random stream for `epoch`: fresh, and recorded by (seed, epoch) alone."""
    return np.random.default_rng([plan.seed, epoch])
