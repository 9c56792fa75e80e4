"""The runner contract, on every runner: order, completeness, errors, the window, sizes.

User functions come from tests/userfns and are loaded the way a pipeline's are, so workers
of every engine import them for real; latency is random per block (seeded), with 1 block in
20 about 20x slower, so an ordering bug cannot hide behind a sequential schedule.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.events import Occupancy
from seqline.pipeline import tfrecord
from seqline.pipeline.blocks import SEQ, to_blocks
from seqline.pipeline.errors import StageError
from tests.conftest import USERFNS

pytestmark = pytest.mark.integration


def _task(fn: str, **kwargs):
    """The preprocess task without its shard writer: this suite is about the runners' contract
    (the example pipeline's tests cover shards written by every runner's workers)."""
    task = preprocess.make_task(new_stage("features", "preprocess", 
                                          {"fn": fn, "fn_kwargs": kwargs}), USERFNS, USERFNS)
    return dataclasses.replace(task, sink=None)


def _blocks(n: int, block_records: int):
    return to_blocks([pa.record_batch({"x": np.arange(n, dtype=np.int64)})], block_records)


def _collect(runner, task, blocks):
    results = list(runner.map_blocks(task, blocks))
    assert [r.index for r in results] == list(range(len(results)))
    seq = np.concatenate([r.batch.column(SEQ).to_numpy() for r in results]) if results else \
        np.array([], dtype=np.int64)
    return results, seq


def test_runner_skewed_latency_output_is_complete_and_strictly_ascending(runner_factory):
    runner = runner_factory(workers=2)
    results, seq = _collect(runner, _task("latency:skewed", base_ms=3, seed=7), _blocks(6000, 50))
    assert np.array_equal(seq, np.arange(6000))
    y = np.concatenate([r.batch.column("y").to_numpy() for r in results])
    assert np.array_equal(y, 2 * np.arange(6000))


def test_runner_workers_write_shards_that_read_back_in_seq_order(runner_factory, tmp_path):
    """Shards are written by the workers, under skewed latency: listed in result order they
    hold every seq once, ascending, with the worker's output values."""
    task = preprocess.make_task(new_stage("features", "preprocess", {
        "fn": "latency:skewed", "fn_kwargs": {"base_ms": 3, "seed": 11}}), USERFNS, tmp_path)
    results, _ = _collect(runner_factory(workers=2), task, _blocks(3000, 50))
    schema = results[0].batch.schema
    stored = [tfrecord.decode(tfrecord.read_shard(tmp_path / r.shard["path"], "gzip"), schema)
              for r in results]
    assert np.array_equal(np.concatenate([b.column(SEQ).to_numpy() for b in stored]),
                          np.arange(3000))
    assert np.array_equal(np.concatenate([b.column("y").to_numpy() for b in stored]),
                          2 * np.arange(3000))
    assert [r.shard["seq_first"] for r in results] == list(range(0, 3000, 50))


def test_runner_filter_keeps_order_and_counts(runner_factory):
    results, seq = _collect(runner_factory(), _task("latency:keep_even", base_ms=2),
                            _blocks(1000, 37))
    assert np.array_equal(seq, np.arange(0, 1000, 2))
    assert sum(r.counts.filtered for r in results) == 500


def test_runner_explode_keeps_parents_in_order(runner_factory):
    results, seq = _collect(runner_factory(), _task("latency:explode3", base_ms=2),
                            _blocks(500, 40))
    assert np.array_equal(seq, np.repeat(np.arange(500), 3))
    assert sum(r.counts.exploded for r in results) == 1000
    assert all(r.counts.balanced for r in results)


def test_runner_raising_function_is_a_stage_error_with_block_seq_and_cause(runner_factory):
    with pytest.raises(StageError, match=r"stage 'features' failed on seq 57 \(block 5\)"
                       r": ValueError: bad value at seq 57") as info:
        _collect(runner_factory(), _task("latency:boom_at", seq=57, base_ms=2), _blocks(200, 10))
    assert (info.value.stage, info.value.block, info.value.seq) == ("features", 5, 57)
    assert isinstance(info.value.__cause__, ValueError)


def test_runner_reordering_function_fails_loudly(runner_factory):
    with pytest.raises(StageError, match=r"block 0 \(first seq 0\): the function reordered rows"):
        _collect(runner_factory(), _task("latency:reverse"), _blocks(100, 10))


def test_runner_never_has_more_blocks_in_flight_than_the_window(runner_factory, tmp_path):
    """window=1 with 2 workers: without the window two blocks would overlap."""
    runner = runner_factory(workers=2, window=1)
    told: list[int] = []  # blocks in flight, as the runner published them
    runner.publish = lambda e: told.append(e.in_flight) if isinstance(e, Occupancy) else None
    _, seq = _collect(runner, _task("latency:skewed", base_ms=5, log_dir=str(tmp_path)),
                      _blocks(400, 20))
    assert np.array_equal(seq, np.arange(400))
    assert told and max(told) <= 1
    assert _max_overlap(tmp_path) == 1


def test_runner_window_allows_parallel_work(runner_factory, tmp_path):
    """The converse, so the test above cannot pass by running everything sequentially.

    Each block waits (up to a minute) for a second one to start before it goes on, so two
    blocks overlap however slowly a loaded machine starts the second worker; a runner that
    runs one block at a time never gets there, and its spans never overlap.
    """
    if runner_factory.case in ("beam-in_memory",):
        pytest.skip("in_memory Beam runs one bundle at a time by design")
    runner = runner_factory(workers=2, window=4)
    _collect(runner, _task("latency:skewed", base_ms=5, log_dir=str(tmp_path), meet=2),
             _blocks(400, 20))
    assert _max_overlap(tmp_path) == 2


def test_runner_default_window_keeps_workers_busy_behind_a_straggler(runner_factory, tmp_path):
    """Without --window the window widens while the head of the line holds results back: the
    other worker goes on past 4x workers blocks while block 0 waits (decision 61).

    Block 0 waits until more than twice the fixed window's blocks are done behind it (or a
    minute): a fixed window never lets that many go on, and fails the test after the minute.
    """
    if runner_factory.case.startswith("beam"):
        pytest.skip("Beam runs a stage as one batch job: it has no reorder window to widen")
    runner = runner_factory(workers=2)
    task = _task("latency:straggler", log_dir=str(tmp_path), until_done=2 * runner.window + 1)
    _, seq = _collect(runner, task, _blocks(1000, 10))
    assert np.array_equal(seq, np.arange(1000))
    spans = _spans(tmp_path)
    slow_end = spans[0][1]
    behind = sum(1 for first, (_, end) in spans.items() if first and end < slow_end)
    assert behind > 2 * runner.window, (behind, runner.window)


def test_runner_empty_input_gives_no_blocks(runner_factory):
    results, seq = _collect(runner_factory(), _task("latency:double"), _blocks(0, 10))
    assert results == [] and len(seq) == 0


def test_runner_one_record(runner_factory):
    results, seq = _collect(runner_factory(), _task("latency:double"), _blocks(1, 10))
    assert seq.tolist() == [0] and results[0].batch.column("y").to_pylist() == [0]


def test_runner_a_million_records(runner_factory):
    results, seq = _collect(runner_factory(), _task("latency:double"), _blocks(1_000_000, 16_384))
    assert np.array_equal(seq, np.arange(1_000_000))
    assert sum(r.counts.records_out for r in results) == 1_000_000


def _spans(log_dir: Path) -> dict[int, tuple[float, float]]:
    """Each block's span (start, end) by its first seq, from every worker's span log."""
    spans = {}
    for path in log_dir.glob("spans-*.txt"):
        for line in path.read_text().split("\n"):
            if line:
                first, start, end = line.split()
                spans[int(first)] = (float(start), float(end))
    return spans


def _max_overlap(log_dir: Path) -> int:
    """Most block spans open at one instant, from every worker's span log."""
    events = [e for start, end in _spans(log_dir).values() for e in ((start, 1), (end, -1))]
    depth = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts on ties
        depth += step
        peak = max(peak, depth)
    return peak


def test_runner_runs_each_task_its_own_blocks_when_tasks_come_one_after_another(runner_factory):
    """Tasks made and dropped one after another (as a run's stages, or ingest's inputs, come
    and go) may be made at one address: a runner that knows a task by its id alone ran a
    block of a gzipped CSV as the Parquet task before it."""
    runner = runner_factory(workers=2)
    for i in range(8):
        task = _task("latency:stamp_pid", column=f"from_task_{i}")
        (result,) = runner.map_blocks(task, _blocks(10, 10))
        assert result.batch.schema.names[-1] == f"from_task_{i}"
        del task, result  # as a stage's task goes when the stage ends
