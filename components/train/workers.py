"""train on several workers: each feeds its slice of every global batch from the stored shards."""

from __future__ import annotations

import functools
import io
import logging
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from seqline.components.batching.examples import StreamedBatches, load_batches, source_feed
from seqline.components.batching.plan import Plan
from seqline.components.train import (
    EpochAudit,
    TrainParams,
    build_model,
    model_spec,
    plan_for,
)
from seqline.components.train.models import is_classifier
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import StageContext, StageResult, StageSpec
from seqline.pipeline.storage import folder, fspath

__all__ = ["merge_audits", "quiet_tensorflow_loggers", "run_on_workers", "train_on_worker"]


def run_on_workers(stage: StageSpec[TrainParams], ctx: StageContext) -> StageResult:
    """Train `stage` on `workers` processes through the context's launcher (Ray Train).

    The workers read the plan's source from its committed shards, each on its own (no record
    passes through the driver), so the stage waits for the source to commit instead of
    following it as it is stored. Rank 0, the chief, sends back its output folder (model,
    SavedModel, checkpoints, TensorBoard logs) as a tar archive, unpacked into `out_dir`; every
    worker sends back its audit, merged into one: per batch its global seq range and each
    worker's slice, per epoch the global digest and each worker's digest.

    Raises:
        ConfigError: no launcher (not the ray runner: the planner says so before the run,
            see check_runner), or a batch size that does not split into one equal slice per
            worker.
        StageError: the workers were fed different batches, or one of them failed.
    """
    p = stage.params
    if ctx.launcher is None:
        raise ConfigError(f"{stage.where}: workers {p.workers} trains through Ray Train; run "
                          "with --runner ray (a local Ray or --ray-address), or set workers 1.")
    plan = plan_for(stage, ctx)
    if plan.batch_size % p.workers:
        raise ConfigError(f"{stage.where}: batch_size {plan.batch_size} does not split into "
                          f"{p.workers} equal worker slices; use a multiple of {p.workers}.")
    if ctx.line:  # the workers read committed shards, and the manifest needs batching's account
        ctx.line.committed(plan.source)
        ctx.line.committed(ctx.source)
    # Absolute: a Ray Train worker runs in a folder of Ray's, where a relative --root is not.
    run = ctx.run.resolve()
    work = functools.partial(train_on_worker, stage, fspath(run), plan, str(ctx.base_dir))
    returned = ctx.launcher(work, p.workers, stage.name)
    with tarfile.open(fileobj=io.BytesIO(returned[0]["files"])) as tar:
        tar.extractall(ctx.out_dir, filter="data")
    epochs = merge_audits(stage, [r["epochs"] for r in returned])
    chief = returned[0]
    waited = round(sum(e["input_wait_seconds"] for e in epochs), 4)
    return StageResult({
        "strategy": chief["strategy"], "replicas": p.workers, "workers": p.workers,
        "model": p.model, "epochs": epochs, "input_wait_seconds": waited,
        "shards_from_memory": 0,  # every worker decodes the stored shards
        "final_metrics": {k: float(v[-1]) for k, v in chief["history"].items()},
        "model_spec": chief["model_spec"],
    }, records_in=epochs[-1]["examples"] if epochs else 0, waited_input=waited)


def merge_audits(stage: StageSpec[TrainParams], audits: list[list[dict[str, Any]]]
                 ) -> list[dict[str, Any]]:
    """One audit from every worker's: the chief's epochs, with each worker's slices added.

    Every worker cuts the same global batches and records their seq digest; differing digests
    mean the workers were not fed parts of the same batches, and the stage fails.

    Example: 2 workers, a batch of seq 14-45: {"first": 14, "last": 45, "replicas": [[14, 29],
    [30, 45]], "workers": [[14, 29], [30, 45]]}; the epoch gets "worker_digests", one each.
    """
    merged = []
    for number, chief in enumerate(audits[0]):
        epochs = [audit[number] for audit in audits]
        if len({e["seq_digest"] for e in epochs}) != 1:
            raise StageError(f"{stage.where}: in epoch {chief['epoch']} the workers were fed "
                             "different global batches (their seq digests differ).",
                             stage=stage.name)
        batches = [{k: v for k, v in b.items() if k != "worker"} for b in chief["batches"]]
        for index, batch in enumerate(batches):
            batch["workers"] = [e["batches"][index]["worker"] for e in epochs]
        merged.append({**{k: v for k, v in chief.items() if k != "worker_digest"},
                       "batches": batches,
                       "worker_digests": [e["worker_digest"] for e in epochs]})
    return merged


def train_on_worker(stage: StageSpec[TrainParams], run: str, plan: Plan, base_dir: str,
                    rank: int, workers: int) -> dict[str, Any]:
    """One worker's training (in its own process, TF_CONFIG set by the launcher).

    Returns its audit and metrics history; the chief (rank 0) also its output folder as a
    tar archive. The other workers' checkpoints and logs are the chief's twins and are
    dropped. User modules import from the pipeline's folder if this node has it, else from
    the job's working directory (Ray ships the pipeline folder there).
    """
    quiet_tensorflow_loggers()
    import tensorflow as tf  # noqa: I001 - the strategy must exist before any other TF op

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    from seqline.components.train import keras_fit

    keras_fit.seed(stage.params.seed)
    user_dir = Path(base_dir) if Path(base_dir).is_dir() else Path(os.getcwd())
    run_dir: Any = folder(run)  # a local path or a URL: the worker reads the store itself
    data = load_batches(run_dir, plan, stage.name) if plan.shuffle else \
        StreamedBatches(plan, source_feed(run_dir, plan.source))
    spec = model_spec(stage, data)
    with strategy.scope():
        model = build_model(stage, user_dir, spec)
    audit = EpochAudit(workers, worker=rank)
    feeder = keras_fit.Feeder(stage, data, spec, audit,
                              is_classifier(model.output_shape, spec.num_classes), strategy)
    out = Path(tempfile.mkdtemp(prefix=f"seqline-train-{rank}-"))
    try:
        history = keras_fit.fit(model, feeder, stage.params.epochs, [
            *keras_fit.saving(out, None), keras_fit.AuditCallback(audit)])
        result: dict[str, Any] = {
            "epochs": audit.epochs, "history": history.history,
            "strategy": type(strategy).__name__,
            "model_spec": {"features": list(spec.features), "label": spec.label,
                           "input_shape": list(spec.input_shape),
                           "num_classes": spec.num_classes}}
        if rank == 0:
            model.save(out / "model.keras")
            model.export(str(out / "saved_model"), verbose=False)
            result["files"] = _packed(out)
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


# TF_CPP_MIN_LOG_LEVEL -> the level of TensorFlow's Python loggers (0 shows all).
TF_PYTHON_LEVELS = {"0": logging.INFO, "1": logging.WARNING, "2": logging.ERROR,
                    "3": logging.ERROR}


def quiet_tensorflow_loggers() -> None:
    """TensorFlow's Python loggers (tensorflow, absl) as quiet as TF_CPP_MIN_LOG_LEVEL makes
    its C++ logs, in a worker process.

    The driver sets that variable unless -v, and a worker inherits it (a local Ray's, or a
    cluster's through the job's runtime env); but a worker's Python loggers are its own, and
    MultiWorkerMirroredStrategy logs its cluster spec and every collective at INFO, which
    Ray relays into the run's output.
    """
    level = TF_PYTHON_LEVELS.get(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"), logging.INFO)
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(level)


def _packed(local: Path) -> bytes:
    """The folder's files as an uncompressed tar (weights compress poorly; tar is fast)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(local.iterdir()):
            tar.add(path, arcname=path.name)
    return buffer.getvalue()
