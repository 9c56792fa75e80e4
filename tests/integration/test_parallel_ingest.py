"""Ingest on the workers against ingest on the driver, byte for byte, on every runner.

Each input of the table is read twice: on the driver (`map_blocks` None) and through a real
runner's `map_blocks` with ranges of a randomly chosen size and random latency per range in
the workers. The blocks (batches, seq, counts) and dead letters must be identical, and seq
complete and ascending; without an error budget both modes fail with the same message.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import random
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqline.components import ingest
from seqline.components import stage as new_stage
from seqline.orchestration.events import Occupancy
from seqline.pipeline import tfrecord
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import StageError
from seqline.pipeline.tfrecord.compression import gzip_compress

pytestmark = pytest.mark.integration

BUDGET = ErrorBudget(max_fraction=0.5)


def _jittered(fn, seed, batch):
    """The range reader, after a random pause of 0-20 ms (seeded by the range number), so
    that ranges finish out of order on every engine."""
    rng = random.Random(seed * 1_000_003 + int(batch.column(SEQ)[0].as_py()))
    time.sleep(rng.uniform(0, 0.02))
    return fn(batch)


def _csv_lines(rng, n, start=0):
    ids = np.arange(start, start + n)
    temps = rng.normal(10, 5, n).round(3)
    cities = rng.choice(["Oslo", "Lima", "Pune", "Kyiv"], n)
    return "".join(f"{i},{t},{c}\n" for i, t, c in zip(ids, temps, cities, strict=True))


# --------------------------------------------------------------------------- the inputs

def many_small_files(folder, rng):
    for k in range(12):
        (folder / f"part-{k:02d}.csv").write_text(
            "id,temp,city\n" + _csv_lines(rng, int(rng.integers(1, 400)), k * 1000))
    return ["part-*.csv"], "csv"


def one_large_csv(folder, rng):
    (folder / "big.csv").write_text("id,temp,city\n" + _csv_lines(rng, 40_000))
    return ["big.csv"], "csv"


def quoted_newlines(folder, rng):
    """A file whose fields span lines (read whole, on the driver, from the first such range),
    and one with quotes but none spanning a line (split as usual)."""
    lines = _csv_lines(rng, 20_000).splitlines(keepends=True)
    lines[15_000] = '15000,1.5,"Oslo\nnorth"\n'
    (folder / "a.csv").write_text("id,temp,city\n" + "".join(lines))
    quoted = "".join(f'{i},{i / 10},"City, ""{i % 7}"""\n' for i in range(20_000))
    (folder / "b.csv").write_text("id,temp,city\n" + quoted)
    return ["a.csv", "b.csv"], "csv"


def bad_rows_mid_range(folder, rng):
    lines = _csv_lines(rng, 30_000).splitlines(keepends=True)
    lines[7_777] = "7777,warm,Oslo\n"  # not a number
    lines[21_000] = "21000,1.0\n"  # a column short
    (folder / "bad.csv").write_text("id,temp,city\n" + "".join(lines))
    (folder / "good.csv").write_text("id,temp,city\n" + _csv_lines(rng, 5_000, 30_000))
    return ["bad.csv", "good.csv"], "csv"


def parquet_row_groups(folder, rng):
    for k in range(3):
        n = 20_000
        table = pa.table({"id": np.arange(k * n, (k + 1) * n), "temp": rng.normal(size=n),
                          "city": rng.choice(["Oslo", "Lima"], n)})
        pq.write_table(table, folder / f"p{k}.parquet", row_group_size=int(rng.integers(900, 4000)))
    return ["p*.parquet"], "parquet"


def gzipped(folder, rng):
    for k in range(4):
        with gzip.open(folder / f"g{k}.csv.gz", "wt") as f:
            f.write("id,temp,city\n" + _csv_lines(rng, 10_000, k * 10_000))
    return ["g*.csv.gz"], "csv"


def json_lines(folder, rng):
    rows = [json.dumps({"id": i, "temp": float(t)}) + "\n"
            for i, t in enumerate(rng.normal(size=30_000))]
    rows[12_345] = '{"id": 12345, "temp": \n'  # broken JSON mid-file
    (folder / "x.jsonl").write_text("".join(rows))
    return ["x.jsonl"], "jsonl"


def tfrecord_shards(folder, rng):
    """gzip shards as seqline writes them (read in place: scalar_decoder.py), two holding a
    record that is not an Example (its chunk goes to tfx-bsl, the record to dead letters):
    one among the first 4,096 records, from which the file's types are inferred."""
    for k in range(4):
        n = 6_000
        batch = tfrecord.normalize(pa.record_batch({
            "id": np.arange(k * n, (k + 1) * n),
            "temp": pa.array([None if i % 9 == 0 else float(t)
                              for i, t in enumerate(rng.normal(size=n))]),
            "city": rng.choice(["Oslo", "Lima", "Kyiv"], n)}))
        examples = tfrecord.encode(batch).to_pylist()
        if k == 1:
            examples[3] = b"\xff\xfe not an Example"  # among the 4,096 that fix types
        if k == 2:
            examples[5_000] = b"\xff\xff not an Example"  # past them
        (folder / f"s{k}.tfrecord.gz").write_bytes(gzip_compress(tfrecord.frame(examples)))
    return ["s*.tfrecord.gz"], "tfrecord"


INPUTS = [many_small_files, one_large_csv, quoted_newlines, bad_rows_mid_range,
          parquet_row_groups, gzipped, json_lines, tfrecord_shards]
# Beam's worker processes: one job per input costs two SDK workers' start (~5 CPU-s) for the
# code path beam-in_memory already takes on every input; across processes, the inputs whose
# ranges hold something to carry over (a line spanning ranges, dead letters, row groups).
ACROSS_PROCESSES = [quoted_newlines, bad_rows_mid_range, parquet_row_groups]
HAS_BAD_ROWS = {bad_rows_mid_range, json_lines, tfrecord_shards}


# --------------------------------------------------------------------------- the checks

def _read(folder, paths, fmt, map_blocks=None, errors=BUDGET, **params):
    stage = new_stage("read", "ingest", {"format": fmt, "paths": paths, "block_records": 4096,
                                         **params}, errors=errors)
    return list(ingest.read_blocks(stage, folder, map_blocks))


def _assert_same(driver, parallel):
    assert len(parallel) == len(driver)
    for d, p in zip(driver, parallel, strict=True):
        assert (p.index, p.first_seq, p.counts) == (d.index, d.first_seq, d.counts)
        assert p.batch.equals(d.batch), f"block {d.index} differs"
        assert p.dead_letters == d.dead_letters, f"block {d.index}: dead letters differ"
    seq = np.concatenate([p.batch.column(SEQ).to_numpy() for p in parallel]
                         + [np.array([x.seq for p in parallel for x in p.dead_letters], np.int64)])
    assert np.array_equal(np.sort(seq), np.arange(len(seq)))  # every seq once
    good = np.concatenate([p.batch.column(SEQ).to_numpy() for p in parallel])
    assert (np.diff(good) > 0).all()


def _runner_map_blocks(runner, seed):
    def map_blocks(task, blocks):
        slow = dataclasses.replace(task, fn=functools.partial(_jittered, task.fn, seed))
        return runner.map_blocks(slow, blocks)
    return map_blocks


def test_parallel_ingest_equals_driver_ingest_on_every_input(runner_factory, tmp_path):
    runner = runner_factory(workers=2)
    stages: set[str | None] = set()
    runner.publish = lambda event: stages.add(event.stage) if isinstance(event, Occupancy) \
        else None
    inputs = ACROSS_PROCESSES if runner_factory.case == "beam-multi_processing" else INPUTS
    for make in inputs:
        k = INPUTS.index(make)
        rng = np.random.default_rng(k)
        folder = tmp_path / make.__name__
        folder.mkdir()
        paths, fmt = make(folder, rng)
        range_bytes = int(rng.integers(8 * 1024, 96 * 1024))
        driver = _read(folder, paths, fmt)
        parallel = _read(folder, paths, fmt, _runner_map_blocks(runner, k), parallel=True,
                         range_bytes=range_bytes)
        _assert_same(driver, parallel)
        assert "read" in stages  # the ranges did go through the runner
        letters = [x for r in driver for x in r.dead_letters]
        assert bool(letters) == (make in HAS_BAD_ROWS), make.__name__


def test_a_bad_row_without_budget_fails_alike_naming_file_line_and_seq(runner_factory,
                                                                       tmp_path):
    runner = runner_factory(workers=2)
    paths, fmt = bad_rows_mid_range(tmp_path, np.random.default_rng(1))
    with pytest.raises(StageError) as on_driver:
        _read(tmp_path, paths, fmt, errors=None)
    with pytest.raises(StageError) as on_workers:
        _read(tmp_path, paths, fmt, _runner_map_blocks(runner, 3), errors=None, parallel=True,
              range_bytes=64 * 1024)
    assert str(on_workers.value) == str(on_driver.value)
    assert "bad.csv, line 7779, seq 7777" in str(on_workers.value)
    assert on_workers.value.seq == 7777
