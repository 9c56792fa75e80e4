"""What `seqline verify` adds to a run, and what it costs alone (issue 28, decision 50).

Usage: .venv/bin/python benchmarks/verify.py [--smoke] [--rows 1000000] [--repeats 3]
       [--out benchmarks/VERIFY.md]

The job: a seeded CSV of `k` (int), `x` (float), `s` (one of four words) -> ingest ->
tfrecord_write (gzip) -> preprocess (a pyarrow function adding x*x, gzip): two ordered GZIP
TFRecord artifacts of every row, which verify reads back whole. `seqline run` on the local
runner, 2 workers, no cache, with the default verify and with `--no-verify`, alternated
(`--repeats` pairs, after one unmeasured warm-up run); then `seqline verify` of one of the
runs alone, `--repeats` times. Wall time of each process, medians. Pairs alternate, so a
machine whose speed drifts weighs on both sides alike. The "before" figures were measured the
same way with the code before the vouched scan (commit 850f8d6) and are kept here as numbers.
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
from compare_report import processor
from pyarrow import csv

BENCHMARKS = Path(__file__).resolve().parent
SEQLINE = Path(sys.executable).parent / "seqline"
WORDS = np.array(["alpha", "beta", "gamma", "delta"])
FEATURES = '''\
import pyarrow.compute as pc


def add_square(batch):
    return batch.append_column("x2", pc.multiply(batch.column("x"), batch.column("x")))
'''
# Before the vouched scan (commit 850f8d6: decision 50's scanner, data CRCs and every map
# entry walked), 1M rows, on this machine type while it was quiet: medians of 3 runs with
# verify, 3 without, and 2 of `seqline verify` alone (wall s).
BEFORE = {"with": 6.73, "without": 4.70, "alone": 2.48}
BEFORE_COMMIT = "850f8d6"
# Decision 50's own before and after, on a shared machine (its figures are kept there).
SIDE_BY_SIDE = ("Decision 50's scanner took the ratio from 1.57 (commit 9588b07, whole "
                "Examples decoded) to 1.17 on a shared machine; the quiet machine above had it "
                "at 1.43 before the vouched scan (decision 50's addendum).")


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
             f"| figure | before ({BEFORE_COMMIT}) | after | after, each run (s) |",
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
             "`benchmarks/verify.py` (its docstring says how), on a quiet 2-core machine "
             f"({processor()}).", "", SIDE_BY_SIDE]
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
