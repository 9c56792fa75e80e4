"""The data stages end to end: the example pipeline on every runner, budgets, stored inputs."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil

import numpy as np
import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.api import run_pipeline
from seqline.orchestration.runners import make_runner
from seqline.orchestration.verify import verify_run
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.config import load_pipeline, parse_pipeline
from seqline.pipeline.deadletters import read_dead_letters
from seqline.pipeline.errors import StageError
from tests.conftest import REPO, USERFNS

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "data" / "seattle_weather" / "pipeline.yaml"
RUNNERS = {"local": {}, "beam": {"mode": "multi_processing"}, "ray": {}}


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory, request):
    """The example's data half (ingest, tfrecord_write, preprocess) once per runner."""
    request.getfixturevalue("ray_session")
    root = tmp_path_factory.mktemp("runs")
    example = load_pipeline(EXAMPLE, COMPONENTS)
    spec = dataclasses.replace(example, stages=example.stages[:3])
    for name, options in RUNNERS.items():
        with make_runner(name, workers=2, **options) as runner:
            run_pipeline(spec, runner, root, name)
    return root


def _shard_bytes(stage_dir):
    manifest = read_manifest(stage_dir)
    return [hashlib.sha256((stage_dir / s["path"]).read_bytes()).hexdigest()
            for s in manifest["shards"]]


@pytest.mark.parametrize("stage", ["examples", "features"])
def test_example_artifacts_are_byte_identical_on_every_runner(example_runs, stage):
    shards = {name: _shard_bytes(example_runs / "runs" / name / stage) for name in RUNNERS}
    assert len(shards["local"]) == 6
    assert shards["beam"] == shards["local"] and shards["ray"] == shards["local"]


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_example_run_verifies_on_every_runner(example_runs, runner):
    checks = verify_run(example_runs, runner)
    assert [(c.stage, c.records, c.ok) for c in checks] == [
        ("read", 1461, True), ("examples", 1461, True), ("features", 1461, True)]


def test_example_features_read_by_plain_tf_data_in_source_order(example_runs):
    tf = pytest.importorskip("tensorflow")
    stage_dir = example_runs / "runs" / "local" / "features"
    files = [str(stage_dir / s["path"]) for s in read_manifest(stage_dir)["shards"]]
    spec = {"__seq__": tf.io.FixedLenFeature([], tf.int64),
            "date": tf.io.FixedLenFeature([], tf.string),
            "temp_range": tf.io.FixedLenFeature([], tf.float32)}
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
    parsed = next(iter(dataset.map(lambda r: tf.io.parse_example(r, spec))))
    np.testing.assert_array_equal(parsed["__seq__"].numpy(), np.arange(1461))
    assert parsed["date"].numpy()[0] == b"2012/01/01"
    assert parsed["temp_range"].numpy()[0] == pytest.approx(12.8 - 5.0)


BUDGETED = """
name: budgeted
errors: {max_fraction: 0.1}
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 4,
     schema: {x: int64}}}
  - {name: write, component: tfrecord_write, params: {shard_records: 3, compression: none}}
  - {name: double, component: preprocess, params: {fn: "latency:double"}}
  - {name: evens, component: preprocess, inputs: write, params: {fn: "latency:keep_even"}}
"""


def _spec(tmp_path, csv):
    """BUDGETED in its own folder, with the test user functions and `csv` as in.csv."""
    folder = tmp_path / "pipeline"
    folder.mkdir()
    shutil.copy(USERFNS / "latency.py", folder / "latency.py")
    (folder / "in.csv").write_text(csv)
    return parse_pipeline(BUDGETED, folder, COMPONENTS)


def test_budgeted_run_keeps_dead_letters_and_reads_stored_records(tmp_path):
    rows = "".join(f"{i}\n" if i != 13 else "thirteen\n" for i in range(40))
    with make_runner("local", workers=2) as runner:
        run_pipeline(_spec(tmp_path, "x\n" + rows), runner, tmp_path, "r1")
    run = tmp_path / "runs" / "r1"
    letters = read_dead_letters(run / "read")
    assert [(d.seq, d.line, d.raw) for d in letters] == [(13, 15, "thirteen")]
    assert "invalid value 'thirteen'" in letters[0].reason
    evens = read_manifest(run / "evens")
    assert (evens["input"], evens["records_in"], evens["filtered"]) == ("write", 39, 19)
    assert all(c.ok for c in verify_run(tmp_path, "r1"))


def test_budget_exceeded_fails_the_run_and_commits_nothing(tmp_path):
    spec = _spec(tmp_path, "x\n" + "".join(f"{i}\n" for i in range(8)) + "a\nb\n")
    with make_runner("local", workers=2) as runner, \
            pytest.raises(StageError, match=r"stage 'read' exceeded its error budget: 2 of "
                                            r"10 records were bad \(20.00%\).*seq 8"):
        run_pipeline(spec, runner, tmp_path, "r2")
    assert not (tmp_path / "runs" / "r2" / "read").exists()
