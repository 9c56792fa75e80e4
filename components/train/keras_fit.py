"""train's Keras side: the examples as tf.data datasets, the audit callback, and the fit.

Imported only inside `train.run_stage`: TensorFlow takes seconds to import, and nothing in
components/ imports an engine at module level.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import tree

from seqline.components.batching.cutter import Batch
from seqline.components.batching.examples import TrainingInput
from seqline.components.train import EpochAudit, TrainParams
from seqline.components.train.models import ModelSpec
from seqline.pipeline.errors import SeqlineError, StageError
from seqline.pipeline.specs import StageSpec

__all__ = ["CHUNK", "AuditCallback", "Feeder", "fit", "saving", "seed"]

# Batches handed to TensorFlow at once: one Python hand-over per 16 batches, not per batch
# (see Feeder._generate).
CHUNK = 16


def seed(value: int) -> None:
    """Seeds Keras, NumPy and Python, and makes TensorFlow's ops deterministic."""
    keras.utils.set_random_seed(value)
    tf.config.experimental.enable_op_determinism()


def saving(out: Path, backup: Path | None) -> list[keras.callbacks.Callback]:
    """Callbacks that keep the training: a backup to resume from, checkpoints, TensorBoard."""
    return [*([keras.callbacks.BackupAndRestore(str(backup))] if backup else []),
            keras.callbacks.ModelCheckpoint(
                str(out / "checkpoints" / "epoch-{epoch:03d}.weights.h5"),
                save_weights_only=True),
            keras.callbacks.TensorBoard(str(out / "tensorboard"))]


class AuditCallback(keras.callbacks.Callback):
    """Marks epoch and step boundaries for the audit (see `train.EpochAudit`)."""

    def __init__(self, audit: EpochAudit) -> None:
        super().__init__()
        self.audit = audit

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self.audit.begin(epoch)

    def on_train_batch_begin(self, batch: int, logs: dict[str, float] | None = None) -> None:
        self.audit.step_begins()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self.audit.end(epoch, logs or {})


class Feeder:
    """What the model is fed: a split's batches as a tf.data.Dataset, audited and checked.

    An error raised while producing batches (a label out of range, a stage before this one
    failing) reaches Keras wrapped in a TensorFlow error; it is kept in `error`, so that
    `fit` re-raises the original, with its stage and seq.

    On one of several workers (`strategy` a MultiWorkerMirroredStrategy, `audit.worker` its
    rank) it feeds only the worker's contiguous slice of every global batch, the slice
    MirroredStrategy would give replica `rank` in one process, as this worker's dataset
    (`distribute_datasets_from_function`: no auto-sharding, no rebatching).
    """

    def __init__(self, stage: StageSpec[TrainParams], data: TrainingInput, spec: ModelSpec,
                 audit: EpochAudit, classify: bool, strategy: tf.distribute.Strategy | None = None
                 ) -> None:
        self.stage, self.data, self.spec, self.audit = stage, data, spec, audit
        self.strategy = strategy
        self.error: SeqlineError | None = None
        # Class indices for a classifier; a regression's label is a number, even an integer.
        self.classify = classify
        self.y_type = tf.int64 if classify else tf.float32

    def dataset(self, split: str) -> tf.data.Dataset:
        """The split as (x, y) batches in plan order; the train split is audited.

        Its length is left unknown: in a line the first epoch's is not known until the stream
        ends, and Keras runs each epoch until the batches run out.
        """
        x_shape = (None, None, *self.spec.input_shape)
        signature = (tf.TensorSpec(x_shape, tf.float32), tf.TensorSpec((None, None), self.y_type))
        return tf.data.Dataset.from_generator(lambda: self._generate(split),
                                              output_signature=signature).unbatch().prefetch(2)

    def distributed(self, split: str) -> tf.data.Dataset | tf.distribute.DistributedDataset:
        """The split as fed to `fit`: on several workers, each worker's own slices."""
        if self.strategy is None:
            return self.dataset(split)
        return self.strategy.distribute_datasets_from_function(lambda _: self.dataset(split))

    def _generate(self, split: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        try:
            yield from self._chunks(split)
        except SeqlineError as exc:
            self.error = exc
            raise

    def _chunks(self, split: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # Batches go to TensorFlow several at a time, stacked, and tf.data's unbatch() splits
        # them again in C++: one Python hand-over per chunk instead of per batch, which on a
        # busy CPU is what made training steps wait for input (13 % of the demo's step time
        # before, under 1 % after).
        audit = self.audit if split == "train" else None
        epoch = audit.epoch if audit else 0
        if audit:
            audit.pulled = time.perf_counter()
        chunk: list[Batch] = []
        last = time.perf_counter()
        worker = self.audit.worker
        for batch in self.data.batches(split, epoch):
            self._check_label(batch)
            if audit:
                audit.record(batch[2], time.perf_counter() - last)
            if worker is not None:  # this worker's contiguous slice, as MirroredStrategy cuts
                x, y, seq = batch
                batch = tuple(np.array_split(a, self.audit.replicas)[worker]  # type: ignore[assignment]
                              for a in (x, y, seq))
            if chunk and len(batch[2]) != len(chunk[0][2]):  # the last, partial batch
                yield self._stack(chunk)
                chunk = []
            chunk.append(batch)
            if len(chunk) == CHUNK:
                yield self._stack(chunk)
                chunk = []
            last = time.perf_counter()
        if chunk:
            yield self._stack(chunk)

    def _stack(self, chunk: list[Batch]) -> tuple[np.ndarray, np.ndarray]:
        return (np.stack([x for x, _, _ in chunk]),
                np.stack([y for _, y, _ in chunk]).astype(self.y_type.as_numpy_dtype))

    def _check_label(self, batch: Batch) -> None:
        _, y, seq = batch
        classes = self.spec.num_classes
        if self.classify and classes is not None and len(y) and int(np.max(y)) >= classes:
            bad = int(np.argmax(y >= classes))
            raise StageError(
                f"{self.stage.where}: the label {self.spec.label!r} is {int(y[bad])} at seq "
                f"{int(seq[bad])}, but the model has {classes} classes (from the first train "
                "records). Set `num_classes` on the train stage.",
                stage=self.stage.name, seq=int(seq[bad]))


def fit(model: keras.Model, feeder: Feeder, epochs: int,
        callbacks: list[keras.callbacks.Callback]) -> keras.callbacks.History:
    """Trains `model` on the train split, validating on eval (if any) after each epoch.

    Raises:
        SeqlineError: producing the batches failed (the original error, see `Feeder`).
    """
    if feeder.strategy is not None:
        _build_state(model, feeder)
    train = feeder.distributed("train")
    eval_split = feeder.distributed("eval") if feeder.data.plan.eval_fraction > 0 else None
    with warnings.catch_warnings():
        # The first epoch's length is unknown on purpose (the records are still arriving);
        # Keras warns that its input "ran out of data" when that epoch ends.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        try:
            return model.fit(train, epochs=epochs, verbose=0, shuffle=False,
                             validation_data=eval_split, callbacks=callbacks)
        except tf.errors.OpError:
            if feeder.error is None:
                raise
            raise feeder.error from None  # TensorFlow's wrapper says less than the original


def _build_state(model: keras.Model, feeder: Feeder) -> None:
    """Creates the optimizer's and metrics' variables before `fit`, from shapes alone.

    Keras's `fit` builds them by peeking at one batch and averaging it over the replicas with
    `strategy.reduce` on the (x, y) tuple; under MultiWorkerMirroredStrategy with several
    workers that reduce fails ("Attempt to convert a value (PerReplica...) to a Tensor"; Keras
    3.x, TF 2.21). So the state is built here from shapes, as Keras's `_symbolic_build` does,
    and the peek is skipped for this model (there is no public call for either).
    """
    x = np.zeros((1, *feeder.spec.input_shape), np.float32)
    y = np.zeros((1,), feeder.y_type.as_numpy_dtype)
    with feeder.strategy.scope():  # type: ignore[union-attr]
        model._symbolic_build(data_batch=(x, y))
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None
    _patch_scalar_reduce()


def _patch_scalar_reduce() -> None:
    """Makes Keras average a step's scalar outputs (loss, metrics) over several workers.

    Keras reduces them with `strategy.reduce("MEAN", v, axis=0)`, which TensorFlow refuses for
    a scalar ("Invalid reduction dimension 0 for input with 0 dimensions"). Patched in the
    worker's own process only (Ray Train runs each worker alone in its process).
    """
    from keras.src.backend.tensorflow import trainer

    if getattr(trainer.reduce_per_replica, "seqline", False):
        return
    original = trainer.reduce_per_replica

    def reduce_per_replica(values: Any, strategy: Any, reduction: str) -> Any:
        if reduction in ("auto", "mean") and trainer._collective_all_reduce_multi_worker(
                strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return original(values, strategy, reduction)

    reduce_per_replica.seqline = True  # type: ignore[attr-defined]
    trainer.reduce_per_replica = reduce_per_replica
