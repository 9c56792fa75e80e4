"""Runner figures: rows/s of a trivial map over 1M records, and ordered / unordered throughput.

Usage: .venv/bin/python benchmarks/runner_throughput.py [--smoke] [--repeats 3]

Prints a markdown table. The skewed workload is the contract suite's: random latency per
block, 1 block in 20 about 20x slower; "unordered" is the same runner releasing results as
they finish (the ordered run's only extra cost is waiting in the reorder buffer).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.runners import make_runner
from seqline.pipeline.blocks import to_blocks

USERFNS = Path(__file__).resolve().parent.parent / "tests" / "userfns"
RUNNERS = {"local": {}, "beam": {"mode": "multi_processing"}, "ray": {}}


def _task(fn: str, **kwargs):
    """The preprocess task without its shard writer: this measures the runners alone."""
    spec = new_stage("bench", "preprocess", {"fn": fn, "fn_kwargs": kwargs})
    return dataclasses.replace(preprocess.make_task(spec, USERFNS, USERFNS), sink=None)


def _timed(runner, task, n: int, block_records: int, ordered: bool = True) -> float:
    blocks = to_blocks([pa.record_batch({"x": np.arange(n, dtype=np.int64)})], block_records)
    start = time.perf_counter()
    rows = sum(r.batch.num_rows for r in runner.map_blocks(task, blocks, ordered=ordered))
    assert rows == n
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runners", default="local,beam,ray")
    parser.add_argument("--windows", default="4,8,16", help="skew windows, x workers; '' skips")
    args = parser.parse_args()
    n_trivial = 10_000 if args.smoke else 1_000_000
    n_skew, skew_block, base_ms = (2_000, 50, 2) if args.smoke else (20_000, 50, 10)
    print(f"| runner | trivial map rows/s (1 M rows, median of {args.repeats}) "
          "| skewed ordered / unordered, window 4x workers (min / median / max) "
          "| window 8x | window 16x |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.runners.split(","):
        options = {"workers": args.workers, **RUNNERS[name]}
        with make_runner(name, **options) as warm:  # start engine processes before timing
            _timed(warm, _task("latency:double"), 1000, 100)
            trivial = [n_trivial / _timed(warm, _task("latency:double"), n_trivial, 16_384)
                       for _ in range(args.repeats)]
        cells = [f"{statistics.median(trivial):,.0f}"]
        for factor in [int(w) for w in args.windows.split(",") if w]:
            with make_runner(name, **options, window=factor * args.workers) as runner:
                task = _task("latency:skewed", base_ms=base_ms)
                _timed(runner, task, 1000, skew_block)
                ratios = []
                for _ in range(args.repeats):
                    unordered = _timed(runner, task, n_skew, skew_block, ordered=False)
                    ordered = _timed(runner, task, n_skew, skew_block, ordered=True)
                    ratios.append(unordered / ordered)
            median = f"{statistics.median(ratios):.2f}"
            spread = f"{min(ratios):.2f} / {median} / {max(ratios):.2f}"
            cells.append(spread if factor == 4 else median)
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
