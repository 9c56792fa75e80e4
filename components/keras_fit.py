"""train's Keras side: the examples as tf.data datasets, the audit callback, and the fit.

Imported only inside `train.run_stage`: TensorFlow takes seconds to import, and nothing in
components/ imports an engine at module level.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from seqline.components.cutter import Batch
from seqline.components.examples import TrainingInput
from seqline.components.models import ModelSpec
from seqline.components.train import EpochAudit, TrainParams
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


def saving(out: Path, backup: Path) -> list[keras.callbacks.Callback]:
    """Callbacks that keep the training: a backup to resume from, checkpoints, TensorBoard."""
    return [keras.callbacks.BackupAndRestore(str(backup)),
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
    """

    def __init__(self, stage: StageSpec[TrainParams], data: TrainingInput, spec: ModelSpec,
                 audit: EpochAudit, classify: bool) -> None:
        self.stage, self.data, self.spec, self.audit = stage, data, spec, audit
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
        for batch in self.data.batches(split, epoch):
            self._check_label(batch)
            if audit:
                audit.record(batch[2], time.perf_counter() - last)
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
    train = feeder.dataset("train")
    eval_split = feeder.dataset("eval") if feeder.data.plan.eval_fraction > 0 else None
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
