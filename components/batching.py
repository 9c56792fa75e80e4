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
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field, ValidationInfo, field_validator

from seqline.components.cutter import Cutter, boundary, hash_is_eval, reach
from seqline.components.tfrecords import read_artifact, read_fed_shard, schema_from_text
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.audit import SeqDigest, seq_digest
from seqline.pipeline.blocks import SEQ, Block, seq_of
from seqline.pipeline.errors import ConfigError, SeqlineError, StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.params import PARAMS_CONFIG, StageParams
from seqline.pipeline.specs import ComponentSpec, StageContext, StageResult, StageSpec

__all__ = ["SPEC", "Batches", "BatchingParams", "Plan", "Window", "load_batches", "make_plan",
           "plan_of", "source_feed", "stream_batches", "verify_plan"]


class Window(BaseModel):
    """A window of consecutive records for sequence models; its label lies after it."""

    model_config = PARAMS_CONFIG

    length: int = Field(ge=1, description="Records in a window.")
    stride: int = Field(1, ge=1, description="Records between the starts of two windows.")
    label_offset: int = Field(1, ge=0, description=(
        "Records from the window's last record to its label's (1: the record after it)."))


class BatchingParams(StageParams):
    """batching's parameters: batch size, label and features, the split, windows, shuffle."""

    batch_size: int = Field(ge=1, description="Examples per batch, exact across shards.")
    label: str = Field(description="The column the model predicts.")
    features: list[str] | None = Field(None, description=(
        "Numeric columns the model reads; default: every numeric column but the label."))
    remainder: Literal["keep", "drop"] = Field("keep", description=(
        "The last partial batch: keep (like tf.data) or drop."))
    eval_fraction: float = Field(0.2, ge=0, lt=1, description=(
        "The share of records held out for evaluation."))
    split: Literal["tail", "hash"] = Field("tail", description=(
        "tail: eval is the last records by seq; hash: a hash of seq decides (i.i.d. data)."))
    seed: int = Field(0, description="Seeds the hash split and the shuffle.")
    window: Window | None = Field(None, description="Windows of records for sequence models.")
    shuffle: Literal["examples", "records"] | None = Field(None, description=(
        "Off by default; examples: whole examples reshuffled each epoch, seeded; records: "
        "records shuffled before windows are cut (destroys order, to measure its worth)."))

    @field_validator("window")
    @classmethod
    def _windows_need_tail(cls, window: Window | None, info: ValidationInfo) -> Window | None:
        if window is not None and info.data.get("split") == "hash":
            raise ValueError("no window with split 'hash' (a window must not mix train and "
                             "eval records): use split 'tail'")
        return window


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


def make_plan(stage: StageSpec[BatchingParams], source: str, columns: pa.Schema) -> Plan:
    """The stage's parameters checked against the columns it will batch.

    Raises:
        ConfigError: unknown label or feature, or a non-numeric feature.
    """
    p = stage.params
    names = [n for n in columns.names if n != SEQ]
    if p.label not in names:
        raise ConfigError(f"{stage.where}: label column {p.label!r} is not in the records of "
                          f"{source!r}; columns: {', '.join(names)}.")
    # A window's label lies after it (label_offset >= 1), so the label's own past is a feature.
    own_past = bool(p.window and p.window.label_offset >= 1)
    features = tuple(p.features or [n for n in names if (n != p.label or own_past)
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
    window = p.window.model_dump() if p.window else None
    return Plan(source, p.batch_size, p.label, features, p.remainder, p.eval_fraction, p.split,
                p.seed, window, p.shuffle)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


class Batches:
    """A plan applied to records held as arrays: the examples of each split, in order.

    The selected columns of the source are held in memory as float32 (1 M records x 10
    features is 40 MB); the records are in seq order, as the artifact stores them.
    """

    def __init__(self, plan: Plan, x: np.ndarray, y: np.ndarray, seq: np.ndarray,
                 columns: dict[str, np.ndarray]) -> None:
        self.plan, self.x, self.y, self.seq, self.columns = plan, x, y, seq, columns
        self.train_starts, self.eval_starts = _split_examples(plan, seq)
        self.train_rows = np.arange(boundary(len(seq), plan.eval_fraction)) \
            if plan.split == "tail" else self.train_starts

    def targets(self, starts: np.ndarray) -> np.ndarray:
        """Row of the label for each example starting at `starts`."""
        return starts + reach(self.plan)

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


def _split_examples(plan: Plan, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Example start rows of train and eval; windows never cross the boundary."""
    n = len(seq)
    if plan.split == "hash":
        is_eval = hash_is_eval(seq, plan.seed, plan.eval_fraction)
        rows = np.arange(n)
        return rows[~is_eval], rows[is_eval]
    edge, span = boundary(n, plan.eval_fraction), reach(plan)
    stride = plan.window["stride"] if plan.window else 1
    return (np.arange(0, max(edge - span, 0), stride),
            np.arange(edge, max(n - span, edge), stride))


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
    columns = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}
    x, y, seq = _arrays(plan, columns)
    return Batches(plan, x, y, seq, columns)


def _arrays(plan: Plan, columns: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features as float32 (NaN as 0), the label as stored, and seq, from record columns."""
    n = len(columns[SEQ])
    x = np.column_stack([np.asarray(columns[f]).astype(np.float32) for f in plan.features]) \
        if plan.features else np.zeros((n, 0), np.float32)
    return np.nan_to_num(x), np.asarray(columns[plan.label]), \
        np.asarray(columns[SEQ]).astype(np.int64)


def source_feed(run: Path, source: str) -> ShardFeed:
    """The committed records of stage `source` as a complete feed."""
    stage_dir, manifest = _stored(run, source)
    return ShardFeed.stored(stage_dir, manifest, schema_from_text(manifest["schema"]))


def stream_batches(plan: Plan, feed: ShardFeed, split: str, take: bool = True
                   ) -> Iterator[tuple[np.ndarray, ...]]:
    """(x, y, seq) batches of an unshuffled split, read from the source's stored shards.

    The shards are followed as they are written: a shard is read once it exists and holds
    records the split can use now, so the trainer's first epoch runs while the stages before
    it are still writing, and memory holds a shard and the rows not yet decided, never the
    whole artifact. Shards the feed still holds in memory are taken from there (`take`)
    instead of decoded. The batches are the same as `Batches.batches(split)` (tested).
    """
    cutter = Cutter(plan, split)
    shards: list[dict[str, Any]] = []
    done, read, total = False, 0, 0
    while True:
        while read < len(shards) and cutter.fed < cutter.horizon(total, done):
            records = read_fed_shard(feed, shards[read], take)
            read += 1
            # only the columns batches use: a string column would become a Python object
            # per record
            cutter.feed(*_arrays(plan, {n: records.column(n).to_numpy(zero_copy_only=False)
                                        for n in {*plan.features, plan.label, SEQ}}))
            yield from cutter.cut(total, done)
        if done and (read == len(shards) or cutter.fed >= cutter.horizon(total, done)):
            yield from cutter.cut(total, done)
            yield from cutter.finish()
            return
        shards, done = feed.wait(len(shards))  # the rows held need more records to decide
        total = sum(s["records"] for s in shards)


def run_stage(stage: StageSpec[BatchingParams], ctx: StageContext) -> StageResult:
    """Plan the batches over the input stage's records; the manifest's account of them.

    In an assembly line (`ctx.blocks`), the records stream past: the plan is announced as
    soon as the first block shows the columns, so training can start, and the split digests
    are cut as the records go by. Otherwise the input's stored records are read.

    Example: 1,000 records, batch_size 32, eval_fraction 0.2, no window: train is seq 0-799
    in 25 batches (the last of 32), eval seq 800-999 in 7 batches (the last of 8).

    Raises:
        ConfigError: a bad parameter for these records (see make_plan), or a batch size
            larger than the train split.
    """
    blocks = ctx.blocks if ctx.blocks is not None else _stored_blocks(ctx.run, ctx.source)
    plan, total, cutters = None, 0, {}
    splits = {"train": _Split(), "eval": _Split()}
    for block in blocks:
        if plan is None:
            plan = make_plan(stage, ctx.source, block.batch.schema)
            if ctx.announce:
                ctx.announce(plan)
            # The digests need only seq: the cutters get no feature columns, and keep the
            # last partial batch so that it is counted (and digested only if the plan keeps it).
            counting = Plan(**{**asdict(plan), "features": (), "remainder": "keep"})
            cutters = {split: Cutter(counting, split) for split in splits}
        seq = seq_of(block.batch)
        total += len(seq)
        for split, cutter in cutters.items():
            cutter.feed(np.zeros((len(seq), 0), np.float32), seq, seq)
            for _, _, cut in cutter.cut(total, False):
                splits[split].add(cut)
    if plan is None:
        raise StageError(f"stage {ctx.source!r} stored no records to batch.", stage=stage.name)
    for split, cutter in cutters.items():
        for _, _, cut in cutter.cut(total, True):
            splits[split].add(cut)
        for _, _, cut in cutter.finish():
            splits[split].add(cut, digest=plan.remainder == "keep")
    train = splits["train"].examples
    if plan.batch_size > train:
        raise ConfigError(f"{stage.where}: batch_size {plan.batch_size} is larger than the "
                          f"train split ({train} examples of {total} records). Use a "
                          "smaller batch_size, or more data.")
    if plan.shuffle == "examples":  # the plan's digest is of epoch 0's order, see Batches
        splits["train"].digest = SeqDigest()
        splits["train"].digest.update(load_batches(ctx.run, plan).example_seq("train"))
    return StageResult({"plan": asdict(plan), **{
        name: split.account(plan.batch_size, plan.remainder) for name, split in splits.items()}},
        records_in=total)


class _Split:
    """A split's example count and the digest of the examples' seq in consumption order."""

    def __init__(self) -> None:
        self.examples, self.digest = 0, SeqDigest()

    def add(self, seq: np.ndarray, digest: bool = True) -> None:
        self.examples += len(seq)
        if digest:
            self.digest.update(seq)

    def account(self, batch_size: int, remainder: str) -> dict[str, Any]:
        batches = self.examples // batch_size if remainder == "drop" \
            else -(-self.examples // batch_size)
        return {"examples": self.examples, "batches": batches,
                "seq_digest": self.digest.hexdigest()}


def _stored(run: Path, source: str) -> tuple[Path, dict[str, Any]]:
    stage_dir = Path(run) / source
    manifest = read_manifest(stage_dir)
    if not manifest.get("schema"):
        raise ConfigError(f"stage {source!r} stores no records to batch; read a "
                          "tfrecord_write or preprocess stage.")
    return stage_dir, manifest


def _stored_blocks(run: Path, source: str) -> Iterator[Block]:
    stage_dir, manifest = _stored(run, source)
    for index, batch in enumerate(read_artifact(stage_dir, manifest)):
        yield Block(index, batch)




def verify_plan(run: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    """`seqline verify`: each split's digest, recomputed from the plan and the stored records."""
    batches = _rebuild(run, manifest, problems)
    for split in ("train", "eval"):
        if batches and seq_digest(batches.example_seq(split)) != manifest[split]["seq_digest"]:
            problems.append(f"audit: the {split} split recomputed from "
                            f"{manifest['plan']['source']!r} is not the one planned")


def _rebuild(run: Path, manifest: dict[str, Any], problems: list[str]) -> Batches | None:
    try:
        return load_batches(run, plan_of(manifest))
    except SeqlineError as exc:
        problems.append(f"audit: cannot rebuild the batches: {exc}")
        return None


SPEC = ComponentSpec("batching", BatchingParams, run_stage, reads="stream", writes="plan",
                     live=True, verify=verify_plan,
                     doc="Stored records -> a plan of exact batches in seq order.")
