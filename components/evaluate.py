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

from seqline.components.batching import Batches, load_batches, plan_of
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.params import PARAMS_CONFIG, StageParams, did_you_mean
from seqline.pipeline.specs import ComponentSpec, StageContext, StageResult, StageSpec

__all__ = ["METRICS", "SPEC", "EvaluateParams", "Threshold", "run_stage"]

Metric = Literal["mae", "rmse", "mse", "accuracy"]


class Threshold(BaseModel):
    """A bound a metric must hold for the model to be blessed: max, min or both."""

    model_config = PARAMS_CONFIG

    max: float | None = Field(None, description="The metric must be at most this.")
    min: float | None = Field(None, description="The metric must be at least this.")

    @model_validator(mode="after")
    def _bounded(self) -> Threshold:
        if self.max is None and self.min is None:
            raise ValueError("{max: x} and/or {min: y}")
        return self


class EvaluateParams(StageParams):
    """evaluate's parameters: which metrics, per which slices, and the bounds for blessing."""

    metrics: list[Metric] | None = Field(None, description=(
        "Default: [mae, rmse] for a regression model, [accuracy] for a classifier (a model "
        "whose output has one unit per class)."))
    slices: list[str] = Field(default_factory=list, description=(
        "Columns whose values group the eval examples (by the label's record)."))
    thresholds: dict[Metric, Threshold] = Field(default_factory=dict, description=(
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
    batches = load_batches(ctx.run, plan_of(read_manifest(ctx.run / train["input"])))
    if not len(batches.eval_starts):
        raise ConfigError(f"{stage.where}: the eval split is empty; set batching's "
                          "`eval_fraction` above 0.")
    model = keras.models.load_model(ctx.run / ctx.source / "model.keras")
    classify = is_classifier(model.output_shape, train["model_spec"]["num_classes"])
    names = list(p.metrics or (["accuracy"] if classify else ["mae", "rmse"]))
    _check(stage, p.slices, batches)
    labels, predicted, targets = _predict(model, batches, classify)
    metrics = _metrics(names, labels, predicted)
    slices = {column: {str(value): _metrics(names, labels[mask], predicted[mask])
                       for value, mask in _groups(batches.columns[column][targets])}
              for column in p.slices}
    thresholds = {k: v.model_dump(exclude_none=True) for k, v in p.thresholds.items()}
    return StageResult({"examples": len(labels), "metrics": metrics, "slices": slices,
                        "classifier": classify,
                        **_bless(stage, ctx, names[0], metrics, thresholds)},
                       records_in=len(batches.seq))


def is_classifier(output_shape: Any, num_classes: int | None) -> bool:
    """A model is a classifier when its output has one unit per class (softmax, logits).

    Decided from the model, not from how it was made: a user's classifier and the preset
    are judged alike, and a regression on integer labels (one output unit) stays one.
    """
    units = output_shape[-1] if output_shape else None
    return num_classes is not None and units is not None and units > 1


def _check(stage: StageSpec[EvaluateParams], slices: list[str], batches: Batches) -> None:
    for column in slices:
        if column not in batches.columns:
            raise ConfigError(f"{stage.where}: slice column {column!r} is not in the records;"
                              f"{did_you_mean(column, list(batches.columns))} columns: "
                              f"{', '.join(batches.columns)}.")
        if len(np.unique(batches.columns[column])) > MAX_SLICES:
            raise ConfigError(f"{stage.where}: slice column {column!r} has more than "
                              f"{MAX_SLICES} values; slice by a column of a few groups.")


def _predict(model: Any, batches: Batches, classify: bool
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels, predicted = [], []
    for x, y, _ in batches.batches("eval"):
        out = np.asarray(model.predict_on_batch(x))
        predicted.append(out.argmax(axis=-1) if classify else out.reshape(-1))
        labels.append(y)
    targets = batches.targets(batches.order("eval", 0))
    if batches.plan.remainder == "drop":
        targets = targets[:sum(len(y) for y in labels)]
    return np.concatenate(labels).astype(np.float64), np.concatenate(predicted), targets


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
    baseline = _last_blessed(ctx, stage.name)
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


def _last_blessed(ctx: StageContext, stage: str) -> dict[str, Any] | None:
    """The newest blessed evaluation of the same pipeline and stage among the other runs."""
    found = []
    for manifest_path in (ctx.root / "runs").glob(f"*/{stage}/manifest.json"):
        run = manifest_path.parent.parent
        if run == ctx.run or not (run / "run.json").exists():
            continue
        if json.loads((run / "run.json").read_text()).get("pipeline") != ctx.pipeline:
            continue
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("blessed"):
            found.append((manifest["committed_at"], run.name, manifest))
    if not found:
        return None
    _, run_id, manifest = max(found)
    return {"run_id": run_id, "metrics": manifest["metrics"]}


SPEC = ComponentSpec("evaluate", EvaluateParams, run_stage, reads="model", writes="evaluation",
                     doc="A model + the eval split -> metrics, slices and a blessing.")
