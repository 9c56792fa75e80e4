"""Planning ingest ranges, and reading them the way the workers do (in this process).

`_in_process` runs each range's SourceTask here, in order: the same task the runners ship to
their workers (tests/integration/test_parallel_ingest.py runs it on every runner).
"""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqline.components import ingest
from seqline.components import stage as new_stage
from seqline.components.ingest.ranges import (
    _Job,
    _quotes_close_on_every_line,
    _range_block,
    _read_range,
    plan_ranges,
)
from seqline.components.ingest.readers import Source, first_part_schema, read_source
from seqline.pipeline import tfrecord
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.tasks import SourceTask

BUDGET = ErrorBudget(max_fraction=0.5)


def _in_process(calls, task, blocks):
    calls.append(task)
    return (task(block) for block in blocks)


def _read(folder, paths, fmt="csv", parallel=None, errors=BUDGET, **params):
    """Blocks of ingest on the driver (parallel None), else with `parallel` and the ranges read
    in process; and the tasks that went to `map_blocks`."""
    if parallel is not None:
        params["parallel"] = parallel
    stage = new_stage("read", "ingest", {"format": fmt, "paths": paths, "block_records": 1000,
                                         **params}, errors=errors)
    calls: list = []
    map_blocks = None if parallel is None else functools.partial(_in_process, calls)
    return list(ingest.read_blocks(stage, folder, map_blocks)), calls


def _same(a, b):
    assert [(r.index, r.first_seq, r.counts, r.dead_letters) for r in a] == \
        [(r.index, r.first_seq, r.counts, r.dead_letters) for r in b]
    assert all(x.batch.equals(y.batch) for x, y in zip(a, b, strict=True))


def _csv(n, start=0):
    return "".join(f"{i},{i * 0.5},c{i % 7}\n" for i in range(start, start + n))


def test_byte_ranges_are_line_aligned_contiguous_and_cover_the_file(tmp_path):
    (tmp_path / "a.csv").write_text("id,x,c\n" + _csv(5000))
    data = (tmp_path / "a.csv").read_bytes()
    for size in (1024, 3000, 7777, 50_000):
        ranges, total = plan_ranges([Source(str(tmp_path / "a.csv"), True)], "csv", size)
        assert total == len(data)
        assert ranges[0].start == 0 and ranges[-1].end == len(data)
        for r, after in zip(ranges, ranges[1:], strict=False):
            assert r.end == after.start and data[r.end - 1:r.end] == b"\n"
            assert r.end - r.start >= size
        assert all(r.header == b"id,x,c\n" for r in ranges)


def test_compressed_tfrecord_and_small_files_are_one_range_and_parquet_cuts_at_row_groups(
        tmp_path):
    with gzip.open(tmp_path / "g.csv.gz", "wt") as f:
        f.write("id,x,c\n" + _csv(20_000))
    (tmp_path / "s.csv").write_text("id,x,c\n" + _csv(10))
    pq.write_table(pa.table({"x": np.arange(10_000)}), tmp_path / "p.parquet",
                   row_group_size=1000)
    sources = [Source(str(tmp_path / n), True) for n in ("g.csv.gz", "s.csv")]
    ranges, _ = plan_ranges(sources, "csv", 1024)
    assert [(r.start, r.end) for r in ranges] == [(0, None), (0, None)]
    ranges, _ = plan_ranges([Source(str(tmp_path / "p.parquet"), True)], "parquet", 1)
    assert [(r.groups_from, r.groups_to) for r in ranges] == [(i, i + 1) for i in range(10)]
    ranges, _ = plan_ranges([Source(str(tmp_path / "p.parquet"), True)], "parquet", 10**9)
    assert [(r.groups_from, r.groups_to) for r in ranges] == [(0, 10)]


@pytest.mark.parametrize(("text", "safe"), [
    (b'1,"a, b"\n2,c\n', True), (b'1,"say ""hi"""\n', True), (b"1,2\n3,4\n", True),
    (b'1,"a\nb"\n', False), (b'1,"open\n', False)])
def test_a_range_is_safe_only_when_every_line_closes_its_quotes(text, safe):
    assert _quotes_close_on_every_line(text) is safe


def test_a_range_with_a_field_spanning_lines_asks_the_driver_to_read_the_file(tmp_path):
    (tmp_path / "q.csv").write_text('id,x,c\n1,0.5,"two\nlines"\n' + _csv(3000))
    ranges, _ = plan_ranges([Source(str(tmp_path / "q.csv"), True)], "csv", 2048)
    job = _Job("stage 'read'", "read", "csv",
               pa.schema({"id": pa.int64(), "x": pa.float64(), "c": pa.string()}))
    batch, letters = _read_range(job, _range_block(0, ranges[0]).batch)
    assert batch is None and letters == []
    batch, _ = _read_range(job, _range_block(1, ranges[1]).batch)
    assert batch is not None and batch.column(SEQ).to_pylist()[:2] == [0, 1]


@pytest.mark.parametrize("range_bytes", [1024, 2500, 9000])
def test_ranges_read_in_process_equal_driver_ingest_with_bad_rows_and_quotes(tmp_path,
                                                                           range_bytes):
    lines = _csv(6000).splitlines(keepends=True)
    lines[10] = "10,1.5\n"  # a column short
    lines[2500] = '2500,1.0,"a\nb"\n'  # a field spanning lines, read whole by the driver
    lines[4000] = "\n\n"  # blank lines: no records, but they count for line numbers
    lines[5000] = "5000,2.5\n"  # on file line 5000 + 1 (header) + 1 (1-based) + 1 (blank)
    (tmp_path / "a.csv").write_text("id,x,c\n" + "".join(lines))
    lines[2500] = "2500,oops,c\n"
    (tmp_path / "b.csv").write_text("id,x,c\n" + "".join(lines))
    (tmp_path / "c.csv").write_text("id,x,c\n" + "".join(lines[:3]))
    types = {"schema": {"id": "int64", "x": "double"}}  # else "oops" would make x a string
    driver, _ = _read(tmp_path, ["a.csv", "b.csv", "c.csv"], **types)
    parallel, calls = _read(tmp_path, ["a.csv", "b.csv", "c.csv"], parallel=True,
                            range_bytes=range_bytes, **types)
    assert len(calls) == 1 and isinstance(calls[0], SourceTask)
    _same(driver, parallel)
    letters = [x for r in parallel for x in r.dead_letters]
    assert [(x.file.rsplit("/")[-1], x.line) for x in letters if x.file.endswith("b.csv")] == \
        [("b.csv", 12), ("b.csv", 2502), ("b.csv", 5003)]


def test_jsonl_ranges_equal_driver_ingest(tmp_path):
    rows = [json.dumps({"id": i, "x": i / 3}) + "\n" for i in range(5000)]
    rows[777] = "{not json}\n"
    rows[4321] = json.dumps({"id": 4321, "x": "text"}) + "\n"
    (tmp_path / "a.jsonl").write_text("".join(rows))
    driver, _ = _read(tmp_path, ["a.jsonl"], "jsonl")
    parallel, _ = _read(tmp_path, ["a.jsonl"], "jsonl", parallel=True, range_bytes=4096)
    _same(driver, parallel)
    assert [x.seq for r in parallel for x in r.dead_letters] == [777, 4321]


def test_auto_keeps_small_inputs_on_the_driver_and_false_always(tmp_path):
    (tmp_path / "a.csv").write_text("id,x,c\n" + _csv(3000))
    _, calls = _read(tmp_path, ["a.csv"], parallel="auto", range_bytes=1024)
    assert calls == []
    _, calls = _read(tmp_path, ["a.csv"], parallel=False, range_bytes=1024)
    assert calls == []
    _, calls = _read(tmp_path, ["a.csv"], parallel=True, range_bytes=1024)
    assert len(calls) == 1


def test_auto_reads_tfrecords_on_the_workers_from_16_mib_and_text_from_1_gib(tmp_path):
    """seqline decodes TFRecords on one core wherever they are read; Arrow parses CSV on the
    driver's threads: `auto` sends 16 MiB of TFRecords in 2 files to the workers, keeps 16 MiB
    of CSV, and 16 MiB of TFRecords in one file (one range), on the driver."""
    blob = "x" * 4096
    for k in range(2):
        batch = tfrecord.normalize(pa.record_batch({"i": np.arange(k * 2100, (k + 1) * 2100),
                                                    "blob": [blob] * 2100}))
        (tmp_path / f"t{k}.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
    size = sum(f.stat().st_size for f in tmp_path.glob("t*.tfrecord"))
    assert ingest.TFRECORD_PARALLEL_MIN_BYTES <= size < 2 * ingest.TFRECORD_PARALLEL_MIN_BYTES
    (tmp_path / "a.csv").write_text("id,x,c\n" + _csv(1000) * (size // len(_csv(1000))))
    _, calls = _read(tmp_path, ["t*.tfrecord"], "tfrecord", parallel="auto")
    assert len(calls) == 1  # the stage's one SourceTask, over both files
    _, calls = _read(tmp_path, ["a.csv"], parallel="auto", errors=None)
    assert calls == []
    (tmp_path / "t1.tfrecord").unlink()
    (tmp_path / "t0.tfrecord").write_bytes(b"".join(
        (tmp_path / "t0.tfrecord").read_bytes() for _ in range(2)))
    _, calls = _read(tmp_path, ["t*.tfrecord"], "tfrecord", parallel="auto")
    assert calls == []


def test_a_source_task_that_raises_carries_the_failure_to_the_driver(tmp_path):
    (tmp_path / "a.csv").write_text("id,x,c\n" + _csv(3000))
    ranges, _ = plan_ranges([Source(str(tmp_path / "a.csv"), True)], "csv", 1024)
    (tmp_path / "a.csv").unlink()  # gone since planning: the range cannot be read
    job = _Job("stage 'read'", "read", "csv", pa.schema({"id": pa.int64()}))
    result = SourceTask("read", functools.partial(_read_range, job))(_range_block(0, ranges[1]))
    assert result.failure is not None and result.batch is None
    assert "FileNotFoundError" in result.failure.message


def test_tfrecord_and_parquet_files_read_on_workers_equal_driver_ingest(tmp_path):
    for k in range(3):
        batch = tfrecord.normalize(pa.record_batch({
            "day": np.arange(k * 500, (k + 1) * 500), "w": ["rain", "sun"] * 250}))
        (tmp_path / f"x{k}.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
        pq.write_table(pa.table({"day": np.arange(k * 900, (k + 1) * 900)}),
                       tmp_path / f"p{k}.parquet", row_group_size=100 + 50 * k)
    for fmt, glob in (("tfrecord", "x*.tfrecord"), ("parquet", "p*.parquet")):
        driver, _ = _read(tmp_path, [glob], fmt)
        parallel, calls = _read(tmp_path, [glob], fmt, parallel=True, range_bytes=1024)
        assert len(calls) == 1
        _same(driver, parallel)


def test_a_tfrecord_files_schema_comes_from_its_first_records_where_they_settle_it(tmp_path):
    """The driver fixes the schema workers decode with from the first file's first records
    alone (its first part undecoded), the same schema as decoding that part gives; where
    those records do not settle it, None, and the driver reads the part as before."""
    batch = tfrecord.normalize(pa.record_batch({
        "day": np.arange(6), "w": [b"rain", b"sun"] * 3,
        "tags": pa.array([[1, 2], [], [3], [4, 5, 6], [7], [8]], pa.large_list(pa.int64())),
        "x": pa.array([0.5, None, 1.5, None, 2.5, 3.0], pa.float32())}))
    records = tfrecord.encode(batch).to_pylist()
    plain, zipped = tmp_path / "a.tfrecord", tmp_path / "a.tfrecord.gz"
    plain.write_bytes(tfrecord.frame(records))
    zipped.write_bytes(gzip.compress(tfrecord.frame(records)))
    for path in (plain, zipped):
        source = Source(str(path), local=True)
        part = next(read_source(source, "tfrecord", {}))
        assert first_part_schema(source, {}) == part.batch.schema
        assert pa.types.is_large_list(part.batch.schema.field("tags").type)
        assert not pa.types.is_large_list(part.batch.schema.field("x").type)  # absent: null
    source = Source(str(plain), local=True)
    assert first_part_schema(source, {"w": pa.string()}) is None  # (declared types may refuse)
    (tmp_path / "b.tfrecord").write_bytes(tfrecord.frame([b"\xff\xfe", *records]))
    assert first_part_schema(Source(str(tmp_path / "b.tfrecord"), local=True), {}) is None
    (tmp_path / "c.tfrecord").write_bytes(b"")
    assert first_part_schema(Source(str(tmp_path / "c.tfrecord"), local=True), {}) is None
    # read on the workers, each of those reads as on the driver
    for paths, params in ((["b.tfrecord", "a.tfrecord"], {}),
                          (["c.tfrecord", "a.tfrecord.gz"], {}),
                          (["a.tfrecord"], {"schema": {"w": "string"}})):
        _same(_read(tmp_path, paths, "tfrecord", **params)[0],
              _read(tmp_path, paths, "tfrecord", parallel=True, **params)[0])


def test_the_driver_learns_a_tfrecord_schema_without_importing_pandas(tmp_path):
    """pyarrow imports pandas (0.16 s) as it first converts a NumPy array: learning the schema
    must not, or every worker waits that long for its first range."""
    batch = tfrecord.normalize(pa.record_batch({"day": np.arange(3), "w": ["a", "b", "c"]}))
    (tmp_path / "a.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
    script = ("import sys; from seqline.components.ingest.readers import Source, "
              "first_part_schema; "
              f"schema = first_part_schema(Source({str(tmp_path / 'a.tfrecord')!r}, True), {{}}); "
              "print(schema.names, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split("\n")[0] == "['day', 'w'] False"
