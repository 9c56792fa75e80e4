"""Parallel ingest against driver ingest: rows/s, and the driver process's CPU seconds.

Usage: .venv/bin/python benchmarks/ingest.py [--files 8] [--rows 1000000] [--runner local]
       [--workers 2] [--range-mb 16] [--repeats 1]

Generates `--files` CSV files of `--rows` rows each under build/bench-ingest/ (kept and
reused), then reads them as the ingest stage does, blocks of 16,384 records to the end: once
on the driver (`parallel: false`) and once on the runner's workers (`parallel: true`).
Wall time covers planning, reading, the re-cut into blocks and the results' trip back; the
driver's CPU is `time.process_time()` of this process (Arrow's reader threads included, the
workers' processes not): what parallel ingest frees on the machine that runs the pipeline.
The runner is started (and warmed on a tiny input) before the clock starts.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv

from seqline.components import ingest
from seqline.components import stage as new_stage
from seqline.orchestration.runners import make_runner

DATA = Path(__file__).resolve().parent.parent / "build" / "bench-ingest"


def make_files(files: int, rows: int) -> list[Path]:
    DATA.mkdir(parents=True, exist_ok=True)
    paths = []
    rng = np.random.default_rng(0)
    for k in range(files):
        path = DATA / f"part-{k:02d}-{rows}.csv"
        if not path.exists():
            table = pa.table({
                "id": np.arange(k * rows, (k + 1) * rows),
                "temp": rng.normal(10, 5, rows).round(3),
                "wind": rng.uniform(0, 20, rows).round(2),
                "city": rng.choice(["Oslo", "Lima", "Pune", "Kyiv", "Accra"], rows)})
            csv.write_csv(table, path)
        paths.append(path)
    return paths


def read(paths: list[Path], parallel: bool, map_blocks, range_mb: int) -> tuple[int, float, float]:
    stage = new_stage("read", "ingest", {
        "format": "csv", "paths": [str(p) for p in paths], "parallel": parallel,
        "range_bytes": range_mb * 1024 * 1024})
    cpu, wall = time.process_time(), time.perf_counter()
    rows = sum(r.batch.num_rows for r in ingest.read_blocks(stage, DATA, map_blocks))
    return rows, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runner", default="local")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--range-mb", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    paths = make_files(args.files, args.rows)
    size = sum(p.stat().st_size for p in paths)
    print(f"{args.files} CSV files x {args.rows:,} rows, {size / 2**20:.0f} MiB; runner "
          f"{args.runner}, {args.workers} workers, ranges of {args.range_mb} MiB")
    with make_runner(args.runner, workers=args.workers) as runner:
        read(paths[:1], True, runner.map_blocks, 8)  # warm: workers started, imports done
        for _ in range(args.repeats):
            for mode, parallel in (("driver", False), ("workers", True)):
                rows, wall, cpu = read(paths, parallel, runner.map_blocks, args.range_mb)
                print(f"{mode:8s} {rows:>11,} rows  {wall:6.2f} s  {rows / wall:>12,.0f} rows/s  "
                      f"driver CPU {cpu:6.2f} s")


if __name__ == "__main__":
    main()
