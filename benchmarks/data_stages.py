"""Data-stage figures: rows/s and peak memory of ingest, tfrecord_write and preprocess per runner.

Usage: .venv/bin/python benchmarks/data_stages.py [--smoke] [--runners local,beam,ray]
       [--rows 1000000] [--repeats 1]

Each stage prefix ([read], [read, examples], [read, examples, features]) runs as its own
`seqline run`, because the stages of one run are chained generators that overlap in time: a
stage's cost is the time its prefix adds to the prefix before it. Each prefix also runs on a
1-row copy of its input and that wall time is subtracted, so start-up cancels out: the
interpreter and engine, and also each component's own imports (tfrecord_write loads tfx-bsl).
Wall time stops when the CLI prints that the run succeeded (engine shut down included); the
CLI then verifies the run, reading every shard back, which is reported apart. Peak memory
sums the RSS of the `seqline run` process and all its descendants (Beam / Ray workers,
raylet), sampled every 50 ms; pages shared between processes count once per process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import yaml
from pyarrow import csv

EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "seattle_weather"
SEQLINE = Path(sys.executable).parent / "seqline"
DONE = "succeeded on"  # the CLI's line once every stage has committed, before it verifies
WEATHER = np.array(["drizzle", "rain", "sun", "snow", "fog"])


def _generate(folder: Path, rows: int) -> Path:
    """A seeded CSV shaped like the example's, next to a copy of its feature function."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    days = [str(d).replace("-", "/") for d in np.datetime64("2012-01-01") + np.arange(1461)]
    table = pa.table({"date": np.array(days)[np.arange(rows) % len(days)],  # 4 years, cycling
                      "precipitation": rng.exponential(3.0, rows).round(1),
                      "temp_max": rng.normal(16.0, 7.0, rows).round(1),
                      "temp_min": rng.normal(8.0, 5.0, rows).round(1),
                      "wind": rng.gamma(3.0, 1.0, rows).round(1),
                      "weather": WEATHER[rng.integers(0, len(WEATHER), rows)]})
    with (folder / "input.csv").open("wb") as f:
        f.write((",".join(table.column_names) + "\n").encode())  # unquoted, like the example
        csv.write_csv(table, f, csv.WriteOptions(include_header=False, quoting_style="none"))
    shutil.copy(EXAMPLE / "features.py", folder)
    stages = [{"name": "read", "component": "ingest",
               "params": {"format": "csv", "paths": ["input.csv"], "block_records": 16_384}},
              {"name": "examples", "component": "tfrecord_write",
               "params": {"compression": "gzip", "shard_records": 65_536}},
              {"name": "features", "component": "preprocess",
               "params": {"fn": "features:add_columns", "batch_format": "pyarrow"}}]
    (folder / "pipeline.yaml").write_text(yaml.safe_dump({"name": "bench", "stages": stages}))
    return folder / "pipeline.yaml"


def _variants(pipeline: Path) -> list[tuple[str, Path, Path]]:
    """Per stage: its name, its prefix's pipeline file, and the same prefix on a 1-row CSV."""
    spec = yaml.safe_load(pipeline.read_text())
    read = spec["stages"][0]
    with (pipeline.parent / read["params"]["paths"][0]).open() as f:
        (pipeline.parent / "one_row.csv").write_text(f.readline() + f.readline())
    one_row = {**read, "params": {**read["params"], "paths": ["one_row.csv"]}}
    variants = []
    for n, stage in enumerate(spec["stages"][:3], start=1):
        files = [pipeline.parent / f"prefix{n}.yaml", pipeline.parent / f"prefix{n}_1row.yaml"]
        for file, first in zip(files, [read, one_row], strict=True):
            file.write_text(yaml.safe_dump({**spec, "stages": [first, *spec["stages"][1:n]]}))
        variants.append((stage["name"], *files))
    return variants


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a worker exited between listing and reading
            total += p.memory_info().rss
    return total


def _run(pipeline: Path, runner: str, root: Path, workers: int) -> dict:
    """One `seqline run`: seconds to its success line, verify seconds, peak tree RSS (MB)."""
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    cmd = [str(SEQLINE), "run", str(pipeline), "--runner", runner, "--root", str(root),
           "--run-id", run_id, "--workers", str(workers)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # so the success line is seen when printed
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    peak, done, stop = [0], [None, 0], threading.Event()

    def sample() -> None:
        tree = psutil.Process(proc.pid)
        while not stop.wait(0.05):
            try:
                peak[0] = max(peak[0], _tree_rss(tree))
            except psutil.Error:  # the driver itself has exited
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = []
    for line in proc.stdout:
        output.append(line)
        if DONE in line and done[0] is None:
            done[:] = [time.perf_counter() - start, peak[0]]
    proc.wait()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    if proc.returncode or done[0] is None:
        sys.exit(f"FAILED ({proc.returncode}): {' '.join(cmd)}\n{''.join(output)}")
    return {"s": done[0], "verify": wall - done[0], "mb": done[1] / 2**20,
            "dir": root / "runs" / run_id}


def _median_runs(pipeline: Path, runner: str, root: Path, args) -> dict:
    runs = [_run(pipeline, runner, root, args.workers) for _ in range(args.repeats)]
    merged = {k: statistics.median(r[k] for r in runs) for k in ("s", "verify", "mb")}
    manifests = [{m.parent.name: json.loads(m.read_text())["seconds"]
                  for m in r["dir"].glob("*/manifest.json")} for r in runs]
    merged["stage_s"] = {k: statistics.median(m[k] for m in manifests) for k in manifests[0]}
    return merged


def _rate(rows: int, seconds: float) -> str:
    return f"{rows / seconds:,.0f}" if seconds > 0 else "n/a (noise)"


def _rows(runner: str, label: str, rows: int, variants: list, root: Path, args) -> None:
    """The table lines of one runner on one input: each stage, then the full pipeline."""
    runs = [[_median_runs(f, runner, root, args) for f in files] for _, *files in variants]
    full = runs[-1][0]  # the manifests' seconds are the full pipeline's, stages overlapping
    work = 0.0  # the prefix's wall time on `rows` rows minus its wall time on 1 row
    for (stage, *_), (big, small) in zip(variants, runs, strict=True):
        marginal, work = big["s"] - small["s"] - work, big["s"] - small["s"]
        print(f"| {runner} | {label} | {stage} | {rows:,} | {big['s']:.2f} | {small['s']:.2f} "
              f"| {marginal:.2f} | {_rate(rows, marginal)} | {big['mb']:,.0f} "
              f"| {small['mb']:,.0f} | {full['stage_s'][stage]:.2f} | {big['verify']:.2f} |")
    print(f"| {runner} | {label} | **full pipeline** | {rows:,} | {big['s']:.2f} "
          f"| {small['s']:.2f} | {work:.2f} | {_rate(rows, work)} (incl. start-up: "
          f"{_rate(rows, big['s'])}) | {big['mb']:,.0f} | {small['mb']:,.0f} | - "
          f"| {big['verify']:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="20,000 rows, local runner only")
    parser.add_argument("--rows", type=int, default=1_000_000, help="generated input size")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runners", default="local,beam,ray")
    args = parser.parse_args()
    rows, runners = (20_000, ["local"]) if args.smoke else (args.rows, args.runners.split(","))
    with tempfile.TemporaryDirectory(prefix="seqline-bench-") as tmp:
        example = Path(shutil.copytree(EXAMPLE, Path(tmp) / "example")) / "pipeline.yaml"
        n_example = sum(1 for _ in (example.parent / "seattle-weather.csv").open()) - 1
        inputs = [("seattle_weather", n_example, _variants(example)),
                  ("generated", rows, _variants(_generate(Path(tmp) / "gen", rows)))]
        print(f"{args.workers} workers; each figure the median of {args.repeats} run(s).\n")
        print("| runner | input | stage | rows | wall s (prefix) | wall s (1 row) | marginal s "
              "| rows/s | peak RSS MB (prefix) | peak RSS MB (1 row) | manifest s (full run) "
              "| verify s |")
        print("|" + " --- |" * 12)
        for runner in runners:
            for label, n, variants in inputs:
                _rows(runner, label, n, variants, Path(tmp) / "root", args)


if __name__ == "__main__":
    main()
