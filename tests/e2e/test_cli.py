"""`seqline run` as users run it: exit codes, messages, manifests (the example on every
runner by the console script: tests/integration/test_training.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from tests.conftest import USERFNS

GOOD = """\
name: t
stages:
  - name: read
    component: ingest
    params: {format: csv, paths: ["in.csv"], block_records: 4}
  - name: features
    component: preprocess
    params: {fn: "latency:double"}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(10)))
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    return tmp_path


def _cli(folder: Path, text: str, *args: str):
    (folder / "p.yaml").write_text(text)
    return CliRunner().invoke(app, ["run", str(folder / "p.yaml"), "--root",
                                    str(folder / "root"), "--run-id", "r1", *args])


BAD_FILES = [
    ("stages:\n  - name: read\n    component: [ingest\n", r"malformed YAML at line 4"),
    (GOOD.replace("component: preprocess", "component: preproces"),
     r"unknown component 'preproces'. Did you mean 'preprocess'\?"),
    (GOOD.replace("in.csv", "nowhere.csv"), r"input file 'nowhere.csv' not found"),
    (GOOD.replace("name: features", "name: read"), r"duplicate stage name 'read'"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_run_bad_pipeline_file_exits_2_before_anything_runs(folder, text, message):
    result = _cli(folder, text)
    assert result.exit_code == 2, result.output
    assert "error: " in result.output
    assert _matches(message, result.output)
    assert not (folder / "root").exists()  # validated before anything ran


def test_run_usage_error_exits_2(folder):
    assert _cli(folder, GOOD, "--runner", "spark").exit_code == 2


def test_run_failing_function_exits_1_naming_stage_block_and_seq(folder):
    result = _cli(folder, GOOD.replace("latency:double", "latency:boom_at")
                  .replace('"latency:boom_at"}', '"latency:boom_at", fn_kwargs: {seq: 6}}'))
    assert result.exit_code == 1, result.output
    expected = r"stage 'features' failed on seq 6 \(block 1\): ValueError"
    assert _matches(expected, result.output)
    run = json.loads((folder / "root/runs/r1/run.json").read_text())
    assert run["status"] == "failed"
    assert not (folder / "root/runs/r1/features").exists()  # nothing half-written committed


def test_run_same_run_id_twice_exits_2(folder):
    """The id of a run that succeeded is taken, with nothing to finish: --resume is offered
    for one that did not."""
    assert _cli(folder, GOOD).exit_code == 0
    result = _cli(folder, GOOD)
    assert result.exit_code == 2 and "already used" in result.output
    assert "--resume" not in result.output
    failing = GOOD.replace("latency:double", "latency:boom_at").replace(
        '"latency:boom_at"}', '"latency:boom_at", fn_kwargs: {seq: 6}}')
    assert _cli(folder, failing, "--run-id", "r2").exit_code == 1
    again = _cli(folder, failing, "--run-id", "r2")
    assert again.exit_code == 2 and "add --resume (resume=True) to finish it" in again.output


BAD_INPUTS = [
    ("malformed CSV row", "x\n1\n2,3\n", {}, GOOD,
     r"stage 'read' \(line 3 of the pipeline file\): bad record in \S+in\.csv, line 3, seq 1: "
     r"CSV parse error: Expected 1 columns, got 2: 2,3; the line: '2,3'. Fix the input, or give "
     r"the pipeline an error budget"),
    ("wrong column type", "x\n1\ntwo\n", {}, GOOD.replace("block_records: 4",
                                                          "block_records: 4, schema: {x: int64}"),
     r"line 3, seq 1: CSV column #0: CSV conversion error to int64: invalid value 'two'"),
    ("empty file", "", {}, GOOD, r"in\.csv is empty: a CSV file needs at least a header line"),
    ("unreadable TFRecord", None, {"in.tfrecord": b"\x00" * 40},
     GOOD.replace("format: csv", "format: tfrecord").replace("in.csv", "in.tfrecord"),
     r"unreadable TFRecord file: \S+in\.tfrecord: record 0 at byte 0 has a corrupt length"),
    ("function returns the wrong type", None, {}, GOOD.replace("double", "not_a_batch"),
     r"stage 'features', block 0 \(first seq 0\): the function returned list, expected a "
     r"pyarrow\.RecordBatch"),
    ("function drops __seq__", None, {}, GOOD.replace("double", "drop_seq"),
     r"stage 'features', block 0 \(first seq 0\): the output has no '__seq__' column"),
]


@pytest.mark.parametrize(("csv", "files", "text", "message"), [c[1:] for c in BAD_INPUTS],
                         ids=[c[0] for c in BAD_INPUTS])
def test_run_bad_input_exits_1_with_its_message(folder, csv, files, text, message):
    if csv is not None:
        (folder / "in.csv").write_text(csv)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    result = _cli(folder, text)
    assert result.exit_code == 1, result.output
    assert _matches("Run failed: .*" + message, result.output), result.output


def _matches(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, " ".join(text.split())) is not None


ML = """\
name: ml
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [ml.csv]}}
  - {name: write, component: tfrecord_write}
  - {name: batches, component: batching, params: {batch_size: 8, label: y}}
  - {name: model, component: train, params: {model: tabular_regression, epochs: 1}}
  - {name: evaluation, component: evaluate}
"""

BAD_ML = [
    ("unknown label column", ML.replace("label: y", "label: why"), 2,
     r"stage 'batches' \(line 5 of the pipeline file\): "
     r"label column 'why' is not in the records of 'write'; "
     r"columns: x, kind, y"),
    ("non-numeric feature", ML.replace("label: y", "label: y, features: [x, kind]"), 2,
     r"feature 'kind' is string, not a number, and the model takes numbers. Encode it"),
    ("batch size larger than the data", ML.replace("batch_size: 8", "batch_size: 500"), 2,
     r"batch_size 500 is larger than the train split \(32 examples of 40 records\)"),
    ("model function raising", ML.replace("model: tabular_regression", 'model: "badmodel:build"'),
     1, r"stage 'model' \(line 6 of the pipeline file\): "
        r"the model function 'badmodel:build' raised ValueError: "
        r"no layers here"),
]


@pytest.mark.parametrize(("text", "code", "message"), [c[1:] for c in BAD_ML],
                         ids=[c[0] for c in BAD_ML])
def test_run_bad_ml_input_is_named(folder, text, code, message):
    (folder / "ml.csv").write_text("x,kind,y\n" + "".join(f"{i},k{i % 3},{i * 2}\n"
                                                          for i in range(40)))
    (folder / "badmodel.py").write_text("def build(spec):\n"
                                        "    raise ValueError('no layers here')\n")
    result = _cli(folder, text)
    assert result.exit_code == code, result.output
    assert _matches(message, result.output), result.output


CLASSIFIER = '''\
import keras


def build(spec):
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Normalization(mean=spec.mean, variance=spec.variance)(inputs)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model
'''


@pytest.mark.e2e
def test_a_users_classifier_is_evaluated_as_a_classifier(folder):
    """Decided from the model's output (one unit per class), not from a preset's name."""
    (folder / "ml.csv").write_text("x,kind,y\n" + "".join(
        f"{i % 30},k{i % 3},{(i % 30) // 10}\n" for i in range(300)))
    (folder / "myclf.py").write_text(CLASSIFIER)
    text = ML.replace("model: tabular_regression, epochs: 1", 'model: "myclf:build", epochs: 3')
    result = _cli(folder, text.replace("batch_size: 8, label: y", "batch_size: 10, label: y, "
                                       "features: [x], split: hash"))
    assert result.exit_code == 0, result.output
    evaluation = json.loads((folder / "root/runs/r1/evaluation/manifest.json").read_text())
    assert evaluation["classifier"] is True
    assert list(evaluation["metrics"]) == ["accuracy"]
    assert 0.5 < evaluation["metrics"]["accuracy"] <= 1.0  # argmax, not flattened softmax


@pytest.mark.e2e
def test_a_regression_on_integer_labels_stays_a_regression(folder):
    (folder / "ml.csv").write_text("x,kind,y\n" + "".join(f"{i},k{i % 3},{i * 2}\n"
                                                          for i in range(40)))
    result = _cli(folder, ML)
    assert result.exit_code == 0, result.output
    evaluation = json.loads((folder / "root/runs/r1/evaluation/manifest.json").read_text())
    assert evaluation["classifier"] is False and list(evaluation["metrics"]) == ["mae", "rmse"]
