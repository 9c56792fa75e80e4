"""The Beam runner with no driver-local paths: blocks and results through a shared location.

Cluster runners (Dataflow, Flink, Spark) cannot run here (ORCHESTRATION.md §5), so readiness
is shown the way it would break: the FnApiRunner's worker *processes* run the stage with every
byte they exchange with the driver on the S3 server, and with a temp folder nobody may use.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path

import apache_beam as beam
import fsspec
import numpy as np
import psutil
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from seqline.components import COMPONENTS, preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.api import run_pipeline
from seqline.orchestration.events import Occupancy
from seqline.orchestration.runners import beam_workers, make_runner
from seqline.orchestration.runners.beam import BeamRunner, SeqlineMap
from seqline.orchestration.runners.beam_transforms import read_result, result_name
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.blocks import SEQ, batch_to_ipc, to_blocks
from seqline.pipeline.config import parse_pipeline
from seqline.pipeline.errors import ConfigError, StageError
from tests.conftest import USERFNS
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


@dataclasses.dataclass(frozen=True)
class ArrowShards:
    """A sink that writes each block's output as an Arrow IPC shard under a fsspec URL."""

    url: str

    def __call__(self, index: int, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict]:
        name = f"shard-{index:06d}.arrow"
        with fsspec.open(f"{self.url}/{name}", "wb") as f:
            f.write(memoryview(batch_to_ipc(batch)))
        return batch, {"path": name, "records": batch.num_rows}


def _task(fn: str = "skewed", sink: ArrowShards | None = None, **kwargs):
    """The preprocess task on a latency user function (random per block, seeded)."""
    task = preprocess.make_task(new_stage("features", "preprocess",
                                          {"fn": f"latency:{fn}", "fn_kwargs": kwargs}),
                                USERFNS, USERFNS)
    return dataclasses.replace(task, sink=sink)


def _blocks(n: int = 600, block_records: int = 40):
    return to_blocks([pa.record_batch({"x": np.arange(n, dtype=np.int64)})], block_records)


def _seq(results) -> np.ndarray:
    return np.concatenate([r.batch.column(SEQ).to_numpy() for r in results])


@pytest.fixture
def no_temp(tmp_path, monkeypatch) -> Path:
    """An empty temp folder for this process and the workers it starts, to check it stays so."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_beam_multi_processing_with_scratch_on_s3_writes_nothing_local(s3_root, no_temp):  # noqa: F811
    fs = fsspec.filesystem("s3")
    runner = BeamRunner(workers=2, mode="multi_processing", scratch=f"{s3_root}/scratch")
    task = _task(base_ms=5, sink=ArrowShards(f"{s3_root}/features"))
    results = list(runner.map_blocks(task, _blocks()))
    assert [r.index for r in results] == list(range(15))
    assert np.array_equal(_seq(results), np.arange(600))
    shards = sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{s3_root}/features"))
    assert shards == [f"shard-{i:06d}.arrow" for i in range(15)]
    assert [r.shard["path"] for r in results] == shards
    assert list(no_temp.glob("seqline-beam-*")) == []
    fs.invalidate_cache()
    assert not fs.exists(f"{s3_root}/scratch")  # the stage's scratch folder is gone


def test_multi_processing_workers_are_forked_from_the_fork_server():
    """Each SDK worker is a process of its own, forked with Beam imported (not a new
    interpreter importing it, ~2 CPU-s a worker): its parent is the driver's fork server.
    None is kept once the job has ended."""
    runner = BeamRunner(workers=2, mode="multi_processing")
    results = list(runner.map_blocks(_task("stamp_pid", base_ms=20), _blocks()))
    assert np.array_equal(_seq(results), np.arange(600))
    pids = {p for r in results for p in r.batch.column("pid").to_pylist()}
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids
    assert not beam_workers._jobs  # forgotten with their job
    assert not any(psutil.pid_exists(p) for p in pids)  # and exited: Beam stopped them
    results = list(runner.map_blocks(_task("stamp_pid", parent=True), _blocks()))
    (parent,) = {p for r in results for p in r.batch.column("pid").to_pylist()}
    server = psutil.Process(parent)
    assert server.ppid() == os.getpid() and "forkserver" in " ".join(server.cmdline())


@pytest.mark.parametrize("mode", ["in_memory", "multi_threading"])
def test_beam_in_process_modes_keep_blocks_off_the_disk(mode, no_temp):
    results = list(BeamRunner(workers=2, mode=mode).map_blocks(_task(base_ms=2), _blocks()))
    assert np.array_equal(_seq(results), np.arange(600))
    assert list(no_temp.iterdir()) == []
    assert fsspec.filesystem("memory").ls("/") == []  # the stage's memory folder is gone


def test_beam_failure_on_s3_scratch_names_block_and_seq(s3_root):  # noqa: F811
    runner = BeamRunner(workers=2, mode="multi_processing", scratch=f"{s3_root}/scratch")
    with pytest.raises(StageError, match=r"stage 'features' failed on seq 50 \(block 1\)"):
        list(runner.map_blocks(_task("boom_at", seq=50), _blocks()))


def test_seqline_map_in_a_users_pipeline_writes_results_by_block_index(s3_root):  # noqa: F811
    """The public transform as a Dataflow/Flink user composes it: elements in, results out."""
    blocks = list(_blocks())
    results_url = f"{s3_root}/results"
    options = PipelineOptions(["--direct_running_mode=multi_processing",
                               "--direct_num_workers=2"])
    with beam.Pipeline(runner=FnApiRunner(), options=options) as p:
        _ = (p
             | beam.Create([(b.index, batch_to_ipc(b.batch).to_pybytes()) for b in blocks])
             | beam.Reshuffle()
             | SeqlineMap(_task(base_ms=5), results_url))
    results = [read_result(f"{results_url}/{result_name(b.index)}") for b in blocks]
    assert np.array_equal(_seq(results), np.arange(600))


def test_map_fused_runs_every_block_through_both_stages_in_one_worker():
    """Chained stages (a tfrecord_write and the preprocess after it, in a run) are one job:
    each block goes through both in one bundle, on one worker, under random latency."""
    first = _task("stamp_pid", column="pid_first", base_ms=20, seed=1)
    second = dataclasses.replace(_task("stamp_pid", column="pid_second", base_ms=20, seed=2),
                                 stage="more")
    peaks: dict[str, int] = {}
    runner = BeamRunner(workers=2, mode="multi_processing", publish=lambda e: peaks.update(
        {e.stage: max(peaks.get(e.stage, 0), e.in_flight)} if isinstance(e, Occupancy) else {}))
    fused = list(runner.map_fused([first, second], _blocks()))
    assert [len(results) for results in fused] == [2] * 15
    for k, stage in enumerate(("features", "more")):
        results = [r[k] for r in fused]
        assert {r.stage for r in results} == {stage}
        assert [r.index for r in results] == list(range(15))
        assert np.array_equal(_seq(results), np.arange(600))  # complete and ascending
    out = pa.Table.from_batches([r[1].batch for r in fused])
    assert out.column("pid_first").equals(out.column("pid_second"))  # one bundle, one worker
    assert peaks == {"features": 2, "more": 2}  # as the runner published them


@pytest.mark.parametrize("mode", ["multi_processing", "in_memory"])
def test_results_reach_the_stage_while_the_job_runs(mode):
    """A block's results are yielded once it and every block before it are done, not when
    the whole job ends: with the last block slow, the others arrive seconds before it."""
    task = _task("straggler", seq=560, slow_s=3.0, base_ms=5)  # 560: the last block's
    arrived = [(time.monotonic(), result.index)
               for result in BeamRunner(workers=2, mode=mode).map_blocks(task, _blocks())]
    assert [index for _, index in arrived] == list(range(15))
    assert arrived[-1][0] - arrived[-2][0] > 2.0  # before: all at once, as the job ended


def test_map_fused_stops_a_block_where_a_stage_fails_or_keeps_nothing():
    first = _task("stamp_pid", base_ms=1, below=100)  # blocks 3 and on keep no rows
    second = dataclasses.replace(_task("boom_at", seq=20), stage="more")
    fused = list(BeamRunner(workers=2, mode="multi_threading").map_fused([first, second],
                                                                          _blocks()))
    assert [len(results) for results in fused] == [2, 2, 2] + [1] * 12
    assert [r[0].counts.records_out for r in fused] == [40, 40, 20] + [0] * 12
    failed = [r[1].index for r in fused[:3] if r[1].failure is not None]
    assert failed == [0]  # returned, not raised: the failure is the second stage's to raise
    with pytest.raises(StageError, match=r"stage 'more' failed on seq 20 \(block 0\)"):
        fused[0][1].raise_if_failed()


CHAINED = """
name: fused
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 40}}
  - {name: write, component: tfrecord_write, params: {shard_records: 100}}
  - name: features
    component: preprocess
    params: {fn: "latency:FN", fn_kwargs: {KW}}
"""


def _fused_run(tmp_path, fn: str, kw: str):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(1000)))
    shutil.copy(USERFNS / "latency.py", tmp_path)
    text = CHAINED.replace("FN", fn).replace("KW", kw)
    spec = parse_pipeline(text, tmp_path, COMPONENTS)
    with BeamRunner(workers=2, mode="multi_processing") as runner:
        return run_pipeline(spec, runner, tmp_path / "root", "r1")


def test_fused_stages_store_what_the_local_runner_stores(tmp_path):
    reports = {r.stage: r for r in _fused_run(tmp_path, "skewed", "base_ms: 10, seed: 4")}
    spec = parse_pipeline(CHAINED.replace("FN", "skewed").replace("KW", "base_ms: 10, seed: 4"),
                          tmp_path, COMPONENTS)
    with make_runner("local", workers=2) as runner:
        run_pipeline(spec, runner, tmp_path / "root", "local")
    for stage in ("write", "features"):
        beam_dir, local_dir = (tmp_path / "root" / "runs" / run / stage for run in ("r1", "local"))
        names = sorted(p.name for p in local_dir.iterdir() if p.name != "manifest.json")
        assert sorted(p.name for p in beam_dir.iterdir() if p.name != "manifest.json") == names
        for name in names:  # the shards, and the data profile: the same bytes
            assert (beam_dir / name).read_bytes() == (local_dir / name).read_bytes(), name
        assert read_manifest(beam_dir)["seq_digest"] == read_manifest(local_dir)["seq_digest"]
    assert reports["features"].blocks == reports["write"].blocks == 10


def test_a_fused_stage_fails_by_itself_and_commits_nothing(tmp_path):
    with pytest.raises(StageError, match=r"stage 'features' failed on seq 420 \(block 4\)"):
        _fused_run(tmp_path, "boom_at", "seq: 420")
    run = tmp_path / "root" / "runs" / "r1"
    assert not (run / "features").exists()
    assert list(run.glob(".*.tmp-*")) == []  # nothing half-written left behind


@pytest.mark.parametrize("options", [["--runner=FlinkRunner", "--flink_master=host:8081"],
                                     ["--runner=DataflowRunner", "--project=p"]])
def test_beam_cluster_runner_needs_a_shared_location(options):
    with pytest.raises(ConfigError, match="--temp_location"):
        BeamRunner(options=options)
    runner = BeamRunner(options=[*options, "--temp_location=gs://bucket/tmp"])
    assert runner.scratch == "gs://bucket/tmp"


def test_beam_options_unknown_to_beam():
    # a likely typo fails on any runner; an option of no close name fails on the FnApiRunner
    # (it would be dropped) and goes on to a cluster runner (a Java-side Flink option)
    with pytest.raises(ConfigError, match="did you mean 'temp_location'"):
        BeamRunner(options=["--runner=FlinkRunner", "--temp_locaton=s3://b/tmp"])
    with pytest.raises(ConfigError, match="its FnApiRunner would run without it"):
        BeamRunner(options=["--flink_conf_dir=/etc/flink"])
    runner = BeamRunner(options=["--runner=FlinkRunner", "--temp_location=s3://b/tmp/",
                                 "--flink_conf_dir=/etc/flink"])
    assert runner.scratch == "s3://b/tmp"
