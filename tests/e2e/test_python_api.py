"""The Python API equals the YAML: same spec, same messages, same records and digests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import seqline
from seqline.pipeline.errors import ConfigError
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "seattle_weather"


def weather(base_dir: Path = EXAMPLE) -> seqline.Pipeline:
    """data/seattle_weather/pipeline.yaml, written in Python."""
    return seqline.Pipeline("seattle_weather", [
        seqline.Stage("read", seqline.IngestParams(
            format="csv", paths=["seattle-weather.csv"], block_records=128)),
        seqline.Stage("examples", seqline.TFRecordWriteParams(
            compression="gzip", shard_records=256)),
        seqline.Stage("features", seqline.PreprocessParams(
            fn="features:add_columns", batch_format="pyarrow")),
        seqline.Stage("batches", seqline.BatchingParams(
            batch_size=32, label="temp_max", window=seqline.Window(
                length=14, stride=1, label_offset=1), eval_fraction=0.2)),
        seqline.Stage("model", seqline.TrainParams(
            model="sequence_forecasting", epochs=15, learning_rate=0.003)),
        seqline.Stage("evaluation", seqline.EvaluateParams(
            metrics=["mae", "rmse"], slices=["weather"],
            thresholds=seqline.Thresholds(mae=seqline.ErrorBound(max=4.0)))),
    ], base_dir=base_dir)


def test_python_pipeline_equals_the_example_file():
    assert weather() == seqline.Pipeline.from_yaml(EXAMPLE / "pipeline.yaml")


def test_to_yaml_round_trips():
    pipeline = seqline.Pipeline.from_yaml(EXAMPLE / "pipeline.yaml")
    again = seqline.Pipeline.from_yaml_text(pipeline.to_yaml(), EXAMPLE)
    assert again == pipeline and again.to_yaml() == pipeline.to_yaml()
    assert "block_records: 128" in pipeline.to_yaml()
    assert "compression_level" not in pipeline.to_yaml()  # defaults stay out


def test_python_pipeline_gets_the_yaml_messages(tmp_path):
    with pytest.raises(ConfigError, match=r"stage 'read' \(line 8 of the pipeline file\): "
                                          r"input file "
                                          r"'seattle-weather.csv' not found"):
        seqline.Pipeline.from_yaml(_copy_without_data(tmp_path) / "pipeline.yaml")
    with pytest.raises(ConfigError, match=r"pipeline 'seattle_weather': stage 'read': input "
                                          r"file 'seattle-weather.csv' not found"):
        weather(base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"parameter split: expected 'tail' or 'hash', found "
                                          r"'tial'. Did you mean 'tail'\?"):
        seqline.BatchingParams(batch_size=4, label="y", split="tial")


def _copy_without_data(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE / "pipeline.yaml", tmp_path / "pipeline.yaml")
    shutil.copy(EXAMPLE / "features.py", tmp_path / "features.py")
    return tmp_path


@pytest.mark.e2e
def test_python_run_gives_the_yaml_runs_digests(tmp_path):
    """The same records, splits, epochs and metrics as `seqline run` on the file (a script of
    its own, which, as the CLI, keeps TensorFlow's start-up lines out of its stderr). The
    example with 3 epochs: what is compared is the API against the CLI, not the model."""
    shutil.copytree(EXAMPLE, tmp_path / "job", ignore=shutil.ignore_patterns("__pycache__"))
    pipeline = tmp_path / "job" / "pipeline.yaml"
    pipeline.write_text(pipeline.read_text().replace("epochs: 15", "epochs: 3"))
    root = tmp_path / "root"
    script = ("import json, seqline\n"
              f"pipeline = seqline.Pipeline.from_yaml({str(pipeline)!r})\n"
              f"result = pipeline.run(runner='local', root={str(root)!r}, run_id='py')\n"
              "print(json.dumps([result.status, result.verified]))\n")
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, env=environment, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == ["succeeded", True]
    assert not re.search(r"oneDNN|cuInit|cuda drivers|absl::InitializeLog", done.stderr), \
        done.stderr
    exe = Path(sys.executable).parent / "seqline"
    proc = subprocess.run([str(exe), "run", str(pipeline), "--root", str(root), "--run-id",
                           "yaml", "--no-verify", "--no-cache"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # every stage ran again: a stage reused from run py would be compared with itself
    assert "Run yaml succeeded: ran 6 of 6 stages" in proc.stdout, proc.stdout[-3000:]
    for stage, keys in [("features", ["seq_digest", "shards"]), ("batches", ["train", "eval"]),
                        ("model", ["epochs"]), ("evaluation", ["metrics", "slices"])]:
        py, cli = (json.loads((root / "runs" / run / stage / "manifest.json").read_text())
                   for run in ("py", "yaml"))
        for key in keys:
            assert _digests(py[key]) == _digests(cli[key]), (stage, key)


def _digests(value):
    if isinstance(value, list):
        return [_digests(v) for v in value]
    if isinstance(value, dict):
        return {k: _digests(v) for k, v in value.items()
                if k not in ("seconds", "started", "input_seconds", "input_wait_seconds")}
    return value
