"""What the run store costs a run, and what caching saves.

Usage: .venv/bin/python benchmarks/store_cost.py [--smoke] [--rows 1000000] [--repeats 3]

1. The 1M-row data job (ingest -> tfrecord_write -> preprocess, benchmarks/data_stages.py's
   data) through `seqline.Pipeline.run`, with the store's per-second sampling on and off,
   alternated; the ratio of medians is the sampling's cost (target <= 1.02). Then the whole
   recording (the plan's store reads, the run store, its events and samples, run.json)
   against the same job run with no store (`run_pipeline` on a runner started the same way),
   alternated: the orchestration's cost (target <= 1.02).
2. The demo (`data/seattle_weather`) as `seqline run`: a first run, then the same command
   again, which reuses every stage from the cache; wall time of each process.
3. The store's size after the demo: the growth of seqline.db per run, x 100.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_stages import _generate  # noqa: E402 - the same generated data as the data bench

import seqline  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "seattle_weather"
SEQLINE = Path(sys.executable).parent / "seqline"


def sampling_cost(rows: int, repeats: int, folder: Path) -> tuple[list[float], list[float]]:
    pipeline = seqline.Pipeline.from_yaml(_generate(folder / "data", rows))
    on: list[float] = []
    off: list[float] = []
    # A first run warms the page cache and the fork server's imports; it is not counted.
    pipeline.run(root=folder / "root", run_id="warm", cache=False, verify=False)
    for i in range(repeats * 2):
        sampled = i % 2 == 0
        start = time.perf_counter()
        pipeline.run(root=folder / "root", run_id=f"r{i}", cache=False, verify=False,
                     sample_seconds=1.0 if sampled else None)
        (on if sampled else off).append(time.perf_counter() - start)
    return on, off


def orchestration_cost(rows: int, repeats: int, folder: Path, *, profile: bool = False
                       ) -> tuple[list[float], list[float]]:
    """The job recorded as `Pipeline.run` records it, against `run_pipeline` with no store
    (and, unless `profile`, no data profile), alternated; wall s of each."""
    import dataclasses

    from seqline.orchestration.api import run_pipeline
    from seqline.orchestration.runners import make_runner

    pipeline = seqline.Pipeline.from_yaml(_generate(folder / "data-orchestration", rows))
    bare_spec = pipeline.spec if profile else dataclasses.replace(
        pipeline.spec, stages=tuple(dataclasses.replace(s, profile=False)
                                    for s in pipeline.spec.stages))
    recorded: list[float] = []
    bare: list[float] = []
    # A first run of each, not counted, warms the page cache and the fork server's imports and
    # makes the run store (its schema, once per root): the first recorded run was the slowest
    # of every repeat (7.6-8.1 s against 6.8-7.5).
    pipeline.run(root=folder / "recorded", run_id="warm", cache=False, verify=False)
    with make_runner("local", workers=2) as runner:
        run_pipeline(bare_spec, runner, folder / "bare", "warm")
    for i in range(repeats * 2):
        start = time.perf_counter()
        if i % 2 == 0:
            pipeline.run(root=folder / "recorded", run_id=f"o{i}", cache=False, verify=False)
            recorded.append(time.perf_counter() - start)
        else:
            with make_runner("local", workers=2) as runner:
                run_pipeline(bare_spec, runner, folder / "bare", f"b{i}")
            bare.append(time.perf_counter() - start)
    return recorded, bare


def events_size(root: Path, run_id: str) -> tuple[int, int]:
    """The events a run stored: how many, and their bytes (body, kind and stage)."""
    import sqlite3

    with sqlite3.connect(root / "seqline.db") as db:
        count, size = db.execute(
            "SELECT count(*), sum(length(body) + length(kind) + length(coalesce(stage, '')))"
            " FROM events WHERE run_id = ?", (run_id,)).fetchone()
    return int(count), int(size or 0)


def demo_rerun(folder: Path) -> tuple[float, float, int, int]:
    root = folder / "demo"
    walls, sizes = [], []
    for run_id in ("first", "again"):
        start = time.perf_counter()
        subprocess.run([str(SEQLINE), "run", str(EXAMPLE / "pipeline.yaml"), "--root",
                        str(root), "--run-id", run_id], check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        sizes.append(sum(p.stat().st_size for p in root.glob("seqline.db*")))
    return walls[0], walls[1], sizes[0], sizes[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--machinery", action="store_true",
                        help="only the recorded run against a bare one with no data profile, "
                             "as one `RESULT {json}` line (benchmarks/compare.py, row 13)")
    args = parser.parse_args()
    rows, repeats = (2_000, 1) if args.smoke else (args.rows, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        if args.machinery:
            recorded, bare = orchestration_cost(rows, repeats, Path(tmp), profile=True)
            print("RESULT " + json.dumps({"recorded": recorded, "bare": bare}), flush=True)
            return
        on, off = sampling_cost(rows, repeats, Path(tmp))
        print(f"data job, {rows:,} rows, {repeats} repeats (median s): sampling on "
              f"{statistics.median(on):.2f}, off {statistics.median(off):.2f}, ratio "
              f"{statistics.median(on) / statistics.median(off):.3f} (target <= 1.02)")
        recorded, bare = orchestration_cost(rows, repeats, Path(tmp), profile=True)
        print(f"data job, {rows:,} rows: recorded (store, events, samples) "
              f"{statistics.median(recorded):.2f} s, no store {statistics.median(bare):.2f} s, "
              f"ratio {statistics.median(recorded) / statistics.median(bare):.3f} "
              "(target <= 1.02)")
        if args.smoke:
            return
        first, again, size_first, size_again = demo_rerun(Path(tmp))
        count, size = events_size(Path(tmp) / "demo", "first")
        print(f"events of the first demo run: {count} rows, {size / 1e3:.1f} kB "
              "(target <= 50 kB)")
        print(f"demo: first run {first:.1f} s, unchanged rerun {again:.1f} s (every stage "
              "from the cache but evaluate, whose baseline is now the first run's model)")
        print(f"store: {size_first / 1e3:.0f} kB after the first demo run; "
              f"{size_first / 1e6 * 100:.1f} MB for 100 such runs")


if __name__ == "__main__":
    main()
