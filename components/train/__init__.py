"""train: Keras 3 on TensorFlow over a batching plan: checkpoints, resume and an order audit.

Beside it: models.py (presets and the model spec), keras_fit.py (the input feeder and the
callbacks; TensorFlow, imported only when a model trains), workers.py (several workers
through Ray Train), audit.py (what each epoch fed the model, and `verify`'s check).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import AfterValidator, Field, WithJsonSchema

from seqline.components.batching.examples import (
    StreamedBatches,
    TrainingInput,
    load_batches,
    source_feed,
)
from seqline.components.batching.plan import Plan, plan_of
from seqline.components.train.audit import EpochAudit, verify_audit
from seqline.components.train.models import PRESETS, ModelSpec, is_classifier
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.functions import FUNCTION_PATTERN, load_function
from seqline.pipeline.params import StageParams, did_you_mean, one_of
from seqline.pipeline.specs import DriverSpec, StageContext, StageResult, StageSpec
from seqline.pipeline.storage import scratch

if TYPE_CHECKING:
    import keras

__all__ = ["SPEC", "EpochAudit", "TrainParams", "build_model", "model_spec", "run_stage",
           "setup_devices", "verify_audit"]


def _model_ref(ref: str) -> str:
    if ref not in PRESETS and ":" not in ref:
        raise one_of(ref, list(PRESETS), f"a preset ({', '.join(PRESETS)}) or 'module:function'")
    return ref


class TrainParams(StageParams):
    """train's parameters: the model, how long and how fast it learns, and on what devices."""

    model: Annotated[str, AfterValidator(_model_ref), WithJsonSchema({"anyOf": [
        {"enum": list(PRESETS)}, {"type": "string", "pattern": FUNCTION_PATTERN}]})] = Field(
        description=(
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
    workers: int = Field(1, ge=1, description=(
        "N > 1: train on N workers (processes, on any node) through Ray Train with "
        "MultiWorkerMirroredStrategy; each feeds its contiguous slice of every global batch. "
        "Needs the ray runner."))


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


def run_stage(stage: StageSpec[TrainParams], ctx: StageContext,
              callbacks: list[keras.callbacks.Callback] | None = None) -> StageResult:
    """Train the model on the batching plan's train split; evaluate on eval each epoch.

    In an assembly line the first epoch starts as soon as batching has announced its plan and
    the first `stats_records` train records are stored, and follows the records as the
    stages before it store them; later epochs re-read the stored records. A shuffled plan
    needs its whole split, so it waits for the input to be stored and holds it in memory.

    Writes checkpoints/ (weights each epoch), tensorboard/, model.keras and saved_model/.
    An interrupted stage resumes from its last finished epoch when the run is resumed
    (`seqline run --resume RUN_ID`): a backup beside the stage keeps weights, optimizer and
    epoch, and the data of every epoch is a pure function of the plan and the epoch number.

    Example: the weather example's 1,461 days in 14-day windows, batch_size 32, eval 20 %,
    15 epochs: each epoch is fed the same 37 batches (seq 14-1168) in seq order, and the
    manifest records each epoch's seq digest, equal to the plan's train digest.

    Args:
        stage: the train stage and its parameters.
        ctx: where it runs; `ctx.source` is the batching stage.
        callbacks: more Keras callbacks, run after the stage's own (tests interrupt with one).

    Raises:
        ConfigError: unknown model preset or function, batch size not divisible by replicas.
        StageError: the model function raised or returned no compiled model; a label is out
            of the model's classes; the input has no records.
    """
    p = stage.params
    if p.workers > 1:
        from seqline.components.train.workers import run_on_workers

        return run_on_workers(stage, ctx)
    data = _input(stage, ctx)
    strategy = setup_devices(p.cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    if data.plan.batch_size % replicas:
        raise ConfigError(f"{stage.where}: batch_size {data.plan.batch_size} does not split "
                          f"into {replicas} equal replica slices; use a multiple of {replicas}.")
    from seqline.components.train import keras_fit  # TensorFlow: seconds to import, so only here

    keras_fit.seed(p.seed)
    spec = model_spec(stage, data)
    with strategy.scope():
        model = build_model(stage, ctx.base_dir, spec)
    audit = EpochAudit(replicas, progress=ctx.progress)
    out = Path(ctx.out_dir)
    feeder = keras_fit.Feeder(stage, data, spec, audit,
                              is_classifier(model.output_shape, spec.num_classes))
    backup = scratch(ctx.run) / f".{stage.name}.backup"  # local on every storage
    history = keras_fit.fit(model, feeder, p.epochs, [
        *keras_fit.saving(out, backup),
        keras_fit.AuditCallback(audit), *(callbacks or [])])
    from_memory = data.release()
    if ctx.line:  # batching's own account must be complete before the model is
        ctx.line.committed(ctx.source)
    model.save(out / "model.keras")
    model.export(str(out / "saved_model"), verbose=False)
    return _result(stage, type(strategy).__name__, audit, history.history, spec, from_memory)


def _result(stage: StageSpec[TrainParams], strategy: str, audit: EpochAudit,
            history: dict[str, list[float]], spec: ModelSpec, from_memory: int) -> StageResult:
    waited = round(sum(e["input_wait_seconds"] for e in audit.epochs), 4)
    return StageResult({
        "strategy": strategy, "replicas": audit.replicas, "workers": stage.params.workers,
        "model": stage.params.model, "epochs": audit.epochs, "input_wait_seconds": waited,
        "shards_from_memory": from_memory,  # taken as stored, not decoded (see ShardFeed)
        "final_metrics": {k: float(v[-1]) for k, v in history.items()},
        "model_spec": {"features": list(spec.features), "label": spec.label,
                       "input_shape": list(spec.input_shape), "num_classes": spec.num_classes},
    }, records_in=audit.epochs[-1]["examples"] if audit.epochs else 0, waited_input=waited)


def _input(stage: StageSpec[TrainParams], ctx: StageContext) -> TrainingInput:
    """Where each epoch's batches come from, following the batching plan.

    Unshuffled: streamed from the plan's source records, followed while they are stored.
    Shuffled: the whole split in memory, once the source has committed.
    """
    plan = plan_for(stage, ctx)
    if plan.shuffle:
        if ctx.line:
            ctx.line.committed(plan.source)
        return load_batches(ctx.run, plan, stage.name)
    feed = ctx.line.feed(plan.source) if ctx.line else source_feed(ctx.run, plan.source)
    feed.follow()  # the first epoch takes the records from memory as they are stored
    return StreamedBatches(plan, feed)


def plan_for(stage: StageSpec[TrainParams], ctx: StageContext) -> Plan:
    """The batching plan train follows: as announced in a line, or from batching's manifest.

    Raises:
        ConfigError: the input is not a batching stage, or the labels differ.
    """
    plan = ctx.line.announced(ctx.source) if ctx.line else None
    if plan is None:
        batching = read_manifest(ctx.run / ctx.source)
        if "plan" not in batching:
            raise ConfigError(f"{stage.where}: input {ctx.source!r} is not a batching stage.")
        plan = plan_of(batching)
    if stage.params.label not in (None, plan.label):
        raise ConfigError(f"{stage.where}: label {stage.params.label!r} differs from the "
                          f"batching stage's label {plan.label!r}; set it once, on batching.")
    return plan


def model_spec(stage: StageSpec[TrainParams], data: TrainingInput) -> ModelSpec:
    """Feature mean and variance (and the class count) from the first train records."""
    p, plan = stage.params, data.plan
    first = data.first(p.stats_records)
    if first is None:
        raise StageError(f"{stage.where}: the train split of {plan.source!r} is empty.",
                         stage=stage.name)
    x, y = first
    shape = (len(plan.features),) if plan.window is None else (plan.length, len(plan.features))
    classes = p.num_classes
    if classes is None and np.issubdtype(y.dtype, np.integer) and len(y):
        classes = int(np.max(y)) + 1
    return ModelSpec(plan.features, plan.label, shape, x.mean(axis=0).tolist(),
                     np.maximum(x.var(axis=0), 1e-12).tolist(), classes,
                     p.learning_rate, p.seed)


def build_model(stage: StageSpec[TrainParams], base_dir: Path, spec: ModelSpec) -> Any:
    """The compiled Keras model of `stage` (a preset, or the user's function from base_dir)."""
    ref = stage.params.model
    build = PRESETS.get(ref) or (load_function(ref, str(base_dir)) if ":" in ref else None)
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


def _validate(stage: StageSpec[TrainParams], base_dir: Path) -> None:
    if stage.params.workers > 1 and stage.params.cpu_replicas not in (None, 1):
        raise ConfigError(f"{stage.where}: set workers or cpu_replicas, not both (each worker "
                          "is one replica).")
    if ":" in stage.params.model:
        try:
            load_function(stage.params.model, str(base_dir))
        except ConfigError as exc:
            raise ConfigError(f"{stage.where}: {exc}") from exc


def _check_runner(stage: StageSpec[TrainParams], runner: str) -> None:
    if stage.params.workers > 1 and runner != "ray":
        raise ConfigError(f"{stage.where}: workers {stage.params.workers} trains through Ray "
                          "Train; run with --runner ray (a local Ray or --ray-address), or set "
                          "workers 1.")


SPEC = DriverSpec(name="train", params=TrainParams, run=run_stage, reads="plan", writes="model",
                  live=True, validate=_validate, verify=verify_audit, check_runner=_check_runner,
                  driver_imports=("tensorflow",),
                  doc="A batching plan -> a trained Keras model with an order audit.")
