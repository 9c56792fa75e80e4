"""The peers of benchmarks/compare.py, one job per process: `python compare_peers.py JOB ...`.

Each job prints its in-process figures as the last line, `RESULT {json}`; compare.py times
the whole process from outside (wall clock, peak RSS of the process tree). The user functions
are imported from the job folder (`features.py`, a copy of compare_userfns.py), which
compare.py puts on PYTHONPATH so that Beam's and Ray's worker processes import it too.

Jobs:
  tfdata   TFRecordDataset(files).batch(B).map(parse + fn, AUTOTUNE, deterministic) to the end
  ray      Ray Data: read_csv -> map_batches(add_features) -> write_tfrecords, order preserved
  beam     Beam on the FnApiRunner (multi_processing): ReadFromText + csv per line -> per-row
           fn and tf.train.Example -> WriteToTFRecord. (Beam's ReadFromCsv goes through
           apache_beam.dataframe, which fails on pandas 3: "type object 'DataFrame' has no
           attribute 'first'".)
  tight    one process: pyarrow CSV -> add_features -> tfx-bsl encoder -> tf.io.TFRecordWriter
  skew     seqline's block engine, ordered vs unordered on skewed latency (runner_throughput.py)
"""

from __future__ import annotations

import argparse
import csv
import functools
import glob
import importlib
import json
import os
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent


def _features():
    """The job folder's `features.py` (on PYTHONPATH, so engine workers find it too)."""
    return importlib.import_module("features")


def _result(**figures) -> None:
    print("RESULT " + json.dumps(figures), flush=True)


def tfdata(args) -> None:
    import tensorflow as tf

    files = sorted(glob.glob(args.files))
    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "a": tf.io.FixedLenFeature([], tf.float32),
            "b": tf.io.FixedLenFeature([], tf.float32), "c": tf.io.FixedLenFeature([], tf.int64),
            "name": tf.io.FixedLenFeature([], tf.string),
            "__seq__": tf.io.FixedLenFeature([], tf.int64)}

    def parse_and_add(serialized):  # add_features in TF ops
        x = tf.io.parse_example(serialized, spec)
        return {**x, "ab": x["a"] * x["b"], "log_c": tf.math.log1p(tf.cast(x["c"], tf.float64)),
                "a_minus_b": x["a"] - x["b"], "c_mod_7": tf.math.floormod(x["c"], 7)}

    start = time.perf_counter()
    ds = (tf.data.TFRecordDataset(files, compression_type="GZIP")
          .batch(args.batch)
          .map(parse_and_add, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))
    rows, last_seq = 0, -1
    for batch in ds:
        seq = batch["__seq__"].numpy()
        assert seq[0] > last_seq, "tf.data returned batches out of order"
        last_seq = int(seq[-1])
        rows += len(seq)
    _result(rows=rows, seconds=time.perf_counter() - start, files=len(files))


def ray_data(args) -> None:
    import ray

    start = time.perf_counter()
    # a Ray of its own ("local"), not a cluster that `ray start` left on the machine
    ray.init(address="local", num_cpus=args.workers, include_dashboard=False,
             logging_level="ERROR",
             log_to_driver=False)
    init = time.perf_counter() - start
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    job = time.perf_counter()
    (ray.data.read_csv(args.csv)
     .map_batches(_features().add_features, batch_format="pyarrow", batch_size=args.batch)
     .write_tfrecords(args.out, arrow_open_stream_args={"compression": "gzip"}))
    seconds = time.perf_counter() - job
    files = len(os.listdir(args.out))
    ray.shutdown()
    _result(rows=args.rows, seconds=seconds, init_seconds=init, files=files)


def _parse_line(line: str) -> dict:
    """One CSV line as a dict typed like the generated columns (the readers' default CSV)."""
    fields = next(csv.reader([line]))
    return {name: kind(value) for (name, kind), value in
            zip(_features().CSV_COLUMNS.items(), fields, strict=True)}


def _to_example(row: dict) -> bytes:
    import tensorflow as tf

    feature = {}
    for key, value in _features().add_features_row(row).items():
        if isinstance(value, str):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif isinstance(value, float):
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def beam(args) -> None:
    import apache_beam as beam_
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    options = PipelineOptions(["--direct_running_mode=multi_processing",
                               f"--direct_num_workers={args.workers}"])
    start = time.perf_counter()
    with beam_.Pipeline(runner=FnApiRunner(), options=options) as p:
        (p
         | beam_.io.ReadFromText(args.csv, skip_header_lines=1)
         | beam_.Map(_parse_line)
         | beam_.Map(_to_example)
         | beam_.io.WriteToTFRecord(os.path.join(args.out, "part"),
                                    file_name_suffix=".tfrecord.gz",
                                    compression_type=CompressionTypes.GZIP))
    _result(rows=args.rows, seconds=time.perf_counter() - start,
            files=len(os.listdir(args.out)))


def _as_feature_lists(batch):
    """Scalar columns as one-value large lists of int64 / float32 / binary (the encoder's input)."""
    import numpy as np
    import pyarrow as pa

    offsets = pa.array(np.arange(batch.num_rows + 1, dtype=np.int64))
    columns = []
    for col in batch.columns:
        if pa.types.is_floating(col.type):
            col = col.cast(pa.float32())
        elif pa.types.is_integer(col.type):
            col = col.cast(pa.int64())
        else:
            col = col.cast(pa.large_binary())
        columns.append(pa.LargeListArray.from_arrays(offsets, col))
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def tight(args) -> None:
    import pyarrow.csv as pacsv
    import tensorflow as tf
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

    add_features = _features().add_features
    start = time.perf_counter()
    encoder = RecordBatchToExamplesEncoder()
    rows = 0
    with tf.io.TFRecordWriter(os.path.join(args.out, "part.tfrecord.gz"),
                              options="GZIP") as writer:
        for batch in pacsv.open_csv(args.csv):
            for record in encoder.encode(_as_feature_lists(add_features(batch))):
                writer.write(record)
            rows += batch.num_rows
    _result(rows=rows, seconds=time.perf_counter() - start)


def skew(args) -> None:
    """ordered / unordered throughput on the contract suite's skewed latency, one runner."""
    sys.path.insert(0, str(BENCHMARKS))
    from runner_throughput import RUNNERS, USERFNS, _timed

    from seqline.components.preprocess import apply_batch
    from seqline.orchestration.runners import make_runner
    from seqline.pipeline.tasks import MapTask

    # the task of runner_throughput._task (no shard sink), built here with the row's base_ms
    fn = functools.partial(apply_batch, fn_ref="latency:skewed", batch_format="pyarrow",
                           base_dir=str(USERFNS), fn_kwargs={"base_ms": args.base_ms})
    task = MapTask("bench", fn)
    options = {"workers": args.workers, **RUNNERS[args.runner],
               "window": args.window_factor * args.workers or None}  # 0: adaptive
    pairs = []
    with make_runner(args.runner, **options) as runner:
        _timed(runner, task, 1000, args.block)  # start the engine's workers before timing
        for _ in range(args.repeats):
            unordered = _timed(runner, task, args.rows, args.block, ordered=False)
            ordered = _timed(runner, task, args.rows, args.block, ordered=True)
            pairs.append([ordered, unordered])
    _result(rows=args.rows, pairs=pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", choices=["tfdata", "ray", "beam", "tight", "skew"])
    parser.add_argument("--files", help="tfdata: a glob of gzip TFRecord files")
    parser.add_argument("--csv", help="ray, beam, tight: the input CSV")
    parser.add_argument("--out", help="ray, beam, tight: an empty output folder")
    parser.add_argument("--rows", type=int, default=0, help="rows in the input")
    parser.add_argument("--batch", type=int, default=16_384)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runner", default="local", help="skew: local, beam or ray")
    parser.add_argument("--window-factor", type=int, default=4)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--base-ms", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    {"tfdata": tfdata, "ray": ray_data, "beam": beam, "tight": tight, "skew": skew}[args.job](args)


if __name__ == "__main__":
    main()
