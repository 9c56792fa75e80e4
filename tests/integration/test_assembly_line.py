"""The assembly line: stages overlap, training's first epoch runs on the stream, the read-ahead
is bounded by windows and belts, and order survives random worker latency on every runner."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.api import run_pipeline
from seqline.orchestration.events import BlocksDone, Occupancy
from seqline.orchestration.runners import make_runner
from seqline.orchestration.verify import verify_run
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.config import load_pipeline
from tests.conftest import USERFNS

pytestmark = pytest.mark.integration

ROWS, BLOCK, WORKERS, QUEUE = 12_000, 100, 2, 2
PIPELINE = f"""
name: line
stages:
  - name: read
    component: ingest
    params: {{paths: [data.csv], format: csv, block_records: {BLOCK}}}
  - name: examples
    component: tfrecord_write
    params: {{shard_records: {BLOCK}}}
  - name: features
    component: preprocess
    params:
      fn: latency:skewed
      fn_kwargs: {{base_ms: 25, slow_every: 20, factor: 20, seed: 3}}
  - name: batches
    component: batching
    params: {{batch_size: 32, label: y, features: [x, t], eval_fraction: 0.2}}
  - name: model
    component: train
    params: {{model: tabular_regression, epochs: 2, stats_records: 64}}
"""


@pytest.fixture(scope="module")
def line_runs(tmp_path_factory, request):
    """The line once per runner, with every stage's progress recorded as it happens."""
    import tensorflow  # noqa: F401 - imported up front, so the trainer starts as fast as it can

    request.getfixturevalue("ray_session")
    folder = tmp_path_factory.mktemp("line")
    rng = np.random.default_rng(0)
    t = np.arange(ROWS)
    x = np.sin(t / 50) + rng.normal(scale=0.1, size=ROWS)
    lines = ["x,t"] + [f"{a:.5f},{b}" for a, b in zip(x, t, strict=True)]
    (folder / "data.csv").write_text("\n".join(lines) + "\n")
    (folder / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (folder / "pipeline.yaml").write_text(PIPELINE)
    spec = load_pipeline(folder / "pipeline.yaml", COMPONENTS)
    runs = {}
    cases = {"local": {}, "beam": {"mode": "multi_processing"}, "ray": {}, "local-one-by-one": {}}
    for case, options in cases.items():
        name = case.split("-")[0]
        seen: list[tuple[str, int]] = []
        flying: dict[str, int] = {}  # the most blocks in flight per stage, as published
        lock = threading.Lock()

        def progress(event, seen=seen, flying=flying, lock=lock):
            if isinstance(event, BlocksDone):
                with lock:
                    seen.append((event.stage, event.counts.records_out))
            elif isinstance(event, Occupancy):
                flying[event.stage] = max(flying.get(event.stage, 0), event.in_flight)

        with make_runner(name, workers=WORKERS, **options) as runner:
            reports = run_pipeline(spec, runner, folder / "root", case, subscribers=[progress],
                                   queue=QUEUE, overlap=case != "local-one-by-one")
        runs[case] = (folder / "root" / "runs" / case, reports, seen,
                      (flying, runner.most_in_flight))
    return runs


@pytest.mark.parametrize("runner", ["local", "beam", "ray"])
def test_line_keeps_order_under_random_latency_and_verifies(line_runs, runner):
    run, reports, _, _ = line_runs[runner]
    checks = verify_run(run.parent.parent, run.name)
    assert all(c.ok for c in checks), [c.problems for c in checks]
    features = read_manifest(run / "features")
    assert features["records_out"] == ROWS and features["seq_min"] == 0
    model, plan = read_manifest(run / "model"), read_manifest(run / "batches")
    # epoch 0 ran on the stream, yet was fed exactly the plan's train split, in order
    assert [e["seq_digest"] for e in model["epochs"]] == [plan["train"]["seq_digest"]] * 2
    assert {r.stage: r.status for r in reports} == dict.fromkeys(
        ("read", "examples", "features", "batches", "model"), "succeeded")


def test_line_gives_the_same_answer_on_every_runner(line_runs):
    def result(runner):
        run = line_runs[runner][0]
        model = read_manifest(run / "model")
        return ([s["sha256"] for s in read_manifest(run / "features")["shards"]],
                [(e["seq_digest"], e["batches"]) for e in model["epochs"]],
                model["final_metrics"]["loss"])

    assert result("local") == result("beam") == result("ray")


def test_the_line_trains_on_records_from_memory_exactly_as_from_disk(line_runs):
    """On the line the first epoch takes the just-stored records from memory; one stage after
    another, the trainer decodes every shard: the same batches and the same weights."""
    line, alone = (read_manifest(line_runs[c][0] / "model")
                   for c in ("local", "local-one-by-one"))
    assert line["shards_from_memory"] > 0 and alone["shards_from_memory"] == 0
    assert [e["seq_digest"] for e in line["epochs"]] == [e["seq_digest"] for e in alone["epochs"]]
    assert line["final_metrics"] == alone["final_metrics"]


def test_on_beam_training_starts_while_the_features_job_runs(line_runs):
    """A Beam stage is one batch job (it starts once its input is all there), yet each block's
    results flow on as they are done: the first epoch starts before the job's last block."""
    run = line_runs["beam"][0]
    features = read_manifest(run / "features")["timeline"]
    assert read_manifest(run / "model")["epochs"][0]["started"] < features["finished"]


@pytest.mark.parametrize("runner", ["local", "ray"])
def test_training_starts_while_ingest_is_still_reading(line_runs, runner):
    run, reports, _, _ = line_runs[runner]
    timeline = {s: read_manifest(run / s)["timeline"] for s in ("read", "features")}
    first_epoch = read_manifest(run / "model")["epochs"][0]["started"]
    assert first_epoch < timeline["read"]["finished"] < timeline["features"]["finished"]
    waits = {r.stage: (r.waited_input, r.waited_output) for r in reports}
    assert waits["read"][1] > 0.5  # ingest was held back by the slow preprocess: backpressure
    assert read_manifest(run / "read")["waited"]["output"] == pytest.approx(waits["read"][1],
                                                                             abs=1e-3)


@pytest.mark.parametrize("runner", ["local", "ray"])
def test_read_ahead_is_bounded_by_windows_and_belts(line_runs, runner):
    """Ingest is never further ahead of preprocessing than the blocks that fit in between."""
    _, _, seen, (flying, most) = line_runs[runner]
    done = {"read": 0, "features": 0}
    ahead = []
    for stage, records in seen:
        if stage in done:
            done[stage] = records
            ahead.append(done["read"] - done["features"])
    # in between: each map stage's window (adaptive: as wide as it grew, never past `most`),
    # each belt, one block in each stage's hands
    assert flying["examples"] <= most and flying["features"] <= most
    bound = (flying["examples"] + flying["features"] + 3 * QUEUE + 3) * BLOCK
    assert max(ahead) <= bound
    assert max(ahead) >= 4 * BLOCK  # and it did read ahead
