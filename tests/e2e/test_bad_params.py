"""Every component's bad parameters, through the CLI: exit 2 before anything runs, each with its
own message naming the file, the line, the stage and the field; the JSON Schema agrees."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from seqline.components.schema import SCHEMA_FILE, pipeline_schema
from seqline.orchestration.cli import app
from tests.conftest import REPO, USERFNS

PIPELINE = {
    "name": "t",
    "stages": [
        {"name": "read", "component": "ingest",
         "params": {"format": "csv", "paths": ["in.csv"], "block_records": 4}},
        {"name": "write", "component": "tfrecord_write", "params": {"shard_records": 8}},
        {"name": "features", "component": "preprocess", "params": {"fn": "latency:double"}},
        {"name": "batches", "component": "batching", "params": {"batch_size": 4, "label": "x"}},
        {"name": "model", "component": "train",
         "params": {"model": "tabular_regression", "epochs": 1}},
        {"name": "evaluation", "component": "evaluate", "params": {"metrics": ["mae"]}},
    ],
}
STAGE = {s["name"]: i for i, s in enumerate(PIPELINE["stages"])}

# (stage, parameters set, the message; the line is the parameter's in the dumped file)
BAD = [
    # ingest
    ("read", {"format": "cvs"}, r"parameter format \(line \d+\): expected 'csv', 'jsonl', "
     r"'parquet' or 'tfrecord', found 'cvs'. Did you mean 'csv'\?"),
    ("read", {"block_records": "many"}, r"parameter block_records \(line \d+\): expected a "
     r"valid integer, found 'many'"),
    ("read", {"block_records": 0}, r"parameter block_records \(line \d+\): expected greater "
     r"than or equal to 1, found 0"),
    ("read", {"colour": "red"}, r"parameter colour \(line \d+\): unknown parameter. Known: "
     r"block_records, format, (\S+, )*paths, (\S+, )*schema"),
    # tfrecord_write
    ("write", {"compression": "gz"}, r"parameter compression \(line \d+\): expected 'gzip' or "
     r"'none', found 'gz'. Did you mean 'gzip'\?"),
    ("write", {"shard_records": 1.5}, r"parameter shard_records \(line \d+\): expected a valid "
     r"integer, found 1.5"),
    ("write", {"compression_level": 13}, r"parameter compression_level \(line \d+\): expected "
     r"less than or equal to 12, found 13"),
    ("write", {"shards": 3}, r"parameter shards \(line \d+\): unknown parameter. Did you mean "
     r"'shard_records'\?"),
    # preprocess
    ("features", {"batch_format": "panda"}, r"parameter batch_format \(line \d+\): expected "
     r"'pyarrow', 'numpy', 'pandas' or 'record', found 'panda'. Did you mean 'pandas'\?"),
    ("features", {"fn_kwargs": [1]}, r"parameter fn_kwargs \(line \d+\): expected a valid "
     r"dictionary, found \[1\]"),
    ("features", {"compression_level": -1}, r"parameter compression_level \(line \d+\): "
     r"expected greater than or equal to 0, found -1"),
    ("features", {"fn_args": {}}, r"parameter fn_args \(line \d+\): unknown parameter. Did "
     r"you mean 'fn_kwargs'\?"),
    # batching
    ("batches", {"split": "tial"}, r"parameter split \(line \d+\): expected 'tail' or 'hash', "
     r"found 'tial'. Did you mean 'tail'\?"),
    ("batches", {"shuffle": "example"}, r"parameter shuffle \(line \d+\): expected 'examples' "
     r"or 'records', found 'example'. Did you mean 'examples'\?"),
    ("batches", {"batch_size": "32"}, r"parameter batch_size \(line \d+\): expected a valid "
     r"integer, found '32'"),
    ("batches", {"eval_fraction": 1.0}, r"parameter eval_fraction \(line \d+\): expected less "
     r"than 1, found 1.0"),
    ("batches", {"batchsize": 3}, r"parameter batchsize \(line \d+\): unknown parameter. Did "
     r"you mean 'batch_size'\?"),
    # train
    ("model", {"model": "sequence_forcasting"}, r"parameter model \(line \d+\): expected a "
     r"preset \(.*\) or 'module:function', found 'sequence_forcasting'. Did you mean "
     r"'sequence_forecasting'\?"),
    ("model", {"seed": "seven"}, r"parameter seed \(line \d+\): expected a valid integer, "
     r"found 'seven'"),
    ("model", {"epochs": 0}, r"parameter epochs \(line \d+\): expected greater than or equal "
     r"to 1, found 0"),
    ("model", {"learning_rat": 0.1}, r"parameter learning_rat \(line \d+\): unknown parameter. "
     r"Did you mean 'learning_rate'\?"),
    # evaluate
    ("evaluation", {"metrics": ["maee"]}, r"parameter metrics.0 \(line \d+\): expected 'mae', "
     r"'rmse', 'mse' or 'accuracy', found 'maee'. Did you mean 'mae'\?"),
    ("evaluation", {"slices": "weather"}, r"parameter slices \(line \d+\): expected a valid "
     r"list, found 'weather'"),
    ("evaluation", {"thresholds": {"accuracy": {"min": 1.5}}}, r"parameter "
     r"thresholds.accuracy.min \(line \d+\): expected less than or equal to 1, found 1.5"),
    ("evaluation", {"thresholds": {"maee": {"max": 1}}}, r"parameter thresholds.maee "
     r"\(line \d+\): unknown parameter. Did you mean 'mae'\? Known: accuracy, mae, mse, rmse"),
]


def _pipeline(stage: str, params: dict) -> dict:
    data = json.loads(json.dumps(PIPELINE))
    data["stages"][STAGE[stage]]["params"].update(params)
    return data


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(40)))
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    return tmp_path


@pytest.mark.parametrize(("stage", "params", "message"), BAD,
                         ids=[f"{s}-{next(iter(p))}" for s, p, _ in BAD])
def test_run_bad_parameter_exits_2_naming_file_line_stage_and_field(folder, stage, params,
                                                                    message):
    text = yaml.safe_dump(_pipeline(stage, params), sort_keys=False)
    (folder / "p.yaml").write_text(text)
    result = CliRunner().invoke(app, ["run", str(folder / "p.yaml"), "--root",
                                      str(folder / "root")])
    assert result.exit_code == 2, result.output
    line = next(i for i, row in enumerate(text.splitlines(), 1) if f"name: {stage}" in row)
    where = rf"error: \S*p.yaml: stage '{stage}' \(line {line}\), "
    assert re.search(where + message, result.output), result.output
    assert not (folder / "root").exists()  # nothing ran, nothing was created


@pytest.mark.parametrize(("stage", "params"), [b[:2] for b in BAD],
                         ids=[f"{s}-{next(iter(p))}" for s, p, _ in BAD])
def test_schema_rejects_each_bad_parameter(stage, params):
    validator = jsonschema.Draft202012Validator(pipeline_schema())
    assert validator.is_valid(PIPELINE)
    assert list(validator.iter_errors(_pipeline(stage, params)))


def test_schema_accepts_the_shipped_pipelines_and_the_table_base():
    validator = jsonschema.Draft202012Validator(pipeline_schema())
    jsonschema.Draft202012Validator.check_schema(pipeline_schema())
    for path in sorted(REPO.glob("data/**/*.yaml")):
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, (path, errors)
    assert validator.is_valid(PIPELINE)


def test_shipped_schema_is_the_generated_one():
    """The file editors point at is regenerated whenever a parameter model changes."""
    assert json.loads(SCHEMA_FILE.read_text()) == pipeline_schema(), (
        "regenerate it: seqline schema > components/pipeline.schema.json")


def test_schema_command_prints_it():
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == pipeline_schema()


def test_training_on_workers_off_ray_exits_2_before_any_stage_runs(folder):
    """`workers: N` trains through Ray Train: on another runner that is said by the plan,
    before the stages ahead of it run (it was said by the train stage, after them)."""
    (folder / "p.yaml").write_text(yaml.safe_dump(_pipeline("model", {"workers": 2}),
                                                  sort_keys=False))
    for extra in ([], ["--dry-run"]):
        result = CliRunner().invoke(app, ["run", str(folder / "p.yaml"), "--root",
                                          str(folder / "root"), "--run-id", "w", *extra])
        assert result.exit_code == 2, result.output
        assert re.fullmatch(r"error: stage 'model' \(line \d+ of the pipeline file\): workers 2 "
                            r"trains through Ray Train; run with --runner ray .*, or set workers "
                            r"1\.\n", result.output), result.output
    assert not (folder / "root" / "runs" / "w").exists()  # no stage ran

