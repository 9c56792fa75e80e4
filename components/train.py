"""train: Keras 3 on TensorFlow over a batching plan: checkpoints, resume and an order audit."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from seqline.components.batching import Batches, load_batches, plan_of
from seqline.components.models import PRESETS, ModelSpec
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.audit import SeqDigest
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.functions import load_function
from seqline.pipeline.specs import REQUIRED, ComponentSpec, StageContext, StageSpec, did_you_mean

__all__ = ["SPEC", "EpochAudit", "run_stage", "setup_devices"]


class EpochAudit:
    """Per epoch: a digest of the seq the model was fed, in order, and each batch's seq range.

    The batches are recorded as the input pipeline hands them over; tf.data keeps their order
    and an epoch consumes every batch, so an epoch that ends has been fed exactly this.
    """

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.epoch = 0
        self.epochs: list[dict[str, Any]] = []
        self._reset()

    def _reset(self) -> None:
        self.digest, self.batches, self.input_seconds = SeqDigest(), [], 0.0

    def begin(self, epoch: int) -> None:
        self.epoch = epoch
        self._reset()
        self.started = time.perf_counter()

    def record(self, seq: np.ndarray, seconds: float) -> None:
        self.digest.update(seq)
        slices = np.array_split(seq, self.replicas)  # MirroredStrategy's contiguous slices
        self.batches.append({"first": int(seq[0]), "last": int(seq[-1]),
                             "replicas": [[int(s[0]), int(s[-1])] for s in slices if len(s)]})
        self.input_seconds += seconds

    def end(self, epoch: int, logs: dict[str, float]) -> None:
        seconds = time.perf_counter() - self.started
        self.epochs.append({
            "epoch": epoch, "seq_digest": self.digest.hexdigest(), "examples": self.digest.count,
            "batches": self.batches, "seconds": round(seconds, 4),
            "input_seconds": round(self.input_seconds, 4),
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


def run_stage(stage: StageSpec, ctx: StageContext, callbacks: list | None = None
              ) -> dict[str, Any]:
    """Train the model on the batching plan's train split; evaluate on eval each epoch.

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

    p = SPEC.params_with_defaults(stage)
    batching = read_manifest(ctx.run / ctx.source)
    if "plan" not in batching:
        raise ConfigError(f"{stage.where}: input {ctx.source!r} is not a batching stage.")
    plan = plan_of(batching)
    if p["label"] not in (None, plan.label):
        raise ConfigError(f"{stage.where}: label {p['label']!r} differs from the batching "
                          f"stage's label {plan.label!r}; set it once, on batching.")
    batches = load_batches(ctx.run, plan)
    strategy = setup_devices(p["cpu_replicas"])
    replicas = strategy.num_replicas_in_sync
    if batches.plan.batch_size % replicas:
        raise ConfigError(f"{stage.where}: batch_size {batches.plan.batch_size} does not split "
                          f"into {replicas} equal replica slices; use a multiple of {replicas}.")
    keras.utils.set_random_seed(int(p["seed"]))
    tf.config.experimental.enable_op_determinism()
    spec = _model_spec(batches, p)
    with strategy.scope():
        model = _build(stage, ctx, p["model"], spec)
    audit = EpochAudit(replicas)
    out = Path(ctx.out_dir)
    history = model.fit(
        _dataset(batches, "train", audit), epochs=int(p["epochs"]), verbose=0, shuffle=False,
        validation_data=_dataset(batches, "eval") if len(batches.eval_starts) else None,
        callbacks=[keras.callbacks.BackupAndRestore(str(ctx.run / f".{stage.name}.backup")),
                   keras.callbacks.ModelCheckpoint(
                       str(out / "checkpoints" / "epoch-{epoch:03d}.weights.h5"),
                       save_weights_only=True),
                   keras.callbacks.TensorBoard(str(out / "tensorboard")),
                   _AuditCallback(audit), *(callbacks or [])])
    model.save(out / "model.keras")
    model.export(str(out / "saved_model"), verbose=False)
    return {
        "records_in": len(batches.seq),
        "strategy": type(strategy).__name__, "replicas": replicas,
        "model": p["model"], "epochs": audit.epochs,
        "final_metrics": {k: float(v[-1]) for k, v in history.history.items()},
        "model_spec": {"features": list(spec.features), "label": spec.label,
                       "input_shape": list(spec.input_shape), "num_classes": spec.num_classes},
    }


def _model_spec(batches: Batches, p: dict[str, Any]) -> ModelSpec:
    plan = batches.plan
    train_x = batches.x[batches.train_rows]
    shape = (len(plan.features),) if plan.window is None \
        else (plan.window["length"], len(plan.features))
    classes = int(np.max(batches.y)) + 1 if np.issubdtype(batches.y.dtype, np.integer) else None
    return ModelSpec(plan.features, plan.label, shape, train_x.mean(axis=0).tolist(),
                     np.maximum(train_x.var(axis=0), 1e-12).tolist(), classes,
                     float(p["learning_rate"]), int(p["seed"]))


def _build(stage: StageSpec, ctx: StageContext, ref: str, spec: ModelSpec) -> Any:
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


def _dataset(batches: Batches, split: str, audit: EpochAudit | None = None) -> Any:
    """The split as a tf.data.Dataset of (x, y) batches, produced in plan order."""
    import tensorflow as tf

    window = batches.plan.window
    x_shape = (None, len(batches.plan.features)) if window is None \
        else (None, window["length"], len(batches.plan.features))
    y_type = tf.int64 if np.issubdtype(batches.y.dtype, np.integer) else tf.float32

    def generate():
        epoch = audit.epoch if audit else 0
        last = time.perf_counter()
        for x, y, seq in batches.batches(split, epoch):
            if audit:
                audit.record(seq, time.perf_counter() - last)
            yield x, y.astype(y_type.as_numpy_dtype)
            last = time.perf_counter()

    signature = (tf.TensorSpec(x_shape, tf.float32), tf.TensorSpec((None,), y_type))
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    # Known length: Keras then counts steps per epoch instead of running off the end.
    return dataset.apply(tf.data.experimental.assert_cardinality(batches.steps(split))) \
        .prefetch(2)


class _AuditCallback:
    """Marks epoch boundaries for the audit (a plain Keras callback, built lazily)."""

    def __new__(cls, audit: EpochAudit) -> Any:
        import keras

        class AuditCallback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                audit.begin(epoch)

            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                audit.end(epoch, logs or {})

        return AuditCallback()


def _validate(stage: StageSpec, base_dir: Path) -> None:
    p = SPEC.params_with_defaults(stage)
    if not isinstance(p["epochs"], int) or p["epochs"] < 1:
        raise ConfigError(f"{stage.where}: `epochs` must be a positive integer.")
    ref = p["model"]
    if ref not in PRESETS and ":" not in str(ref):
        raise ConfigError(f"{stage.where}: unknown model {ref!r}.{did_you_mean(str(ref), PRESETS)}"
                          f" Use a preset ({', '.join(PRESETS)}) or 'module:function'.")
    if ":" in str(ref):
        load_function(ref, str(base_dir))


PARAMETERS: dict[str, Any] = {
    "model": REQUIRED,  # a preset name or "module:function" (see components/models.py)
    "label": None,  # defaults to the batching stage's label (which batching needs for windows)
    "epochs": 10,
    "learning_rate": 1e-3,
    "seed": 0,  # weights initialization and any randomness in training
    "cpu_replicas": None,  # N > 1: mirror over N logical CPU devices when there is no GPU
}

SPEC = ComponentSpec("train", "driver", PARAMETERS, _validate, run_stage,
                     doc="A batching plan -> a trained Keras model with an order audit.")
