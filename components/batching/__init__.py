"""batching: exact-size batches in seq order, windows, a train/eval split by seq, seeded shuffle.

The stage writes a plan (`batching/plan.py`), not data: which records are features and
label, where the split is, the windows and the shuffle. Training, evaluation and `seqline
verify` derive the examples of any epoch from the plan and the stored records, through the
one cutter (`batching/cutter.py`, read by `batching/examples.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field, ValidationInfo, field_validator

from seqline.components.batching.cutter import Batch, Cutter
from seqline.components.batching.examples import load_batches, stored_source
from seqline.components.batching.plan import Plan, plan_of
from seqline.pipeline.audit import SeqDigest, seq_digest
from seqline.pipeline.blocks import SEQ, Block, seq_of
from seqline.pipeline.errors import ConfigError, SeqlineError, StageError
from seqline.pipeline.params import PARAMS_CONFIG, StageParams, did_you_mean
from seqline.pipeline.specs import DriverSpec, Sample, StageContext, StageResult, StageSpec
from seqline.pipeline.storage import Folder
from seqline.pipeline.tfrecord import read_artifact

__all__ = ["SPEC", "BatchingParams", "Window", "make_plan", "run_stage", "verify_plan"]


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


def make_plan(stage: StageSpec[BatchingParams], source: str, columns: pa.Schema) -> Plan:
    """The stage's parameters checked against the columns it will batch.

    Raises:
        ConfigError: unknown label or feature, or a non-numeric feature.
    """
    p = stage.params
    names = [n for n in columns.names if n != SEQ]
    if p.label not in names:
        raise ConfigError(f"{stage.where}: label column {p.label!r} is not in the records of "
                          f"{source!r};{did_you_mean(p.label, names)} columns: "
                          f"{', '.join(names)}.")
    # A window's label lies after it (label_offset >= 1), so the label's own past is a feature.
    own_past = bool(p.window and p.window.label_offset >= 1)
    features = tuple(p.features or [n for n in names if (n != p.label or own_past)
                                    and _numeric(columns.field(n).type)])
    for name in features:
        if name not in names:
            raise ConfigError(f"{stage.where}: feature {name!r} is not in the records of "
                              f"{source!r};{did_you_mean(name, names)} columns: "
                              f"{', '.join(names)}.")
        if not _numeric(columns.field(name).type):
            raise ConfigError(
                f"{stage.where}: feature {name!r} is {columns.field(name).type}, not a number, "
                "and the model takes numbers. Encode it in a preprocess function (e.g. one-hot "
                "or an index) or leave it out of `features`.")
    window = p.window.model_dump() if p.window else None
    return Plan(source, p.batch_size, p.label, features, p.remainder, p.eval_fraction, p.split,
                p.seed, window, p.shuffle)


def _preview(stage: StageSpec[BatchingParams], base_dir: Any, sample: Sample | None
             ) -> pa.RecordBatch | None:
    """Before anything runs: the label and features checked against a sample of the records.

    A column of nothing but nulls in the sample has no type yet: it is taken for a number
    here, and judged by the run's first block as before.
    """
    if sample is None:
        return None
    schema = pa.schema([f.with_type(pa.float64()) if pa.types.is_null(f.type) else f
                        for f in sample.records.schema])
    make_plan(stage, sample.stage, schema)
    return sample.records


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


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
        StageError: the input stored no records.
    """
    plan, splits, total = _cut_splits(stage, ctx)
    train = splits["train"].examples
    if plan.batch_size > train:
        raise ConfigError(f"{stage.where}: batch_size {plan.batch_size} is larger than the "
                          f"train split ({train} examples of {total} records). Use a "
                          "smaller batch_size, or more data.")
    if plan.shuffle == "examples":  # the plan's digest is of epoch 0's order, see Batches
        splits["train"].digest = SeqDigest()
        splits["train"].digest.update(
            load_batches(ctx.run, plan, stage.name).example_seq("train"))
    return StageResult({"plan": asdict(plan), **{
        name: split.account(plan.batch_size, plan.remainder) for name, split in splits.items()}},
        records_in=total)


def _cut_splits(stage: StageSpec[BatchingParams], ctx: StageContext
                ) -> tuple[Plan, dict[str, _Split], int]:
    """The plan, each split's account once every record has gone by, and the record count."""
    blocks = ctx.blocks if ctx.blocks is not None else _stored_blocks(ctx.run, ctx.source)
    plan: Plan | None = None
    splits: dict[str, _Split] = {}
    total = 0
    for block in blocks:
        if plan is None:
            plan = make_plan(stage, ctx.source, block.batch.schema)
            if ctx.announce:
                ctx.announce(plan)
            splits = {name: _Split(plan, name) for name in ("train", "eval")}
        seq = seq_of(block.batch)
        total += len(seq)
        for split in splits.values():
            split.feed(seq, total)
    if plan is None:
        raise StageError(f"stage {ctx.source!r} stored no records to batch.", stage=stage.name)
    for split in splits.values():
        split.end(total)
    return plan, splits, total


class _Split:
    """A split's example count and the digest of the examples' seq in consumption order."""

    def __init__(self, plan: Plan, name: str) -> None:
        # The digests need only seq: the cutter gets no feature columns, and keeps the last
        # partial batch so that it is counted (and digested only if the plan keeps it).
        self.cutter = Cutter(replace(plan, features=(), remainder="keep"), name)
        self.keep = plan.remainder == "keep"
        self.examples, self.digest = 0, SeqDigest()

    def feed(self, seq: np.ndarray, total: int) -> None:
        """The next records' seq; `total`: the records so far."""
        self.cutter.feed(np.zeros((len(seq), 0), np.float32), seq, seq)
        self._add(self.cutter.cut(total, False))

    def end(self, total: int) -> None:
        """No more records: the rest of the split, the last partial batch included."""
        self._add(self.cutter.cut(total, True))
        self._add(self.cutter.finish(), digest=self.keep)

    def _add(self, batches: Iterator[Batch], digest: bool = True) -> None:
        for _, _, seq in batches:
            self.examples += len(seq)
            if digest:
                self.digest.update(seq)

    def account(self, batch_size: int, remainder: str) -> dict[str, Any]:
        batches = self.examples // batch_size if remainder == "drop" \
            else -(-self.examples // batch_size)
        return {"examples": self.examples, "batches": batches,
                "seq_digest": self.digest.hexdigest()}


def _stored_blocks(run: Folder, source: str) -> Iterator[Block]:
    stage_dir, manifest = stored_source(run, source)
    for index, batch in enumerate(read_artifact(stage_dir, manifest)):
        yield Block(index, batch)


def verify_plan(run: Folder, manifest: dict[str, Any], problems: list[str]) -> None:
    """`seqline verify`: each split's digest, recomputed from the plan and the stored records."""
    try:
        batches = load_batches(run, plan_of(manifest), manifest.get("stage", "batching"))
    except SeqlineError as exc:
        problems.append(f"audit: cannot rebuild the batches: {exc}")
        return
    for split in ("train", "eval"):
        if seq_digest(batches.example_seq(split)) != manifest[split]["seq_digest"]:
            problems.append(f"audit: the {split} split recomputed from "
                            f"{manifest['plan']['source']!r} is not the one planned")


SPEC = DriverSpec(name="batching", params=BatchingParams, run=run_stage, reads="stream",
                  writes="plan", live=True, verify=verify_plan, preview=_preview,
                  doc="Stored records -> a plan of exact batches in seq order.")
