"""ingest on tiny files: seq across files, bad rows failing or dead-lettered, every format."""

import gzip
import json

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqline.components import ingest
from seqline.components import stage as new_stage
from seqline.pipeline import tfrecord
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import StageError

CSV = "day,temp\n1,10.5\n2,11.0\n3,9.5\n"
BUDGET = ErrorBudget(max_fraction=0.5)


def _read(folder, paths, fmt="csv", errors=None, **params):
    stage = new_stage("read", "ingest", {"format": fmt, "paths": paths, **params}, errors=errors)
    results = list(ingest.read_blocks(stage, folder))
    table = pa.Table.from_batches([r.batch for r in results if r.batch.num_rows])
    letters = [letter for r in results for letter in r.dead_letters]
    return table, letters, results


def test_ingest_seq_runs_across_files_in_declared_then_sorted_order(tmp_path):
    for name, rows in (("b.csv", "4,1\n5,2\n"), ("a.csv", "1,1\n"), ("c.csv", "9,9\n")):
        (tmp_path / name).write_text("day,temp\n" + rows)
    table, _, _ = _read(tmp_path, ["c.csv", "[ab].csv"], block_records=2)
    assert table.column("day").to_pylist() == [9, 1, 4, 5]
    assert table.column(SEQ).to_pylist() == [0, 1, 2, 3]


def test_ingest_reads_jsonl_parquet_and_gzipped_csv_alike(tmp_path):
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"day": d}) + "\n" for d in (1, 2, 3)))
    pq.write_table(pa.table({"day": [1, 2, 3]}), tmp_path / "x.parquet")
    with gzip.open(tmp_path / "x.csv.gz", "wt") as f:
        f.write("day\n1\n2\n3\n")
    for fmt, name in (("jsonl", "x.jsonl"), ("parquet", "x.parquet"), ("csv", "x.csv.gz")):
        table, _, _ = _read(tmp_path, [name], fmt)
        assert table.column("day").to_pylist() == [1, 2, 3], fmt


def test_ingest_reads_fsspec_urls(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe("/seqline-test/part-1.csv", CSV.encode())
    fs.pipe("/seqline-test/part-0.csv", b"day,temp\n0,1.0\n")
    table, _, _ = _read(tmp_path, ["memory://seqline-test/part-*.csv"])
    assert table.column("day").to_pylist() == [0, 1, 2, 3]


def test_ingest_reads_tfrecords_of_examples_back_into_columns(tmp_path):
    batch = tfrecord.normalize(pa.record_batch({"day": [1, 2], "w": ["rain", "sun"],
                                                 "tags": pa.array([[1], [2, 3]])}))
    (tmp_path / "x.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
    table, _, _ = _read(tmp_path, ["x.tfrecord"], "tfrecord", schema={"w": "string"})
    assert table.column("day").to_pylist() == [1, 2]
    assert table.column("w").to_pylist() == ["rain", "sun"]
    assert table.column("tags").to_pylist() == [[1], [2, 3]]


BAD_INPUTS = [
    ("malformed row", "day,temp\n1,1.0\n2,2.0,extra\n3,3.0\n", {},
     r"bad record in .*in\.csv, line 3, seq 1: .*Expected 2 columns, got 3"),
    ("wrong column type", "day,temp\n1,1.0\n2,warm\n", {"schema": {"temp": "double"}},
     r"line 3, seq 1: CSV column #1: CSV conversion error to double: invalid value 'warm'"),
    # 200,000 rows outgrow Arrow's first 1 MiB block, from which it infers the types.
    ("type changes mid-file", "day,temp\n" + "1,1.0\n" * 200_000 + "2,warm\n", {},
     r"line 200002, seq 200000: .*invalid value 'warm'"),
    ("empty file", "", {}, r"in\.csv is empty: a CSV file needs at least a header line"),
]


@pytest.mark.parametrize(("text", "params", "message"),
                         [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_ingest_bad_input_fails_naming_file_line_and_seq(tmp_path, text, params, message):
    (tmp_path / "in.csv").write_text(text)
    with pytest.raises(StageError, match=message):
        _read(tmp_path, ["in.csv"], **params)


def test_ingest_a_bad_record_among_the_first_of_a_tfrecord_file_is_a_dead_letter(tmp_path):
    """The schema comes from the records that are Examples: a bad one among the first (which
    fix the schema) is set aside with its seq, as one further on is, not the whole file."""
    batch = tfrecord.normalize(pa.record_batch({"day": [1, 2, 3], "w": ["a", "b", "c"]}))
    good = tfrecord.encode(batch).to_pylist()
    records = [good[0], b"\xff\xfe not an Example", good[1], good[2]]
    (tmp_path / "x.tfrecord").write_bytes(tfrecord.frame(records))
    table, letters, _ = _read(tmp_path, ["x.tfrecord"], "tfrecord", errors=BUDGET)
    assert table.column("day").to_pylist() == [1, 2, 3]
    assert table.column(SEQ).to_pylist() == [0, 2, 3]
    assert [d.seq for d in letters] == [1]
    (tmp_path / "y.tfrecord").write_bytes(tfrecord.frame([b"\xff\xfe", b"\x0a\x05junk"]))
    with pytest.raises(StageError, match=r"y\.tfrecord.*not tf\.train\.Example"):
        _read(tmp_path, ["y.tfrecord"], "tfrecord", errors=BUDGET)


@pytest.mark.parametrize(("declared", "expected"), [
    ("double", r"feature 'day' is stored as int64_list, which cannot be read as double .* "
               r"Declare it as int64"),
    ("string", r"feature 'day' is stored as int64_list, which cannot be read as string"),
    ("int32", r"feature 'day' is stored as int64_list, which cannot be read as int32")])
def test_ingest_a_declared_type_a_tfrecord_feature_cannot_hold_fails_naming_both(
        tmp_path, declared, expected):
    """tfx-bsl refuses every record of such a file ("Mismatching child array lengths"): the
    error names the file, the feature, how it is stored and what to declare instead."""
    batch = tfrecord.normalize(pa.record_batch({"day": [1, 2], "w": ["rain", "sun"]}))
    (tmp_path / "x.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
    with pytest.raises(StageError, match=r"x\.tfrecord: " + expected):
        _read(tmp_path, ["x.tfrecord"], "tfrecord", errors=BUDGET, schema={"day": declared})


def test_ingest_a_later_tfrecord_file_storing_a_feature_otherwise_fails_naming_it(tmp_path):
    for name, day in (("a", [1, 2]), ("b", [1.5, 2.5])):
        batch = tfrecord.normalize(pa.record_batch({"day": day}))
        (tmp_path / f"{name}.tfrecord").write_bytes(tfrecord.frame(tfrecord.encode(batch)))
    with pytest.raises(StageError, match=r"b\.tfrecord: feature 'day' is stored as float_list, "
                                         r"which cannot be read as int64 .*first file's type"):
        _read(tmp_path, ["a.tfrecord", "b.tfrecord"], "tfrecord", errors=BUDGET)


def test_ingest_unreadable_tfrecord_fails_naming_the_file(tmp_path):
    (tmp_path / "x.tfrecord").write_bytes(b"this is not a TFRecord file at all")
    with pytest.raises(StageError, match=r"unreadable TFRecord file: .*x\.tfrecord: "):
        _read(tmp_path, ["x.tfrecord"], "tfrecord")


def test_ingest_with_a_budget_sets_bad_rows_aside_and_keeps_every_seq(tmp_path):
    (tmp_path / "a.csv").write_text("day,temp\n1,1.0\n\n2,2.0,extra\n3,3.0\n")
    (tmp_path / "b.csv").write_text("day,temp\n4,x\n5,5.0\n")
    table, letters, results = _read(tmp_path, ["a.csv", "b.csv"], errors=BUDGET,
                                    schema={"temp": "double"})
    assert table.column("day").to_pylist() == [1, 3, 5]
    assert table.column(SEQ).to_pylist() == [0, 2, 4]
    assert [(d.seq, d.line, d.raw) for d in letters] == [(1, 4, "2,2.0,extra"), (3, 2, "4,x")]
    assert letters[0].file.endswith("a.csv") and letters[1].file.endswith("b.csv")
    total = sum((r.counts for r in results), start=results[0].counts.__class__())
    assert (total.records_in, total.records_out, total.dead_lettered) == (5, 3, 2)


def test_ingest_jsonl_bad_line_is_a_dead_letter_with_its_text(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"day": 1}\n{"day": \n{"day": 3}\n')
    table, letters, _ = _read(tmp_path, ["x.jsonl"], "jsonl", errors=BUDGET)
    assert table.column(SEQ).to_pylist() == [0, 2]
    assert [(d.seq, d.line, d.raw) for d in letters] == [(1, 2, '{"day": ')]


def test_ingest_a_file_of_only_bad_rows_still_counts_them(tmp_path):
    (tmp_path / "x.csv").write_text("day\n1\n")
    (tmp_path / "y.csv").write_text("day\nx,y\n")
    table, letters, results = _read(tmp_path, ["x.csv", "y.csv"], errors=BUDGET,
                                    schema={"day": "int64"})
    assert table.column(SEQ).to_pylist() == [0]
    assert [d.seq for d in letters] == [1]
    assert np.sum([r.counts.records_in for r in results]) == 2
