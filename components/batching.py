"""batching: exact-size batches in seq order, windows, a train/eval split by seq, seeded shuffle.

The stage writes a plan, not data: which records are features and label, where the split is,
the windows and the shuffle. `Batches` turns a plan and the stored records into the exact
stream of examples for any epoch, so training, evaluation and `seqline verify` all derive it
from one place. An example is one record (tabular) or one window of records (sequences); its
seq is the seq of the record its label comes from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from seqline.components.tfrecords import read_artifact, schema_from_text
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.audit import seq_digest
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import REQUIRED, ComponentSpec, StageContext, StageSpec

__all__ = ["SPEC", "Batches", "Plan", "load_batches", "make_plan", "plan_of"]

SPLITS = ("tail", "hash")
SHUFFLE_UNITS = ("examples", "records")


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


def make_plan(stage: StageSpec, source: str, columns: pa.Schema) -> Plan:
    """The stage's parameters checked against the columns it will batch.

    Raises:
        ConfigError: unknown label or feature, a non-numeric feature, a bad window or split.
    """
    p = SPEC.params_with_defaults(stage)
    names = [n for n in columns.names if n != SEQ]
    label = p["label"]
    if label not in names:
        raise ConfigError(f"{stage.where}: label column {label!r} is not in the records of "
                          f"{source!r}; columns: {', '.join(names)}.")
    window = _window(stage, p["window"])
    # A window's label lies after it (label_offset >= 1), so the label's own past is a feature.
    own_past = bool(window and window["label_offset"] >= 1)
    features = tuple(p["features"] or [n for n in names if (n != label or own_past)
                                        and _numeric(columns.field(n).type)])
    for name in features:
        if name not in names:
            raise ConfigError(f"{stage.where}: feature {name!r} is not in the records of "
                              f"{source!r}; columns: {', '.join(names)}.")
        if not _numeric(columns.field(name).type):
            raise ConfigError(
                f"{stage.where}: feature {name!r} is {columns.field(name).type}, not a number, "
                "and the model takes numbers. Encode it in a preprocess function (e.g. one-hot "
                "or an index) or leave it out of `features`.")
    if p["split"] not in SPLITS or (window and p["split"] == "hash"):
        raise ConfigError(f"{stage.where}: split must be 'tail' (default) or 'hash'; windows "
                          "need 'tail', since a window must not mix train and eval records.")
    if p["shuffle"] not in (None, *SHUFFLE_UNITS):
        raise ConfigError(f"{stage.where}: shuffle must be absent (no shuffle), 'examples' or "
                          "'records'.")
    return Plan(source, int(p["batch_size"]), label, features, p["remainder"],
                float(p["eval_fraction"]), p["split"], int(p["seed"]), window, p["shuffle"])


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _window(stage: StageSpec, raw: Any) -> dict[str, int] | None:
    if raw is None:
        return None
    window = {"length": raw.get("length"), "stride": raw.get("stride", 1),
              "label_offset": raw.get("label_offset", 1)} if isinstance(raw, dict) else {}
    if not window or not all(isinstance(v, int) for v in window.values()) \
            or window["length"] < 1 or window["stride"] < 1 or window["label_offset"] < 0:
        raise ConfigError(f"{stage.where}: window must be {{length: L, stride: S, "
                          "label_offset: O}} with L, S >= 1 and O >= 0 (O = 1: the label is the "
                          "record after the window).")
    return window


class Batches:
    """A plan applied to records held as arrays: the examples of each split, in order.

    The selected columns of the source are held in memory as float32 (1 M records x 10
    features is 40 MB); the records are in seq order, as the artifact stores them.
    """

    def __init__(self, plan: Plan, x: np.ndarray, y: np.ndarray, seq: np.ndarray,
                 columns: dict[str, np.ndarray]) -> None:
        self.plan, self.x, self.y, self.seq, self.columns = plan, x, y, seq, columns
        self.train_starts, self.eval_starts = _split_examples(plan, seq)
        self.train_rows = np.arange(_boundary(plan, len(seq))) if plan.split == "tail" \
            else self.train_starts

    def targets(self, starts: np.ndarray) -> np.ndarray:
        """Row of the label for each example starting at `starts`."""
        w = self.plan.window
        return starts if w is None else starts + w["length"] - 1 + w["label_offset"]

    def order(self, split: str, epoch: int) -> np.ndarray:
        """The example start rows of `split` in the order epoch `epoch` consumes them."""
        starts = self.train_starts if split == "train" else self.eval_starts
        if split != "train" or self.plan.shuffle != "examples":
            return starts
        return starts[_rng(self.plan.seed, epoch).permutation(len(starts))]

    def rows(self, epoch: int) -> np.ndarray:
        """Row permutation: identity unless the plan shuffles records (order destroyed)."""
        rows = np.arange(len(self.seq))
        if self.plan.shuffle == "records":
            train = self.train_rows
            rows[train] = train[_rng(self.plan.seed, epoch).permutation(len(train))]
        return rows

    def batches(self, split: str, epoch: int = 0) -> Iterator[tuple[np.ndarray, ...]]:
        """(x, y, seq) per batch: exact `batch_size`, the last one kept or dropped by plan."""
        starts = self.order(split, epoch)
        rows = self.rows(epoch) if split == "train" else np.arange(len(self.seq))
        size = self.plan.batch_size
        end = len(starts) - len(starts) % size if self.plan.remainder == "drop" else len(starts)
        for i in range(0, end, size):
            chunk = starts[i:i + size]
            targets = self.targets(chunk)
            if self.plan.window is None:
                x = self.x[rows[chunk]]
            else:
                x = self.x[rows[chunk[:, None] + np.arange(self.plan.window["length"])]]
            yield x, self.y[targets], self.seq[targets]

    def example_seq(self, split: str, epoch: int = 0) -> np.ndarray:
        """The seq of every example of `split` in consumption order (the audit's stream)."""
        starts = self.order(split, epoch)
        if self.plan.remainder == "drop":
            starts = starts[:len(starts) - len(starts) % self.plan.batch_size]
        return self.seq[self.targets(starts)]

    def steps(self, split: str) -> int:
        n = len(self.train_starts if split == "train" else self.eval_starts)
        size = self.plan.batch_size
        return n // size if self.plan.remainder == "drop" else -(-n // size)


def _rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch])  # a fresh, recorded stream per epoch


def _boundary(plan: Plan, n: int) -> int:
    return n - int(round(n * plan.eval_fraction))


def _split_examples(plan: Plan, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Example start rows of train and eval; windows never cross the boundary."""
    n = len(seq)
    if plan.split == "hash":
        # SplitMix64 of (seq + seed): a record's split depends only on its seq, not on n.
        z = (seq.astype(np.uint64) + np.uint64(plan.seed) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        is_eval = ((z ^ (z >> np.uint64(31))) % np.uint64(10_000)) < plan.eval_fraction * 10_000
        rows = np.arange(n)
        return rows[~is_eval], rows[is_eval]
    boundary = _boundary(plan, n)
    if plan.window is None:
        return np.arange(boundary), np.arange(boundary, n)
    w = plan.window
    reach = w["length"] - 1 + w["label_offset"]  # from a window's first row to its label's
    train = np.arange(0, max(boundary - reach, 0), w["stride"])
    evals = np.arange(boundary, max(n - reach, boundary), w["stride"])
    return train, evals


def plan_of(manifest: dict[str, Any]) -> Plan:
    """The plan a batching stage committed, from its manifest."""
    raw = dict(manifest["plan"])
    return Plan(**{**raw, "features": tuple(raw["features"])})


def load_batches(run: Path, plan: Plan) -> Batches:
    """Read the plan's source records (in manifest order) into arrays for batching."""
    stage_dir = Path(run) / plan.source
    batches = list(read_artifact(stage_dir, read_manifest(stage_dir)))
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        raise StageError(f"stage {plan.source!r} stored no records to batch.")
    x = np.column_stack([table.column(f).to_numpy(zero_copy_only=False).astype(np.float32)
                         for f in plan.features]) if plan.features else \
        np.zeros((table.num_rows, 0), np.float32)
    y = table.column(plan.label).to_numpy(zero_copy_only=False)
    columns = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}
    return Batches(plan, np.nan_to_num(x), y, columns[SEQ].astype(np.int64), columns)


def run_stage(stage: StageSpec, ctx: StageContext) -> dict[str, Any]:
    """Plan the batches over the input stage's stored records; the manifest's account of them.

    Example: 1,000 records, batch_size 32, eval_fraction 0.2, no window: train is seq 0-799
    in 25 batches (the last of 32), eval seq 800-999 in 7 batches (the last of 8).

    Raises:
        ConfigError: a bad parameter for these records (see make_plan), or a batch size
            larger than the train split.
    """
    manifest = read_manifest(ctx.run / ctx.source)
    if not manifest.get("schema"):
        raise ConfigError(f"{stage.where}: stage {ctx.source!r} stores no records to batch; "
                          "read a tfrecord_write or preprocess stage.")
    plan = make_plan(stage, ctx.source, schema_from_text(manifest["schema"]))
    batches = load_batches(ctx.run, plan)
    train = len(batches.train_starts)
    if plan.batch_size > train:
        raise ConfigError(f"{stage.where}: batch_size {plan.batch_size} is larger than the "
                          f"train split ({train} examples of {len(batches.seq)} records). Use a "
                          "smaller batch_size, or more data.")
    return {
        "plan": asdict(plan),
        "records_in": len(batches.seq),
        "train": {"examples": train, "batches": batches.steps("train"),
                  "seq_digest": seq_digest(batches.example_seq("train"))},
        "eval": {"examples": len(batches.eval_starts), "batches": batches.steps("eval"),
                 "seq_digest": seq_digest(batches.example_seq("eval"))},
    }


def _validate(stage: StageSpec, base_dir: Path) -> None:
    p = SPEC.params_with_defaults(stage)
    if not isinstance(p["batch_size"], int) or p["batch_size"] < 1:
        raise ConfigError(f"{stage.where}: `batch_size` must be a positive integer.")
    if not isinstance(p["eval_fraction"], int | float) or not 0 <= p["eval_fraction"] < 1:
        raise ConfigError(f"{stage.where}: `eval_fraction` must be in [0, 1).")
    if p["remainder"] not in ("keep", "drop"):
        raise ConfigError(f"{stage.where}: `remainder` must be 'keep' or 'drop'.")
    _window(stage, p["window"])


PARAMETERS: dict[str, Any] = {
    "batch_size": REQUIRED,
    "label": REQUIRED,
    "features": None,  # default: every numeric column but the label and __seq__
    "remainder": "keep",  # the last partial batch: keep (like tf.data) or drop
    "eval_fraction": 0.2,
    "split": "tail",  # tail: eval is the last records by seq; hash: for i.i.d. data
    "seed": 0,  # for the hash split and the shuffle
    "window": None,  # {length, stride: 1, label_offset: 1} for sequence models
    "shuffle": None,  # off; "examples" (seeded per epoch) or "records" (breaks order)
}

SPEC = ComponentSpec("batching", "driver", PARAMETERS, _validate, run_stage,
                     doc="Stored records -> a plan of exact batches in seq order.")
