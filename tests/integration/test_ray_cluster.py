"""A two-node Ray cluster started by the test: the data stages and training on 2 workers.

The driver always runs as a subprocess (the CLI): the session's local Ray (`ray_session` in
conftest) lives in the pytest process, and one process joins one Ray.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from seqline.components import train
from seqline.pipeline.artifacts import read_manifest
from tests.conftest import REPO
from tests.integration.test_training import example_folder
from tests.ray_cluster import ray_cluster  # noqa: F401  (fixture)
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DATA_STAGES = ("read", "examples", "features", "batches")
# The final loss of 2 Ray Train workers (MultiWorkerMirroredStrategy) against 2 replicas in one
# process (MirroredStrategy): the same slices feed the same replicas, but the gradient all-reduce
# sums in another order across processes than across devices, and float32 addition is not
# associative (about 1e-7 relative per step); 37 steps of a GRU stay far within 1e-3 (seen:
# 1e-7). A batch fed to the wrong worker, or a missed batch, moves the loss by far more.
LOSS_RTOL = 1e-3
# What TensorFlow's Python side logs on Ray Train's workers unless seqline quiets it there.
TENSORFLOW_PYTHON_LOGS = re.compile(r"INFO:tensorflow|MultiWorkerMirroredStrategy with "
                                    r"cluster_spec|Collective all_reduce")


def _data_pipeline(tmp_path):
    """The weather example up to batching (the data job), in a temp folder."""
    folder = example_folder(tmp_path)
    text = (folder / "pipeline.yaml").read_text()
    (folder / "data.yaml").write_text(text[:text.index("  - name: model")])
    return folder / "data.yaml"


def _seqline(*args, env=None, cwd=REPO):
    proc = subprocess.run([sys.executable, "-m", "seqline.orchestration.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=900, cwd=cwd,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _records(root, run_id):
    """Per data stage: its shards' checksums, counts and seq ranges, and the batching plan."""
    stages = {}
    for stage in DATA_STAGES:
        manifest = read_manifest(root / "runs" / run_id / stage) if not isinstance(root, str) \
            else json.loads(_s3_text(f"{root}/runs/{run_id}/{stage}/manifest.json"))
        stages[stage] = ([(s["sha256"], s["records"], s["seq_first"], s["seq_last"])
                          for s in manifest.get("shards") or []], manifest.get("train"))
    return stages


def _s3_text(url):
    import fsspec

    with fsspec.open(url, "r") as f:
        return f.read()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    pipeline = _data_pipeline(tmp)
    _seqline("run", pipeline, "--runner", "local", "--root", tmp / "root", "--run-id", "local")
    return _records(tmp / "root", "local")


def test_ray_cluster_data_job_stores_the_local_runners_records(ray_cluster, local_run,  # noqa: F811
                                                               tmp_path):
    pipeline = _data_pipeline(tmp_path)
    _seqline("run", pipeline, "--runner", "ray", "--ray-address", ray_cluster.address,
             "--root", tmp_path / "root", "--run-id", "cluster", env=ray_cluster.env)
    assert _records(tmp_path / "root", "cluster") == local_run
    _seqline("verify", "--root", tmp_path / "root", "cluster", env=ray_cluster.env)


def test_ray_cluster_data_job_on_an_s3_root(ray_cluster, local_run, s3_root, tmp_path):  # noqa: F811
    pipeline = _data_pipeline(tmp_path)
    _seqline("run", pipeline, "--runner", "ray", "--ray-address", ray_cluster.address,
             "--root", s3_root, "--run-id", "cluster", env=ray_cluster.env)
    assert _records(s3_root, "cluster") == local_run
    assert not (REPO / "s3:").exists()
    _seqline("verify", "--root", s3_root, "cluster", env=ray_cluster.env)


def test_training_on_two_cluster_workers_feeds_the_mirrored_replicas_batches(
        ray_cluster, tmp_path):  # noqa: F811
    """2 Ray Train workers, one per node, against MirroredStrategy over 2 CPU replicas."""
    (tmp_path / "m").mkdir()
    mirrored = example_folder(tmp_path / "m", epochs=1, cpu_replicas=2)
    _seqline("run", mirrored / "pipeline.yaml", "--runner", "local", "--root",
             tmp_path / "m" / "root", "--run-id", "mirrored")
    reference = read_manifest(tmp_path / "m" / "root" / "runs" / "mirrored" / "model")
    (tmp_path / "w").mkdir()
    workers = example_folder(tmp_path / "w", epochs=1, workers=2)
    # A relative --root: the workers run in Ray's own folders, and must still find the run.
    # Piped, as in a CI log: the JSON whole on stdout, none of TensorFlow's Python logs.
    done = _seqline("run", workers / "pipeline.yaml", "--runner", "ray", "--ray-address",
                    ray_cluster.address, "--root", "root", "--run-id", "w", "--json",
                    env=ray_cluster.env, cwd=tmp_path / "w")
    assert next(s for s in json.loads(done.stdout)["stages"]
                if s["name"] == "model")["status"] == "succeeded"
    assert not TENSORFLOW_PYTHON_LOGS.search(done.stderr), done.stderr
    root = tmp_path / "w" / "root"
    _seqline("verify", "--root", root, "w", env=ray_cluster.env)
    run = root / "runs" / "w"
    model = read_manifest(run / "model")
    assert (model["workers"], model["replicas"]) == (2, 2)
    mirrored_batches = reference["epochs"][0]["batches"]
    batches = model["epochs"][0]["batches"]
    assert [(b["first"], b["last"], b["replicas"]) for b in batches] == \
        [(b["first"], b["last"], b["replicas"]) for b in mirrored_batches]
    assert [b["workers"] for b in batches] == [b["replicas"] for b in mirrored_batches]
    assert model["epochs"][0]["seq_digest"] == reference["epochs"][0]["seq_digest"]
    assert model["final_metrics"]["loss"] == pytest.approx(
        reference["final_metrics"]["loss"], rel=LOSS_RTOL)
    # verify's audit of the workers' slices can fail: one slice moved by one record.
    problems: list[str] = []
    train.verify_audit(run, model, problems)
    assert problems == []
    tampered = json.loads(json.dumps(model))
    tampered["epochs"][0]["batches"][3]["workers"][1][0] += 1
    train.verify_audit(run, tampered, problems)
    assert problems == ["audit: epoch 0 batch 3: the workers' slices differ from the batch "
                        "recomputed from the records"]
    files = {p.name for p in (run / "model").iterdir()}
    assert {"model.keras", "saved_model", "checkpoints", "tensorboard"} <= files
