"""batching -> train -> evaluate on the real weather series: runners, resume, replicas, audit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from seqline.components import COMPONENTS, train
from seqline.orchestration.api import run_pipeline
from seqline.orchestration.runners import make_runner
from seqline.orchestration.verify import verify_run
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import StageContext
from tests.conftest import REPO

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "data" / "seattle_weather"


def example_folder(tmp_path, epochs=2, **train_params):
    """The example pipeline in a temp folder, with fewer epochs (and any train params)."""
    folder = tmp_path / "pipeline"
    folder.mkdir()
    for name in ("seattle-weather.csv", "features.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    params = {"model": "sequence_forecasting", "epochs": epochs, "learning_rate": 0.003,
              **train_params}
    text = (EXAMPLE / "pipeline.yaml").read_text().replace(
        "params: {model: sequence_forecasting, epochs: 15, learning_rate: 0.003}",
        f"params: {json.dumps(params)}")
    assert text != (EXAMPLE / "pipeline.yaml").read_text()
    (folder / "pipeline.yaml").write_text(text)
    return folder


RUNNERS = ("local", "beam", "ray")


@pytest.fixture(scope="module")
def console(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess[str]]]:
    """The example, 2 epochs, once per runner, by the real `seqline` executable as a user runs
    it (each runner in its own process, verified): the root, and what each run said."""
    root = tmp_path_factory.mktemp("training") / "root"
    pipeline = example_folder(root.parent) / "pipeline.yaml"
    exe = Path(sys.executable).parent / "seqline"
    return root, {runner: subprocess.run(
        [str(exe), "run", str(pipeline), "--runner", runner, "--root", str(root),
         "--run-id", runner, "--workers", "2", "--no-cache"],
        capture_output=True, text=True, timeout=300) for runner in RUNNERS}


@pytest.fixture(scope="module")
def runs(console) -> Path:
    """The runs folder of the three runs above, each run named by its runner."""
    root, said = console
    assert {r: p.returncode for r, p in said.items()} == dict.fromkeys(RUNNERS, 0), {
        r: p.stderr[-3000:] for r, p in said.items() if p.returncode}
    return root / "runs"


@pytest.mark.e2e
@pytest.mark.parametrize("runner", RUNNERS)
def test_run_example_pipeline_with_the_console_script(console, runs, runner):
    """Every stage on every runner, as the terminal tells it (2 epochs rather than 15: the
    point is every stage on every runner, not the model)."""
    stdout = console[1][runner].stdout
    assert f"Run {runner} succeeded" in stdout
    assert "All artifacts hold the ordering contract." in stdout  # the verify table
    for stage in ("read", "examples", "features"):
        manifest = read_manifest(runs / runner / stage)
        assert manifest["status"] == "succeeded"
        assert (manifest["records_in"], manifest["records_out"]) == (1461, 1461)
        assert (manifest["seq_min"], manifest["seq_max"]) == (0, 1460)
        assert str(runs / runner / stage) in " ".join(stdout.split())


def test_training_is_identical_on_every_runner(runs):
    manifests = {r: read_manifest(runs / r / "model") for r in RUNNERS}
    plans = {r: read_manifest(runs / r / "batches") for r in manifests}
    assert plans["local"]["train"] == plans["beam"]["train"] == plans["ray"]["train"]
    epochs = {r: [(e["seq_digest"], e["batches"]) for e in m["epochs"]]
              for r, m in manifests.items()}
    assert epochs["local"] == epochs["beam"] == epochs["ray"]
    losses = {r: m["final_metrics"]["loss"] for r, m in manifests.items()}
    assert losses["local"] == losses["beam"] == losses["ray"]


def test_training_audit_matches_the_plan_and_verifies(runs):
    model = read_manifest(runs / "local" / "model")
    plan = read_manifest(runs / "local" / "batches")
    assert [e["seq_digest"] for e in model["epochs"]] == [plan["train"]["seq_digest"]] * 2
    batches = model["epochs"][0]["batches"]
    assert len(batches) == plan["train"]["batches"] == 37
    assert batches[0]["first"] == 14  # the first window's label is day 14 (days 0-13 before it)
    assert all(a["last"] < b["first"] for a, b in zip(batches, batches[1:], strict=False))
    assert all(check.ok for check in verify_run(runs.parent, "local"))


def test_training_audit_catches_an_epoch_fed_in_another_order(runs, tmp_path):
    shutil.copytree(runs.parent, tmp_path / "root")
    path = tmp_path / "root" / "runs" / "local" / "model" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["epochs"][1]["seq_digest"] = "0" * 32
    path.write_text(json.dumps(manifest))
    problems = [p for c in verify_run(tmp_path / "root", "local") for p in c.problems]
    assert problems == ["audit: epoch 1 fed the model a seq stream that differs from the train "
                        "split recomputed from the records"]


def test_training_writes_checkpoints_logs_and_a_savedmodel(runs):
    model_dir = runs / "local" / "model"
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == [
        "epoch-001.weights.h5", "epoch-002.weights.h5"]
    assert any((model_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert (model_dir / "saved_model" / "saved_model.pb").exists()
    evaluation = read_manifest(runs / "local" / "evaluation")
    assert set(evaluation["metrics"]) == {"mae", "rmse"}
    assert set(evaluation["slices"]["weather"]) >= {"rain", "sun"}


class _Interrupt(Exception):
    pass


def test_training_resumed_after_an_interruption_ends_with_the_same_weights(tmp_path):
    import keras

    folder = example_folder(tmp_path, epochs=3)
    spec = load_pipeline(folder / "pipeline.yaml", COMPONENTS)
    prefix = spec.__class__(spec.name, spec.stages[:4], spec.base_dir)  # up to batching
    with make_runner("local", mode="thread") as runner:
        run_pipeline(prefix, runner, tmp_path / "root", "r")
    run = tmp_path / "root" / "runs" / "r"
    stage = spec.stage("model")

    def context(name):
        (tmp_path / name).mkdir()
        return StageContext(run, tmp_path / name, "batches", folder, spec.name)

    class StopAfterEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise _Interrupt()

    train.run_stage(stage, context("straight"))
    with pytest.raises(_Interrupt):
        train.run_stage(stage, context("interrupted"), callbacks=[StopAfterEpoch()])
    resumed = train.run_stage(stage, context("resumed"))
    assert [e["epoch"] for e in resumed.manifest["epochs"]] == [2]  # 0 and 1 not redone
    weights = [keras.models.load_model(tmp_path / n / "model.keras").get_weights()
               for n in ("straight", "resumed")]
    for a, b in zip(*weights, strict=True):
        np.testing.assert_array_equal(a, b)


CLASSIFIER = """
name: classes
stages:
  - {name: read, component: ingest, params: {paths: [data.csv], format: csv}}
  - {name: examples, component: tfrecord_write}
  - {name: batches, component: batching, params: {batch_size: 8, label: k, features: [x]}}
  - name: model
    component: train
    params: {model: tabular_classification, epochs: 1, num_classes: 2}
"""


def test_training_a_label_beyond_the_classes_fails_naming_stage_label_and_seq(tmp_path):
    """Labels are checked as batches pass: the first label >= num_classes stops the run with
    the stage, the value and its seq (not TensorFlow's wrapper of the error)."""
    labels = [i % 2 for i in range(60)]
    labels[30] = 3  # a train record (the last 12 of 60 are eval)
    (tmp_path / "data.csv").write_text("x,k\n" + "".join(
        f"{i / 10},{k}\n" for i, k in enumerate(labels)))
    (tmp_path / "pipeline.yaml").write_text(CLASSIFIER)
    spec = load_pipeline(tmp_path / "pipeline.yaml", COMPONENTS)
    with make_runner("local", mode="thread") as runner, pytest.raises(StageError, match=(
            r"stage 'model' \(line \d+ of the pipeline file\): "
            r"the label 'k' is 3 at seq 30, but the model has 2 "
            r"classes .* Set `num_classes` on the train stage")) as error:
        run_pipeline(spec, runner, tmp_path / "root", "r")
    assert (error.value.stage, error.value.seq) == ("model", 30)


def test_training_on_two_mirrored_cpu_replicas(tmp_path):
    """MirroredStrategy over two logical CPU devices, in a fresh process (TF fixes its devices
    when it starts); every global batch is split into contiguous per-replica slices."""
    folder = example_folder(tmp_path, epochs=1, cpu_replicas=2)
    exe = [sys.executable, "-m", "seqline.orchestration.cli"]
    proc = subprocess.run(
        [*exe, "run", str(folder / "pipeline.yaml"), "--root", str(tmp_path / "root"),
         "--run-id", "mirrored", "--runner", "local"],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    model = read_manifest(tmp_path / "root" / "runs" / "mirrored" / "model")
    assert (model["strategy"], model["replicas"]) == ("MirroredStrategy", 2)
    first = model["epochs"][0]["batches"][0]
    assert first["replicas"] == [[first["first"], first["first"] + 15],
                                 [first["first"] + 16, first["last"]]]
    check = subprocess.run([sys.executable, "-c", SLICES], capture_output=True, text=True,
                           timeout=300)
    assert check.stdout.strip() == "[[0, 1, 2], [3, 4, 5]]", check.stderr[-2000:]


SLICES = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(6).batch(6))))
print([t.numpy().tolist() for t in strategy.experimental_local_results(batch)])
"""


def test_training_on_workers_without_ray_is_a_config_error_naming_the_stage(tmp_path):
    folder = example_folder(tmp_path, workers=2)
    spec = load_pipeline(folder / "pipeline.yaml", COMPONENTS)
    context = StageContext(tmp_path / "run", tmp_path / "out", "batches", folder, spec.name)
    with pytest.raises(ConfigError, match=r"stage 'model' \(line \d+ of the pipeline file\): "
                                          r"workers 2 trains "
                                          r"through Ray Train; run with --runner ray"):
        train.run_stage(spec.stage("model"), context)


def test_training_worker_audits_that_disagree_fail_the_stage(tmp_path):
    from seqline.components.train.workers import merge_audits

    spec = load_pipeline(example_folder(tmp_path, workers=2) / "pipeline.yaml", COMPONENTS)
    epoch = {"epoch": 0, "seq_digest": "a", "worker_digest": "x",
             "batches": [{"first": 0, "last": 3, "replicas": [[0, 1], [2, 3]], "worker": [0, 1]}]}
    other = {**epoch, "worker_digest": "y", "batches": [{**epoch["batches"][0], "worker": [2, 3]}]}
    merged = merge_audits(spec.stage("model"), [[epoch], [other]])
    assert merged[0]["batches"][0]["workers"] == [[0, 1], [2, 3]]
    assert merged[0]["worker_digests"] == ["x", "y"]
    with pytest.raises(StageError, match="the workers were fed different global batches"):
        merge_audits(spec.stage("model"), [[epoch], [{**other, "seq_digest": "b"}]])
