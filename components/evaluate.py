"""evaluate: metrics on the eval split, per slice, thresholds, and blessing against the last one.

Like TFX's Evaluator: a model is `blessed` when every threshold holds and it is no worse than
the last blessed model of the same pipeline (found in the other runs under the same root) on
the comparison metric. The manifest says which, and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from seqline.components.batching.examples import Batches, load_batches
from seqline.components.batching.plan import plan_of
from seqline.components.train.models import is_classifier
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.params import PARAMS_CONFIG, StageParams, did_you_mean
from seqline.pipeline.specs import DriverSpec, Sample, StageContext, StageResult, StageSpec
from seqline.pipeline.storage import Folder, folder, storage_of

__all__ = ["METRICS", "SPEC", "ErrorBound", "EvaluateParams", "ShareBound", "Thresholds",
           "last_blessed", "run_stage"]

Metric = Literal["mae", "rmse", "mse", "accuracy"]


def _bounded(bound: Any) -> Any:
    if bound.max is None and bound.min is None:
        raise ValueError("{max: x} and/or {min: y}")
    return bound


class ErrorBound(BaseModel):
    """Bounds on an error metric (mae, rmse, mse), which is never negative."""

    model_config = PARAMS_CONFIG

    max: float | None = Field(None, ge=0, description="The metric must be at most this.")
    min: float | None = Field(None, ge=0, description="The metric must be at least this.")
    _check = model_validator(mode="after")(_bounded)


class ShareBound(BaseModel):
    """Bounds on a share (accuracy), between 0 and 1."""

    model_config = PARAMS_CONFIG

    max: float | None = Field(None, ge=0, le=1, description="The metric must be at most this.")
    min: float | None = Field(None, ge=0, le=1, description="The metric must be at least this.")
    _check = model_validator(mode="after")(_bounded)


class Thresholds(BaseModel):
    """Per metric, the bounds it must hold for the model to be blessed."""

    model_config = PARAMS_CONFIG

    mae: ErrorBound | None = None
    rmse: ErrorBound | None = None
    mse: ErrorBound | None = None
    accuracy: ShareBound | None = None

    def bounds(self) -> dict[str, dict[str, float]]:
        """{metric: {max: x, min: y}} for the metrics that have bounds."""
        return {name: bound.model_dump(exclude_none=True)
                for name in type(self).model_fields if (bound := getattr(self, name))}


class EvaluateParams(StageParams):
    """evaluate's parameters: which metrics, per which slices, and the bounds for blessing."""

    metrics: list[Metric] | None = Field(None, description=(
        "Default: [mae, rmse] for a regression model, [accuracy] for a classifier (a model "
        "whose output has one unit per class)."))
    slices: list[str] = Field(default_factory=list, description=(
        "Columns whose values group the eval examples (by the label's record)."))
    thresholds: Thresholds = Field(default_factory=Thresholds, description=(
        "{metric: {max: x} | {min: y}}: every one must hold for the model to be blessed."))


# name -> (function of labels and predictions, True if higher is better)
METRICS = {
    "mae": (lambda y, p: float(np.mean(np.abs(y - p))), False),
    "rmse": (lambda y, p: float(np.sqrt(np.mean((y - p) ** 2)))
             , False),
    "mse": (lambda y, p: float(np.mean((y - p) ** 2)), False),
    "accuracy": (lambda y, p: float(np.mean(y == p)), True),
}
# Slices with more distinct values than this are refused: per-slice metrics are for a few
# meaningful groups (weather kinds, regions), not for ids.
MAX_SLICES = 50


def run_stage(stage: StageSpec[EvaluateParams], ctx: StageContext) -> StageResult:
    """Evaluate the train stage's model on the eval split of its batching plan.

    Example: metrics [mae], slices [weather], thresholds {mae: {max: 4}} gives the overall
    MAE, the MAE per weather kind, whether MAE <= 4, and blessed true/false with reasons.

    Raises:
        ConfigError: unknown metric or slice column, or an empty eval split.
    """
    import keras

    p = stage.params
    train = read_manifest(ctx.run / ctx.source)
    plan = plan_of(read_manifest(ctx.run / train["input"]))
    batches = load_batches(ctx.run, plan, stage.name)
    targets = batches.label_rows("eval")  # each eval example's label row, to slice by
    if not len(targets):
        raise ConfigError(f"{stage.where}: the eval split is empty; set batching's "
                          "`eval_fraction` above 0.")
    stored = ctx.run / ctx.source / "model.keras"
    with storage_of(stored).local_copy(stored) as model_file:  # Keras: local only
        model = keras.models.load_model(model_file)
    classify = is_classifier(model.output_shape, train["model_spec"]["num_classes"])
    names = list(p.metrics or (["accuracy"] if classify else ["mae", "rmse"]))
    _check(stage, p.slices, batches)
    labels, predicted = _predict(model, batches, classify)
    metrics = _metrics(names, labels, predicted)
    slices = {column: {str(value): _metrics(names, labels[mask], predicted[mask])
                       for value, mask in _groups(batches.columns[column][targets])}
              for column in p.slices}
    thresholds = p.thresholds.bounds()
    return StageResult({"examples": len(labels), "metrics": metrics, "slices": slices,
                        "classifier": classify,
                        **_bless(stage, ctx, names[0], metrics, thresholds)},
                       records_in=batches.records)


def _check(stage: StageSpec[EvaluateParams], slices: list[str], batches: Batches) -> None:
    _slices_in(stage, list(batches.columns))
    for column in slices:
        if len(np.unique(batches.columns[column])) > MAX_SLICES:
            raise ConfigError(f"{stage.where}: slice column {column!r} has more than "
                              f"{MAX_SLICES} values; slice by a column of a few groups.")


def _predict(model: Any, batches: Batches, classify: bool) -> tuple[np.ndarray, np.ndarray]:
    """The eval examples' labels and the model's predictions, in plan order."""
    labels: list[np.ndarray] = []
    predicted: list[np.ndarray] = []
    for x, y, _ in batches.batches("eval"):
        out = np.asarray(model.predict_on_batch(x))
        predicted.append(out.argmax(axis=-1) if classify else out.reshape(-1))
        labels.append(y)
    return np.concatenate(labels).astype(np.float64), np.concatenate(predicted)


def _metrics(names: list[str], labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    return {name: round(METRICS[name][0](labels, predicted), 6) for name in names}


def _groups(values: np.ndarray):
    for value in np.unique(values):
        yield value, values == value


def _bless(stage: StageSpec, ctx: StageContext, main: str, metrics: dict[str, float],
           thresholds: dict[str, Any]) -> dict[str, Any]:
    reasons, checks = [], {}
    for name, bound in thresholds.items():
        value = metrics.get(name)
        ok = value is not None and ("max" not in bound or value <= bound["max"]) \
            and ("min" not in bound or value >= bound["min"])
        checks[name] = {**bound, "value": value, "ok": ok}
        if not ok:
            reasons.append(f"{name} {value} is outside its threshold {bound}")
    baseline = last_blessed(ctx.root, ctx.pipeline, stage.name, exclude=ctx.run.name)
    if baseline and main in baseline["metrics"]:
        higher = METRICS[main][1]
        before, now = baseline["metrics"][main], metrics[main]
        if (now < before) if higher else (now > before):
            reasons.append(f"{main} {now} is worse than the last blessed model's {before} "
                           f"(run {baseline['run_id']})")
    blessed = not reasons
    if blessed:
        reasons.append("every threshold holds" + (
            f" and {main} is no worse than run {baseline['run_id']}'s" if baseline
            else "; no earlier blessed model to compare with"))
    return {"thresholds": checks, "blessed": blessed, "reasons": reasons,
            "baseline": {"run_id": baseline["run_id"], "metrics": baseline["metrics"]}
            if baseline else None}


def last_blessed(root: Folder, pipeline: str, stage: str, exclude: str | None = None
                 ) -> dict[str, Any] | None:
    """The newest blessed evaluation of the same pipeline and stage among the runs under
    `root` (but `exclude`): the baseline a new model is compared with."""
    found = []
    runs = (folder(root) if isinstance(root, str) else root) / "runs"
    for run in storage_of(runs).entries(runs):
        manifest_path = run / stage / "manifest.json"
        if run.name == exclude or not manifest_path.exists() or not (run / "run.json").exists():
            continue
        if json.loads((run / "run.json").read_text()).get("pipeline") != pipeline:
            continue
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("blessed"):
            found.append((manifest["committed_at"], run.name, manifest))
    if not found:
        return None
    _, run_id, manifest = max(found)
    return {"run_id": run_id, "metrics": manifest["metrics"]}


def _baseline(root: Folder, pipeline: str, stage: StageSpec[EvaluateParams]) -> Any:
    """What a cached evaluation depends on beyond its input: the baseline's metrics."""
    baseline = last_blessed(root, pipeline, stage.name)
    return baseline["metrics"] if baseline else None


def _slices_in(stage: StageSpec[EvaluateParams], columns: list[str]) -> None:
    for column in stage.params.slices:
        if column not in columns:
            raise ConfigError(f"{stage.where}: slice column {column!r} is not in the records;"
                              f"{did_you_mean(column, columns)} columns: {', '.join(columns)}.")


def _preview(stage: StageSpec[EvaluateParams], base_dir: Path, sample: Sample | None) -> Any:
    """Before anything runs: the slice columns checked against a sample of the records."""
    if sample is not None:
        _slices_in(stage, sample.records.schema.names)
    return None if sample is None else sample.records


SPEC = DriverSpec(name="evaluate", params=EvaluateParams, run=run_stage, reads="model",
                  writes="evaluation", depends_on=_baseline, driver_imports=("tensorflow",),
                  preview=_preview,
                  doc="A model + the eval split -> metrics, slices and a blessing.")
