"""train: Keras 3 on TensorFlow over a batching plan: checkpoints, resume and an order audit."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, Field

from seqline.components.batching import Plan, load_batches, plan_of, source_feed, stream_batches
from seqline.components.models import PRESETS, ModelSpec
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.audit import SeqDigest, seq_digest
from seqline.pipeline.errors import ConfigError, SeqlineError, StageError
from seqline.pipeline.functions import load_function
from seqline.pipeline.params import StageParams, did_you_mean, one_of
from seqline.pipeline.specs import ComponentSpec, StageContext, StageResult, StageSpec

__all__ = ["SPEC", "EpochAudit", "TrainParams", "run_stage", "setup_devices"]


def _model_ref(ref: str) -> str:
    if ref not in PRESETS and ":" not in ref:
        raise one_of(ref, list(PRESETS), f"a preset ({', '.join(PRESETS)}) or 'module:function'")
    return ref


class TrainParams(StageParams):
    """train's parameters: the model, how long and how fast it learns, and on what devices."""

    model: Annotated[str, AfterValidator(_model_ref)] = Field(description=(
        "A preset (tabular_regression, tabular_classification, sequence_forecasting) or "
        "'module:function' returning a compiled Keras model."))
    label: str | None = Field(None, description="Default: the batching stage's label.")
    epochs: int = Field(10, ge=1, description="Passes over the train split.")
    learning_rate: float = Field(1e-3, gt=0, description="The presets' Adam learning rate.")
    seed: int = Field(0, description="Weights initialization and any randomness in training.")
    cpu_replicas: int | None = Field(None, ge=1, description=(
        "N > 1: mirror over N logical CPU devices when there is no GPU."))
    stats_records: int = Field(100_000, ge=1, description=(
        "Normalization statistics (and the class count) come from the first N train records, "
        "so training can start before the rest has arrived."))
    num_classes: int | None = Field(None, ge=2, description=(
        "Classification: the number of classes; default 1 + the largest label seen first."))


class EpochAudit:
    """Per epoch: a digest of the seq the model was fed, in order, and each batch's seq range.

    The batches are recorded as the input pipeline hands them over; tf.data keeps their order
    and an epoch consumes every batch, so an epoch that ends has been fed exactly this.

    It also measures how long the training steps waited for input: step k waited if its batch
    was handed over after the step asked for it (`step_begins`), by the difference.
    """

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.epoch = 0
        self.epochs: list[dict[str, Any]] = []
        self._reset()

    def _reset(self) -> None:
        self.digest, self.batches, self.input_seconds = SeqDigest(), [], 0.0
        self.handed, self.asked, self.pulled = [], [], None

    def begin(self, epoch: int) -> None:
        self.epoch = epoch
        self._reset()
        self.started, self.wall_start = time.perf_counter(), time.time()

    def record(self, seq: np.ndarray, seconds: float) -> None:
        self.digest.update(seq)
        slices = np.array_split(seq, self.replicas)  # MirroredStrategy's contiguous slices
        self.batches.append({"first": int(seq[0]), "last": int(seq[-1]),
                             "replicas": [[int(s[0]), int(s[-1])] for s in slices if len(s)]})
        self.input_seconds += seconds
        self.handed.append(time.perf_counter())

    def step_begins(self) -> None:
        self.asked.append(time.perf_counter())

    def end(self, epoch: int, logs: dict[str, float]) -> None:
        seconds = time.perf_counter() - self.started
        asked = list(self.asked)
        if asked and self.pulled:
            # The first step asks for data only after Keras has traced it (seconds, in the
            # first epoch); the input pipeline is first pulled then, not at the step's start.
            asked[0] = max(asked[0], self.pulled)
        waited = sum(max(0.0, h - a) for h, a in zip(self.handed, asked, strict=False))
        self.epochs.append({
            "epoch": epoch, "started": self.wall_start, "seq_digest": self.digest.hexdigest(),
            "examples": self.digest.count,
            "batches": self.batches, "seconds": round(seconds, 4),
            "input_seconds": round(self.input_seconds, 4),
            "input_wait_seconds": round(waited, 4),
            "metrics": {k: float(v) for k, v in (logs or {}).items()},
        })


def setup_devices(cpu_replicas: int | None) -> Any:
    """The tf.distribute strategy for the devices present.

    Several GPUs: MirroredStrategy over them. Else, with `cpu_replicas` N > 1, the CPU is split
    into N logical devices and mirrored over (the multi-replica path, testable without GPUs).
    Else the default one-device strategy.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    if cpu_replicas and cpu_replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        # RuntimeError: TensorFlow already started in this process; keep its devices.
        with contextlib.suppress(RuntimeError):
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")][:cpu_replicas]
        if len(devices) < cpu_replicas:
            raise ConfigError(f"cpu_replicas {cpu_replicas}: TensorFlow started earlier in this "
                              f"process with {len(devices)} CPU device(s); run in a new process.")
        return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.get_strategy()


def run_stage(stage: StageSpec[TrainParams], ctx: StageContext, callbacks: list | None = None
              ) -> StageResult:
    """Train the model on the batching plan's train split; evaluate on eval each epoch.

    In an assembly line the first epoch starts as soon as batching has announced its plan and
    the first `stats_records` train records are stored, and follows the records as the
    stages before it store them; later epochs re-read the stored records. A shuffled plan
    needs its whole split, so it waits for the input to be stored and holds it in memory.

    Writes checkpoints/ (weights each epoch), tensorboard/, model.keras and saved_model/.
    An interrupted stage resumes from its last finished epoch when the run is resumed
    (`seqline run --resume RUN_ID`): a backup beside the stage keeps weights, optimizer and
    epoch, and the data of every epoch is a pure function of the plan and the epoch number.

    Raises:
        ConfigError: unknown model preset or function, batch size not divisible by replicas.
        StageError: the model function raised or returned no compiled model.
    """
    import keras
    import tensorflow as tf

    p = stage.params
    plan, data = _input(stage, ctx)
    if p.label not in (None, plan.label):
        raise ConfigError(f"{stage.where}: label {p.label!r} differs from the batching "
                          f"stage's label {plan.label!r}; set it once, on batching.")
    strategy = setup_devices(p.cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    if plan.batch_size % replicas:
        raise ConfigError(f"{stage.where}: batch_size {plan.batch_size} does not split "
                          f"into {replicas} equal replica slices; use a multiple of {replicas}.")
    keras.utils.set_random_seed(p.seed)
    tf.config.experimental.enable_op_determinism()
    spec = _model_spec(plan, data, p)
    with strategy.scope():
        model = _build(stage, ctx, p.model, spec)
    audit = EpochAudit(replicas)
    out = Path(ctx.out_dir)
    with warnings.catch_warnings():
        # The first epoch's length is unknown on purpose (the records are still arriving);
        # Keras warns that its input "ran out of data" when that epoch ends.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        history = _fit(model, plan, data, spec, audit, stage, ctx, out, p.epochs,
                       callbacks)
    from_memory = data.release()
    if ctx.line:  # batching's own account must be complete before the model is
        ctx.line.committed(ctx.source)
    model.save(out / "model.keras")
    model.export(str(out / "saved_model"), verbose=False)
    waited = round(sum(e["input_wait_seconds"] for e in audit.epochs), 4)
    return StageResult({
        "strategy": type(strategy).__name__, "replicas": replicas,
        "model": p.model, "epochs": audit.epochs, "input_wait_seconds": waited,
        "shards_from_memory": from_memory,  # taken as stored, not decoded (see ShardFeed)
        "final_metrics": {k: float(v[-1]) for k, v in history.history.items()},
        "model_spec": {"features": list(spec.features), "label": spec.label,
                       "input_shape": list(spec.input_shape), "num_classes": spec.num_classes},
    }, records_in=audit.epochs[-1]["examples"] if audit.epochs else 0, waited_input=waited)


@dataclass(frozen=True)
class _Data:
    """Where training's batches come from: `batches(split, epoch)`, and the first train
    records' features and labels (`first(k)`), which set normalization and the class count."""

    batches: Callable[[str, int], Iterator[tuple[np.ndarray, ...]]]
    first: Callable[[int], tuple[np.ndarray, np.ndarray]]
    release: Callable[[], int] = lambda: 0  # frees what the input holds; shards taken from it


def _input(stage: StageSpec[TrainParams], ctx: StageContext) -> tuple[Plan, _Data]:
    """The batching plan, and where each epoch's batches come from.

    Unshuffled: streamed from the plan's source records, followed while they are stored.
    Shuffled: the whole split in memory, once the source has committed.
    """
    plan = ctx.line.announced(ctx.source) if ctx.line else None
    if plan is None:
        batching = read_manifest(ctx.run / ctx.source)
        if "plan" not in batching:
            raise ConfigError(f"{stage.where}: input {ctx.source!r} is not a batching stage.")
        plan = plan_of(batching)
    if plan.shuffle:
        if ctx.line:
            ctx.line.committed(plan.source)
        b = load_batches(ctx.run, plan)
        return plan, _Data(b.batches, lambda k: (b.x[b.train_rows[:k]], b.y[b.train_rows[:k]]))
    feed = ctx.line.feed(plan.source) if ctx.line else source_feed(ctx.run, plan.source)
    feed.follow()  # the first epoch takes the records from memory as they are stored

    def first(k: int) -> tuple[np.ndarray, np.ndarray]:
        records = replace(plan, window=None, batch_size=k, remainder="keep")
        x, y, _ = next(stream_batches(records, feed, "train", take=False), (None, None, None))
        if x is None:
            raise StageError(f"{stage.where}: the train split of {plan.source!r} is empty.",
                             stage=stage.name)
        return x, y

    def release() -> int:
        feed.release()
        return feed.taken

    return plan, _Data(lambda split, epoch: stream_batches(plan, feed, split), first, release)


def _fit(model: Any, plan: Plan, data: _Data, spec: ModelSpec, audit: EpochAudit,
         stage: StageSpec[TrainParams], ctx: StageContext, out: Path, epochs: int,
         callbacks: list | None) -> Any:
    import keras

    return model.fit(
        _dataset(plan, data, "train", spec, audit), epochs=epochs, verbose=0,
        shuffle=False, validation_data=_dataset(plan, data, "eval", spec)
        if plan.eval_fraction > 0 else None,
        callbacks=[keras.callbacks.BackupAndRestore(str(ctx.run / f".{stage.name}.backup")),
                   keras.callbacks.ModelCheckpoint(
                       str(out / "checkpoints" / "epoch-{epoch:03d}.weights.h5"),
                       save_weights_only=True),
                   keras.callbacks.TensorBoard(str(out / "tensorboard")),
                   _AuditCallback(audit), *(callbacks or [])])


def _model_spec(plan: Plan, data: _Data, p: TrainParams) -> ModelSpec:
    """Feature mean and variance (and the class count) from the first train records."""
    x, y = data.first(p.stats_records)
    shape = (len(plan.features),) if plan.window is None \
        else (plan.window["length"], len(plan.features))
    classes = p.num_classes
    if classes is None and np.issubdtype(y.dtype, np.integer) and len(y):
        classes = int(np.max(y)) + 1
    return ModelSpec(plan.features, plan.label, shape, x.mean(axis=0).tolist(),
                     np.maximum(x.var(axis=0), 1e-12).tolist(), classes,
                     p.learning_rate, p.seed)


def _build(stage: StageSpec[TrainParams], ctx: StageContext, ref: str, spec: ModelSpec) -> Any:
    build = PRESETS.get(ref) or (load_function(ref, str(ctx.base_dir)) if ":" in ref else None)
    if build is None:
        raise ConfigError(f"{stage.where}: unknown model {ref!r}.{did_you_mean(ref, PRESETS)} "
                          f"Use a preset ({', '.join(PRESETS)}) or 'module:function'.")
    try:
        model = build(spec)
    except Exception as exc:
        raise StageError(f"{stage.where}: the model function {ref!r} raised "
                         f"{type(exc).__name__}: {exc}", stage=stage.name) from exc
    if not getattr(model, "compiled", False):
        raise StageError(f"{stage.where}: the model function {ref!r} returned "
                         f"{type(model).__name__}, expected a compiled keras.Model (call "
                         "model.compile(...) before returning it).", stage=stage.name)
    return model


def _dataset(plan: Plan, data: _Data, split: str, spec: ModelSpec,
             audit: EpochAudit | None = None) -> Any:
    """The split as a tf.data.Dataset of (x, y) batches, produced in plan order.

    Its length is left unknown: in a line the first epoch's is not known until the stream
    ends, and Keras runs each epoch until the batches run out.
    """
    import tensorflow as tf

    x_shape = (None, *spec.input_shape)
    y_type = tf.int64 if spec.num_classes is not None else tf.float32

    def generate():
        # Batches go to TensorFlow several at a time, stacked, and tf.data's unbatch() splits
        # them again in C++: one Python hand-over per chunk instead of per batch, which on a
        # busy CPU is what made training steps wait for input (13 % of the demo's step time
        # before, under 1 % after).
        epoch = audit.epoch if audit else 0
        if audit:
            audit.pulled = time.perf_counter()
        chunk: list[tuple[np.ndarray, ...]] = []
        last = time.perf_counter()
        for batch in data.batches(split, epoch):
            _check_label(plan, spec, batch)
            if audit:
                audit.record(batch[2], time.perf_counter() - last)
            if chunk and len(batch[2]) != len(chunk[0][2]):  # the last, partial batch
                yield _stack(chunk, y_type)
                chunk = []
            chunk.append(batch)
            if len(chunk) == CHUNK:
                yield _stack(chunk, y_type)
                chunk = []
            last = time.perf_counter()
        if chunk:
            yield _stack(chunk, y_type)

    signature = (tf.TensorSpec((None, *x_shape), tf.float32), tf.TensorSpec((None, None), y_type))
    return tf.data.Dataset.from_generator(generate, output_signature=signature) \
        .unbatch().prefetch(2)


CHUNK = 16


def _stack(chunk: list[tuple[np.ndarray, ...]], y_type: Any) -> tuple[np.ndarray, np.ndarray]:
    return (np.stack([x for x, _, _ in chunk]),
            np.stack([y for _, y, _ in chunk]).astype(y_type.as_numpy_dtype))


def _check_label(plan: Plan, spec: ModelSpec, batch: tuple[np.ndarray, ...]) -> None:
    _, y, seq = batch
    if spec.num_classes is not None and len(y) and int(np.max(y)) >= spec.num_classes:
        bad = int(np.argmax(y >= spec.num_classes))
        raise StageError(
            f"the label {plan.label!r} is {int(y[bad])} at seq {int(seq[bad])}, but the model "
            f"has {spec.num_classes} classes (from the first train records). Set "
            "`num_classes` on the train stage.", seq=int(seq[bad]))


class _AuditCallback:
    """Marks epoch boundaries for the audit (a plain Keras callback, built lazily)."""

    def __new__(cls, audit: EpochAudit) -> Any:
        import keras

        class AuditCallback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                audit.begin(epoch)

            def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                audit.step_begins()

            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                audit.end(epoch, logs or {})

        return AuditCallback()


def _validate(stage: StageSpec[TrainParams], base_dir: Path) -> None:
    if ":" in stage.params.model:
        try:
            load_function(stage.params.model, str(base_dir))
        except ConfigError as exc:
            raise ConfigError(f"{stage.where}: {exc}") from exc


def verify_audit(run: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    """`seqline verify`: every epoch's digest, recomputed from the plan and the stored records.

    The examples of each epoch are derived again from the batching plan and the records (seq
    read from the shards), so an epoch that does not match what the model was fed shows here.
    """
    try:
        batches = load_batches(run, plan_of(read_manifest(run / manifest["input"])))
    except SeqlineError as exc:
        problems.append(f"audit: cannot rebuild the batches: {exc}")
        return
    for epoch in manifest["epochs"]:
        if seq_digest(batches.example_seq("train", epoch["epoch"])) != epoch["seq_digest"]:
            problems.append(f"audit: epoch {epoch['epoch']} fed the model a seq stream "
                            "that differs from the train split recomputed from the records")


SPEC = ComponentSpec("train", TrainParams, run_stage, reads="plan", writes="model", live=True,
                     validate=_validate, verify=verify_audit,
                     doc="A batching plan -> a trained Keras model with an order audit.")
