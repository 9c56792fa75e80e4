"""What `seqline verify` adds to a run, and what it costs alone (issue 28, decision 50).

Usage: .venv/bin/python benchmarks/verify.py [--smoke] [--rows 1000000] [--repeats 3]
       [--out benchmarks/VERIFY.md]

The job: a seeded CSV of `k` (int), `x` (float), `s` (one of four words) -> ingest ->
tfrecord_write (gzip) -> preprocess (a pyarrow function adding x*x, gzip): two ordered GZIP
TFRecord artifacts of every row, which verify reads back whole. `seqline run` on the local
runner, 2 workers, no cache, with the default verify and with `--no-verify`, alternated
(`--repeats` pairs, after one unmeasured warm-up run); then `seqline verify` of one of the
runs alone, `--repeats` times. Wall time of each process, medians. The machine may be shared
(2 cores; a CI run in the background when the figures below were taken), so pairs alternate and
only medians are compared. The "before" figures were measured the same way with the code before
decision 50 (commit 9588b07) and are kept here as numbers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml
from pyarrow import csv

BENCHMARKS = Path(__file__).resolve().parent
SEQLINE = Path(sys.executable).parent / "seqline"
WORDS = np.array(["alpha", "beta", "gamma", "delta"])
FEATURES = '''\
import pyarrow.compute as pc


def add_square(batch):
    return batch.append_column("x2", pc.multiply(batch.column("x"), batch.column("x")))
'''
# Before decision 50 (commit 9588b07), 1M rows, medians of 2 alternated pairs on the shared
# 2-core machine (load average 11-15 from a CI run): run with verify, without, verify alone.
BEFORE = {"with": 54.33, "without": 34.68, "alone": 21.58}
# The same load did not hold for "after" (load average 3-5), so the before column overstates
# the gain; this pair was measured side by side, alternated, under the same load.
SIDE_BY_SIDE = ("Side by side under the same load (load average 3-6), `verify_run` of one 1M-row "
                "run in a fresh process, 3 alternated pairs, medians: before (9588b07) 7.09 s, "
                "after 4.32 s. The before column above was measured under a heavier load "
                "(11-15) than the after column (3-5): compare the ratios, and this pair.")


def make_job(folder: Path, rows: int, *, stored: bool = True, name: str = "verify-bench") -> Path:
    """The CSV (k, x, s; seeded), the feature function and the pipeline file, named `name`:
    ingest -> tfrecord_write (unless not `stored`) -> preprocess; the pipeline's path.
    (benchmarks/startup.py's tiny run and benchmarks/codec.py build theirs here too.)"""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    table = pa.table({"k": np.arange(rows, dtype=np.int64), "x": rng.normal(0, 1, rows).round(4),
                      "s": WORDS[rng.integers(0, len(WORDS), rows)]})
    csv.write_csv(table, folder / "input.csv", csv.WriteOptions(quoting_style="none"))
    (folder / "features.py").write_text(FEATURES)
    stages = [{"name": "read", "component": "ingest",
               "params": {"format": "csv", "paths": ["input.csv"]}},
              {"name": "examples", "component": "tfrecord_write",
               "params": {"compression": "gzip"}},
              {"name": "features", "component": "preprocess",
               "params": {"fn": "features:add_square", "batch_format": "pyarrow",
                          "compression": "gzip"}}]
    if not stored:
        del stages[1]
    (folder / "pipeline.yaml").write_text(yaml.safe_dump({"name": name, "stages": stages},
                                                         sort_keys=False))
    return folder / "pipeline.yaml"


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(pipeline: Path, repeats: int) -> dict[str, list[float]]:
    folder = pipeline.parent
    runs = {"with": [], "without": [], "alone": []}

    def run(run_id: str, *options: str) -> float:
        return timed([str(SEQLINE), "run", str(pipeline), "--root", "root", "--run-id", run_id,
                      "--workers", "2", "--no-cache", *options], folder)

    run("warm", "--no-verify")  # page cache, imports' .pyc: not counted
    for i in range(repeats):
        runs["with"].append(run(f"with-{i}"))
        runs["without"].append(run(f"without-{i}", "--no-verify"))
    for _ in range(repeats):
        runs["alone"].append(timed([str(SEQLINE), "verify", "--root", "root", "with-0"], folder))
    return runs


def report(rows: int, runs: dict[str, list[float]]) -> str:
    after = {k: statistics.median(v) for k, v in runs.items()}

    def ratio(figures: dict[str, float]) -> str:
        return f"{figures['with'] / figures['without']:.2f}"

    def listed(key: str) -> str:
        return ", ".join(f"{v:.2f}" for v in runs[key])

    lines = [f"# seqline verify at {rows:,} rows", "",
             "| figure | before (9588b07) | after | after, each run (s) |",
             "| --- | ---: | ---: | --- |",
             f"| run with verify ÷ run with `--no-verify` | {ratio(BEFORE)} | {ratio(after)} | |",
             f"| run with verify (s) | {BEFORE['with']:.2f} | {after['with']:.2f} | "
             f"{listed('with')} |",
             f"| run with `--no-verify` (s) | {BEFORE['without']:.2f} | "
             f"{after['without']:.2f} | {listed('without')} |",
             f"| `seqline verify` alone (s) | {BEFORE['alone']:.2f} | {after['alone']:.2f} | "
             f"{listed('alone')} |", "",
             "Medians; local runner, 2 workers, no cache; wall time of each `seqline` process. "
             "Job: CSV (k, x, s) -> ingest -> tfrecord_write (gzip) -> preprocess (pyarrow, "
             "gzip); verify reads both TFRecord artifacts whole. Made by "
             "`benchmarks/verify.py` (its docstring says how); the machine was shared, so the "
             "absolute seconds are noisy and only the ratios compare.", "", SIDE_BY_SIDE]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "VERIFY.md")
    args = parser.parse_args()
    rows, repeats = (2_000, 1) if args.smoke else (args.rows, args.repeats)
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        runs = measure(make_job(Path(tmp), rows), repeats)
    text = report(rows, runs)
    print(text)
    if not args.smoke:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
