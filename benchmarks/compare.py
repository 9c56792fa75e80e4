"""Side-by-side comparisons of seqline with its peers, on the same data and the same function.

Usage: .venv/bin/python benchmarks/compare.py [--smoke] [--repeats 3] [--rows 1000000]
       [--peer-rows N] [--only 1,3,6] [--out PATH]

Prints one table and writes it, with the machine, the versions and notes on what exactly ran,
to benchmarks/RESULTS.md (with --smoke: to a temporary file unless --out is given). Every
seqline job and every peer runs in its own process (compare_peers.py for the peers), timed
by wall clock from outside, with the peak RSS of its process tree sampled every 50 ms; the
in-process time (what the job reports itself, start-up excluded) is kept in the notes.
A ratio is computed per repeat (repeat i of one side against repeat i of the other) and
reported as min / median / max; a target is judged on the median. --smoke uses tiny sizes and
asserts nothing about speed. Exit code: 0 when every comparison ran, 1 when one failed (its
error is in the table's notes), whatever the figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml
from compare_measure import BenchError, Run, measure
from compare_report import TITLES, Row, report, spread, table
from pyarrow import csv

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
EXAMPLE = REPO / "data" / "seattle_weather"
PEERS = [sys.executable, str(BENCHMARKS / "compare_peers.py")]
SEQLINE = [sys.executable, "-m", "seqline.orchestration.cli"]
NAMES = np.array(["alpha", "beta", "gamma", "delta", "epsilon"])


# ---------------------------------------------------------------------------- formatting

def rate(rows: float, seconds: float) -> str:
    return f"{rows / seconds:,.0f} rows/s"


def seconds_list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


# ---------------------------------------------------------------------------- the bench

class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.job = work / "job"  # pipeline files, features.py and the generated CSVs
        self.job.mkdir()
        shutil.copy(BENCHMARKS / "compare_userfns.py", self.job / "features.py")
        self.root = work / "root"
        self.rows: list[Row] = []
        self.notes: dict[str, list[str]] = {}
        self.failed: list[str] = []
        self._csvs: dict[int, Path] = {}
        self._jobs: dict[tuple, list[Run]] = {}
        self._count = 0
        self.peer_rows = args.peer_rows or min(args.rows, 250_000)
        path = os.pathsep.join(filter(None, [str(self.job), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1",
                    "TF_CPP_MIN_LOG_LEVEL": "2"}
        self.ray_env = dict(self.env)
        if importlib.util.find_spec("crc32c") is None:  # Ray Data's TFRecord writer needs it
            self.ray_env["PYTHONPATH"] = os.pathsep.join(
                [str(BENCHMARKS / "compare_shims"), path])
            self.crc_shim = True
        else:
            self.crc_shim = False

    # -- data and pipelines

    def csv(self, rows: int) -> Path:
        """The generated CSV of `rows` rows (seeded), written once per size."""
        if rows not in self._csvs:
            rng = np.random.default_rng(0)
            table = pa.table({"id": np.arange(rows, dtype=np.int64),
                              "a": rng.normal(0.0, 1.0, rows).round(4),
                              "b": rng.uniform(0.0, 10.0, rows).round(4),
                              "c": rng.integers(0, 1000, rows),
                              "name": NAMES[rng.integers(0, len(NAMES), rows)]})
            path = self.job / f"input-{rows}.csv"
            csv.write_csv(table, path, csv.WriteOptions(quoting_style="none"))
            self._csvs[rows] = path
        return self._csvs[rows]

    def pipeline(self, name: str, stages: list[dict]) -> Path:
        path = self.job / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"name": name, "stages": stages}, sort_keys=False))
        return path

    def job_pipeline(self, rows: int, fn: str = "features:add_features",
                     block_records: int | None = None) -> Path:
        """The whole job: CSV -> ingest -> preprocess(fn) -> ordered gzip TFRecords."""
        read = {"format": "csv", "paths": [self.csv(rows).name]}
        if block_records:
            read["block_records"] = block_records
        name = f"job-{rows}-{fn.split(':')[1]}-{block_records or 'default'}"
        return self.pipeline(name, [
            {"name": "read", "component": "ingest", "params": read},
            {"name": "features", "component": "preprocess",
             "params": {"fn": fn, "batch_format": "pyarrow", "compression": "gzip"}}])

    def seqline(self, pipeline: Path, runner: str = "local", workers: int = 2,
                *options: str) -> Run:
        """`seqline run --no-verify`; result: the run's own seconds and each stage's."""
        self._count += 1
        run_id = f"{pipeline.stem}-{runner}-{workers}w-{self._count}"
        run = measure([*SEQLINE, "run", str(pipeline), "--runner", runner, "--root",
                       str(self.root), "--run-id", run_id, "--workers", str(workers),
                       "--no-verify", *options], self.env,
                      f"seqline {pipeline.parent.name}/{pipeline.stem}, {runner}, "
                      f"{workers} worker(s)")
        found = re.search(r"stages \(([\d.]+) s\)", run.output)
        run.result["seconds"] = float(found.group(1)) if found else float("nan")
        run_dir = self.root / "runs" / run_id
        run.result["stages"] = {m.parent.name: json.loads(m.read_text())
                                for m in run_dir.glob("*/manifest.json")}
        shutil.rmtree(run_dir)  # keep the disk bounded; what is needed is read
        return run

    def peer(self, job: str, rows: int, *options: str, env: dict | None = None) -> Run:
        out = self.work / "peer-out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        try:
            return measure([*PEERS, job, "--out", str(out), "--rows", str(rows), *options],
                           env or self.env, f"peer {job}, {rows:,} rows")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def job_runs(self, rows: int) -> list[Run]:
        """The whole job on the local runner with 2 workers, once per repeat (shared)."""
        key = ("job", rows)
        if key not in self._jobs:
            pipeline = self.job_pipeline(rows)
            self._jobs[key] = [self.seqline(pipeline) for _ in range(self.args.repeats)]
        return self._jobs[key]

    # -- rows

    def add(self, key: str, what: str, seqline: str, peer: str, ratios: list[float] | None,
            target: str, check: Callable[[float], bool] | None, digits: int = 2) -> None:
        met = "-" if check is None or not ratios else \
            ("yes" if check(statistics.median(ratios)) else "no")
        self.rows.append(Row(key, what, seqline, peer, ratios, target, met, digits))
        print(f"  {key}: {spread(ratios or [], digits)} (target {target}: {met})", flush=True)

    def note(self, number: str, text: str) -> None:
        self.notes.setdefault(number, []).append(text)


# ---------------------------------------------------------------------------- comparisons

def c1_ordering(b: Bench) -> None:
    rows, base_ms = (2_000, 2.0) if b.args.smoke else (20_000, 10.0)
    runners = ["local"] if b.args.smoke else ["local", "beam", "ray"]
    for runner in runners:
        run = measure([*PEERS, "skew", "--runner", runner, "--rows", str(rows), "--block", "50",
                       "--base-ms", str(base_ms), "--window-factor", "4",
                       "--repeats", str(b.args.repeats)], b.env,
                      f"skew {runner}: unordered + ordered passes, engine start")
        pairs = run.result["pairs"]
        ratios = [unordered / ordered for ordered, unordered in pairs]
        ordered = statistics.median(p[0] for p in pairs)
        unordered = statistics.median(p[1] for p in pairs)
        b.add(f"1 ({runner})", "ordered ÷ unordered throughput, skewed latency, window 4× "
              "workers", f"ordered {rate(rows, ordered)}",
              f"unordered {rate(rows, unordered)}", ratios, "≥ 0.95", lambda r: r >= 0.95)
        b.note("1", f"{runner}: ordered s per repeat {seconds_list([p[0] for p in pairs])}; "
               f"unordered {seconds_list([p[1] for p in pairs])}; process wall "
               f"{run.wall:.1f} s.")
    b.note("1", f"benchmarks/runner_throughput.py's measurement (its `_timed`, imported) in "
           f"compare_peers.py `skew`: {rows:,} rows of one int64 column in 50-row blocks, "
           f"user function `tests/userfns/latency.py:skewed` (sleeps {base_ms:g} ms × U(0.5, "
           "1.5), about 1 block in 20 sleeps 20× longer), 2 workers, window 8 blocks, the "
           "runner's engine started before timing; per repeat one unordered pass then one "
           "ordered pass on the same runner (in-process time of `map_blocks` to its last "
           "result). The task is built without a shard sink, as runner_throughput.py did "
           "before preprocess gained one: runner_throughput.py's own `_task` now fails with "
           "`TypeError: make_task() missing 1 required positional argument: 'out_dir'`.")


def c2_tfdata(b: Bench) -> None:
    rows = b.args.rows
    prep = b.pipeline("prep-tfrecords", [
        {"name": "read", "component": "ingest",
         "params": {"format": "csv", "paths": [b.csv(rows).name]}},
        {"name": "examples", "component": "tfrecord_write", "params": {"compression": "gzip"}}])
    made = measure([*SEQLINE, "run", str(prep), "--root", str(b.job / "prep"), "--run-id",
                    "prep", "--workers", "2", "--no-verify"], b.env,
                   "seqline: store the CSV as TFRecords for 2 (not timed)")
    shards = "prep/runs/prep/examples/*.tfrecord.gz"
    pipeline = b.pipeline("from-tfrecords", [
        {"name": "read", "component": "ingest", "params": {"format": "tfrecord",
                                                            "paths": [shards]}},
        {"name": "features", "component": "preprocess",
         "params": {"fn": "features:add_features", "batch_format": "pyarrow",
                    "compression": "none"}}])
    ours, theirs = [], []
    for _ in range(b.args.repeats):
        ours.append(b.seqline(pipeline))
        theirs.append(b.peer("tfdata", rows, "--files", str(b.job / shards), "--batch", "16384"))
        if theirs[-1].result["rows"] != rows:
            raise BenchError(f"tf.data read {theirs[-1].result['rows']} rows, not {rows}")
    ratios = [t.wall / o.wall for o, t in zip(ours, theirs, strict=True)]
    b.add("2", "ordered preprocessing over the same TFRecords",
          rate(rows, statistics.median(r.wall for r in ours)),
          f"tf.data {rate(rows, statistics.median(r.wall for r in theirs))}",
          ratios, "≥ 1.0×", lambda r: r >= 1.0)
    in_ours = [o.result["seconds"] for o in ours]
    in_theirs = [t.result["seconds"] for t in theirs]
    in_ratios = [t / o for o, t in zip(in_ours, in_theirs, strict=True)]
    b.note("2", f"Input: the {rows:,}-row CSV stored once by seqline (ingest → tfrecord_write, "
           f"gzip, 65,536 records per shard; {made.wall:.1f} s, not timed): "
           f"{len(list(b.job.glob(shards)))} shards of tf.train.Example (id, a, b, c, name, "
           "__seq__). seqline: `seqline run` of ingest (format tfrecord, the shards' glob, "
           "16,384-record blocks) → preprocess (features:add_features, pyarrow; its output "
           "stored as uncompressed TFRecord shards, since preprocess always stores) on the "
           "local runner, 2 workers. tf.data: `TFRecordDataset(shards, compression_type="
           "'GZIP').batch(16384).map(parse_example + the same four columns in TF ops, "
           "num_parallel_calls=AUTOTUNE, deterministic=True)` iterated to the end (checking "
           "that batches come in seq order), writing nothing.")
    b.note("2", f"Process wall s per repeat: seqline {seconds_list([o.wall for o in ours])}, "
           f"tf.data {seconds_list([t.wall for t in theirs])}. In-process s (start-up "
           f"excluded): seqline {seconds_list(in_ours)} ({rate(rows, statistics.median(in_ours))}"
           f"), tf.data {seconds_list(in_theirs)} ({rate(rows, statistics.median(in_theirs))})"
           f"; ratio of in-process rates {spread(in_ratios)}. Peak RSS MB: seqline "
           f"{statistics.median(o.peak_mb for o in ours):,.0f}, tf.data "
           f"{statistics.median(t.peak_mb for t in theirs):,.0f}.")


def _vs_peer(b: Bench, number: str, peer: str, job: str, env: dict, what: str,
             also_runner: str) -> None:
    """The whole job: seqline (local) against a peer engine on the same CSV, `peer_rows` rows."""
    rows = b.peer_rows
    ours = b.job_runs(rows)
    theirs = [b.peer(job, rows, "--csv", str(b.csv(rows)), env=env)
              for _ in range(b.args.repeats)]
    ratios = [t.wall / o.wall for o, t in zip(ours, theirs, strict=True)]
    b.add(number, what, rate(rows, statistics.median(o.wall for o in ours)),
          f"{peer} {rate(rows, statistics.median(t.wall for t in theirs))}", ratios, "≥ 10×",
          lambda r: r >= 10)
    in_ours = [o.result["seconds"] for o in ours]
    in_theirs = [t.result["seconds"] for t in theirs]
    b.note(number, f"{rows:,} rows. Process wall s per repeat: seqline "
           f"{seconds_list([o.wall for o in ours])}, {peer} "
           f"{seconds_list([t.wall for t in theirs])}. In-process s: seqline (the run's own "
           f"time, engine start included) {seconds_list(in_ours)}, {peer} (the job after "
           f"imports{', after ray.init' if job == 'ray' else ''}) {seconds_list(in_theirs)}; "
           f"ratio of in-process rates "
           f"{spread([t / o for o, t in zip(in_ours, in_theirs, strict=True)])}. Peak RSS MB "
           f"(process tree): seqline {statistics.median(o.peak_mb for o in ours):,.0f}, "
           f"{peer} {statistics.median(t.peak_mb for t in theirs):,.0f}.")
    if not b.args.smoke:  # the same job on seqline's runner for that engine
        same = [b.seqline(b.job_pipeline(rows), runner=also_runner)
                for _ in range(b.args.repeats)]
        b.note(number, f"seqline on its own {also_runner} runner, same job: process wall s "
               f"{seconds_list([s.wall for s in same])} "
               f"({rate(rows, statistics.median(s.wall for s in same))}); {peer} ÷ seqline-on-"
               f"{also_runner} wall ratio "
               f"{spread([t.wall / s.wall for s, t in zip(same, theirs, strict=True)])}; peak "
               f"RSS {statistics.median(s.peak_mb for s in same):,.0f} MB.")


def c3_ray_data(b: Bench) -> None:
    _vs_peer(b, "3", "Ray Data", "ray", b.ray_env, "whole job: CSV → feature function → "
             "ordered TFRecords, vs Ray Data", "ray")
    b.note("3", "seqline: `seqline run` (ingest csv, 16,384-record blocks → preprocess "
           "features:add_features, pyarrow, gzip TFRecords with `__seq__`), local runner, 2 "
           "workers, --no-verify. Ray Data (compare_peers.py `ray`): `ray.init(num_cpus=2, "
           "include_dashboard=False)`, `DataContext.get_current().execution_options."
           "preserve_order = True`, `read_csv` → `map_batches(add_features, batch_format="
           "'pyarrow', batch_size=16384)` (the same function; Ray passes a pyarrow.Table) → "
           "`write_tfrecords(out, arrow_open_stream_args={'compression': 'gzip'})`. Ray Data "
           "converts rows to tf.train.Example in Python, one row at a time.")
    if b.crc_shim:
        b.note("3", "Ray Data's TFRecord writer imports the `crc32c` package, which is not "
               "installed here (seqline depends on google-crc32c); the Ray peer runs with "
               "benchmarks/compare_shims/crc32c.py, a two-line stand-in calling google_crc32c "
               "(also C).")


def c4_beam(b: Bench) -> None:
    _vs_peer(b, "4", "Beam", "beam", b.env, "whole job: CSV → feature function → ordered "
             "TFRecords, vs Beam", "beam")
    b.note("4", "seqline: as in 3. Beam (compare_peers.py `beam`): `beam.Pipeline(runner="
           "FnApiRunner(), options=['--direct_running_mode=multi_processing', "
           "'--direct_num_workers=2'])`: `ReadFromText(csv, skip_header_lines=1)` → "
           "`Map(parse one line with csv.reader)` → `Map(add_features_row + tf.train.Example "
           "→ bytes)` → `WriteToTFRecord(prefix, '.tfrecord.gz', GZIP)`. Beam's `ReadFromCsv` "
           "(asked for) goes through apache_beam.dataframe, which fails on the installed "
           "pandas 3: `AttributeError: type object 'DataFrame' has no attribute 'first'`; "
           "hence ReadFromText and a per-line parse, the usual Beam CSV reading. Beam does "
           "not keep order; nothing here asks it to.")


def c5_limit(b: Bench) -> None:
    rows = b.args.rows
    ours = b.job_runs(rows)
    theirs = [b.peer("tight", rows, "--csv", str(b.csv(rows))) for _ in range(b.args.repeats)]
    ratios = [t.wall / (2 * o.wall) for o, t in zip(ours, theirs, strict=True)]
    one = statistics.median(t.wall for t in theirs)
    b.add("5", "the same job on 2 workers ÷ the limit (2 × one tight process)",
          rate(rows, statistics.median(o.wall for o in ours)),
          f"2 × {rate(rows, one)} = {2 * rows / one:,.0f} rows/s", ratios, "≥ 0.75",
          lambda r: r >= 0.75)
    in_ours = [o.result["seconds"] for o in ours]
    in_theirs = [t.result["seconds"] for t in theirs]
    b.note("5", f"{rows:,} rows. The limit (compare_peers.py `tight`): one process, "
           "`pyarrow.csv.open_csv` batches → add_features → scalars as one-value lists → "
           "tfx-bsl `RecordBatchToExamplesEncoder().encode` → `tf.io.TFRecordWriter(path, "
           "'GZIP')`, one file, no seq column, no order check, no manifest. Ratio = seqline "
           "rows/s ÷ (2 × the tight process's rows/s), both by process wall time. Wall s: "
           f"seqline {seconds_list([o.wall for o in ours])}, tight "
           f"{seconds_list([t.wall for t in theirs])}. In-process: seqline "
           f"{seconds_list(in_ours)} s, tight {seconds_list(in_theirs)} s; ratio of "
           "in-process rates "
           f"{spread([t / (2 * o) for o, t in zip(in_ours, in_theirs, strict=True)])}.")


def c6_scaling(b: Bench) -> None:
    rows = 40_000 if b.args.smoke else min(b.args.rows, 600_000)
    runners = ["local"] if b.args.smoke else ["local", "beam", "ray"]
    pipeline = b.job_pipeline(rows, fn="features:burn", block_records=2_000)
    sys.path.insert(0, str(BENCHMARKS))
    from compare_userfns import burn

    block = pa.record_batch({"x": np.arange(2_000)})
    start = time.process_time()
    for _ in range(10):
        burn(block)
    burn_ms = (time.process_time() - start) * 100  # CPU ms per block, measured now
    for runner in runners:
        one, two = [], []
        for _ in range(b.args.repeats):
            one.append(b.seqline(pipeline, runner=runner, workers=1))
            two.append(b.seqline(pipeline, runner=runner, workers=2))
        stage = [[r.result["stages"]["features"]["seconds"] for r in runs] for runs in (one, two)]
        ratios = [a / c for a, c in zip(*stage, strict=True)]
        b.add(f"6 ({runner})", "2 workers ÷ 1 worker, CPU-bound function",
              f"2 workers {rate(rows, statistics.median(stage[1]))}",
              f"1 worker {rate(rows, statistics.median(stage[0]))}", ratios, "≥ 1.7",
              lambda r: r >= 1.7)
        b.note("6", f"{runner}: preprocess stage s (manifest) 1 worker "
               f"{seconds_list(stage[0])}, 2 workers {seconds_list(stage[1])}; process wall s "
               f"1 worker {seconds_list([r.wall for r in one])}, 2 workers "
               f"{seconds_list([r.wall for r in two])} (wall ratio "
               f"{spread([a.wall / c.wall for a, c in zip(one, two, strict=True)])}).")
    b.note("6", f"{rows:,} rows in 2,000-record blocks ({rows // 2_000} blocks), ingest csv → "
           "preprocess `features:burn` (1,000 passes of `x = sin(x) + 1` over 2,000 floats; "
           f"{burn_ms:.0f} ms of CPU per block, timed in the benchmark's process just before; "
           "the machine's speed varies between runs, 16-31 ms seen) → gzip TFRecords, "
           "`seqline run --workers 1` and `--workers 2` (window 4 × workers). The ratio is "
           "of the preprocess stage's own seconds from its manifest (start-up of the "
           "interpreter and engine excluded; the driver's reading and the workers' shard "
           "writing included); the process wall ratio is given too. Two cores: the driver "
           "shares them with the workers.")


def c7_assembly(b: Bench) -> None:
    """The whole line on the generated data, overlapped and one stage after another."""
    rows = b.args.rows
    read = {"format": "csv", "paths": [b.csv(rows).name]}
    pipeline = b.pipeline(f"line-{rows}", [
        {"name": "read", "component": "ingest", "params": read},
        {"name": "examples", "component": "tfrecord_write", "params": {}},
        {"name": "features", "component": "preprocess",
         "params": {"fn": "features:add_features", "batch_format": "pyarrow"}},
        {"name": "batches", "component": "batching",
         "params": {"batch_size": 1024, "label": "ab", "features": ["a", "b", "log_c"],
                    "eval_fraction": 0.1}},
        {"name": "model", "component": "train",
         "params": {"model": "tabular_regression", "epochs": 1}}])
    units = {"read + examples": ("read", "examples"), "features": ("features",),
             "batches": ("batches",), "model": ("model",)}
    ratios, sums, lines, alones = [], [], [], []
    for _ in range(b.args.repeats):
        line = b.seqline(pipeline)
        alone = b.seqline(pipeline, "local", 2, "--one-by-one")
        # ingest stores nothing, so it always streams into tfrecord_write: one unit alone
        times = {unit: max(alone.result["stages"][s]["seconds"] for s in stages)
                 for unit, stages in units.items()}
        slowest = max(times.values())
        ratios.append(line.result["seconds"] / slowest)
        sums.append(line.result["seconds"] / sum(times.values()))
        lines.append(line.result["seconds"])
        alones.append(times)
    b.add("7", "end-to-end assembly line ÷ its slowest stage alone",
          f"{statistics.median(lines):.1f} s for {rows:,} rows, 5 stages",
          f"slowest alone {statistics.median(max(t.values()) for t in alones):.1f} s, "
          f"sum {statistics.median(sum(t.values()) for t in alones):.1f} s",
          ratios, "≤ 1.2", lambda r: r <= 1.2)
    b.note("7", f"The line ingest csv → tfrecord_write → preprocess add_features → batching "
           f"(1,024, eval 10 %) → train tabular_regression (1 epoch) on {rows:,} generated "
           "rows, local runner, 2 workers, queue 4. The peer is the same pipeline with "
           "`--one-by-one` (each stage starts when the one before has committed; ingest "
           "still streams into tfrecord_write, since it stores nothing). Ratio = the line's "
           "run seconds ÷ the slowest stage's seconds alone; line ÷ sum of the stages alone: "
           f"{seconds_list(sums)}. Stage seconds alone per repeat: "
           + "; ".join(", ".join(f"{u} {t:.1f}" for u, t in times.items()) for times in alones)
           + ". On 2 cores every stage here is CPU-bound and they share the same two cores "
           "(workers, the driver's encoding and decoding, TensorFlow), so overlapping them "
           "cannot beat the total CPU work ÷ 2: the line ÷ sum column is the one overlap "
           "moves on this machine.")


def c8_memory(b: Bench) -> None:
    big = b.args.rows
    small = big // 10
    at_big, at_small = b.job_runs(big), b.job_runs(small)
    ratios = [g.peak_mb / s.peak_mb for s, g in zip(at_small, at_big, strict=True)]
    b.add("8", "peak RSS at 10× input ÷ at 1× (whole job, local)",
          f"{statistics.median(g.peak_mb for g in at_big):,.0f} MB at {big:,} rows",
          f"{statistics.median(s.peak_mb for s in at_small):,.0f} MB at {small:,} rows",
          ratios, "≤ 1.1", lambda r: r <= 1.1)
    b.note("8", f"The whole job of 3 (ingest csv → preprocess add_features → gzip TFRecords), "
           f"local runner, 2 workers, at {small:,} rows (1×) and {big:,} rows (10×). Peak RSS: "
           "the sum over the `seqline run` process and all its descendants (forkserver and "
           "workers), sampled every 50 ms; pages shared between processes count once per "
           f"process. Peak MB per repeat: 1× {seconds_list([s.peak_mb for s in at_small])}, "
           f"10× {seconds_list([g.peak_mb for g in at_big])}.")


def _demo(b: Bench, name: str, csv_lines: int | None, epochs: int | None) -> Path:
    folder = b.work / name
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE / "features.py", folder)
    lines = (EXAMPLE / "seattle-weather.csv").read_text().splitlines(keepends=True)
    (folder / "seattle-weather.csv").write_text("".join(lines[:csv_lines + 1] if csv_lines
                                                        else lines))
    spec = yaml.safe_load((EXAMPLE / "pipeline.yaml").read_text())
    for stage in spec["stages"]:
        if stage["component"] == "train" and epochs:
            stage["params"]["epochs"] = epochs
    (folder / "pipeline.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "pipeline.yaml"


def c9_input_wait(b: Bench) -> None:
    pipeline = _demo(b, "demo", None, 1 if b.args.smoke else None)
    shares, steady, walls = [], [], []
    for _ in range(b.args.repeats):
        run = b.seqline(pipeline)
        epochs = run.result["stages"]["model"]["epochs"]
        shares.append(100 * sum(e["input_wait_seconds"] for e in epochs)
                      / sum(e["seconds"] for e in epochs))
        later = epochs[1:] or epochs
        steady.append(100 * sum(e["input_wait_seconds"] for e in later)
                      / sum(e["seconds"] for e in later))
        walls.append(run.wall)
    b.add("9", "training steps' time waiting for input, the demo",
          f"{statistics.median(shares):.1f} % of epoch time (epochs after the first: "
          f"{statistics.median(steady):.1f} %)", "-", shares, "< 5 %", lambda r: r < 5,
          digits=1)
    b.note("9", f"The demo (data/seattle_weather/pipeline.yaml, {len(epochs)} epoch(s)) on "
           "the local runner as an assembly line. A step waits when its batch is handed to "
           "tf.data after the step asked for it (Keras's on_train_batch_begin); the figure "
           "is Σ of those waits ÷ Σ epoch seconds, in %; a step asks when it starts, or, for "
           "an epoch's first step, when it first pulls the input pipeline (in the first epoch "
           "Keras traces the step for seconds before that). The first epoch runs on the "
           "stream: its wait includes the data stages still producing. Epochs after the "
           "first, per repeat: "
           f"{seconds_list(steady)} %. Process wall s: {seconds_list(walls)}.")


def c10_cold_start(b: Bench) -> None:
    pipeline = _demo(b, "cold", 1_000, 1)
    runners = ["local"] if b.args.smoke else ["local", "beam", "ray"]
    for runner in runners:
        runs = [b.seqline(pipeline, runner=runner) for _ in range(b.args.repeats)]
        walls = [r.wall for r in runs]
        b.add(f"10 ({runner})", "cold start: 1,000 rows through all six stages, wall s",
              f"{statistics.median(walls):.1f} s", "-", walls, "report it", None, digits=1)
        stages = runs[0].result["stages"]
        b.note("10", f"{runner}: process wall s {seconds_list(walls)}; the run's own time "
               f"{seconds_list([r.result['seconds'] for r in runs])} s; stage s (first "
               "repeat) " + ", ".join(f"{s} {stages[s]['seconds']:.2f}" for s in
                                      ("read", "examples", "features", "batches", "model",
                                       "evaluation")) + ".")
    b.note("10", "The example pipeline (ingest → tfrecord_write → preprocess → batching → "
           "train → evaluate) on the first 1,000 days of data/seattle_weather, 1 epoch, 2 "
           "workers, --no-verify; wall time of a fresh `python -m seqline.orchestration.cli "
           "run` process, interpreter and imports included. The ratio column is the wall "
           "seconds.")


COMPARISONS: dict[str, Callable[[Bench], None]] = {
    "1": c1_ordering, "2": c2_tfdata, "3": c3_ray_data, "4": c4_beam, "5": c5_limit,
    "6": c6_scaling, "7": c7_assembly, "8": c8_memory, "9": c9_input_wait,
    "10": c10_cold_start}
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, 1 repeat, local runner only; to keep this working")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000, help="generated input size")
    parser.add_argument("--peer-rows", type=int, default=None,
                        help="rows for the Ray Data and Beam comparisons (they run about "
                             "3-5k rows/s here); default min(rows, 250,000)")
    parser.add_argument("--only", default=None, help="comparisons to run, e.g. 1,3,6")
    parser.add_argument("--out", type=Path, default=None, help="where to write the report")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeats = 20_000, 1
    out = args.out or (None if args.smoke else BENCHMARKS / "RESULTS.md")
    chosen = sorted(args.only.split(","), key=int) if args.only else list(COMPARISONS)
    command = " ".join(["benchmarks/compare.py", *sys.argv[1:]])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seqline-compare-") as tmp:
        bench = Bench(args, Path(tmp))
        for number in chosen:
            print(f"{number}. {TITLES[number]} ...", flush=True)
            try:
                COMPARISONS[number](bench)
            except Exception as exc:  # recorded; the other comparisons still run
                bench.failed.append(f"{number}. {TITLES[number]}: {exc!r}"
                                    if not isinstance(exc, BenchError) else
                                    f"{number}. {TITLES[number]}: {exc}")
                bench.add(number, TITLES[number], "FAILED (see Failures)", "-", None, "-", None)
                print(bench.failed[-1], flush=True)
        text = report(bench, time.perf_counter() - start, command)
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="seqline-compare-smoke-")) / "RESULTS.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print("\n" + "\n".join(table(bench.rows)))
    print(f"\nWrote {out} in {(time.perf_counter() - start) / 60:.1f} min.")
    sys.exit(1 if bench.failed else 0)


if __name__ == "__main__":
    main()
