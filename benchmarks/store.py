"""The run store's figures: `runs list` at 10,000 runs, size of 100 demo runs, add_samples cost.

Run: `.venv/bin/python benchmarks/store.py` (about a minute) or `--smoke` (tiny sizes, ~2 s).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from seqline.orchestration.store import DB_FILE, RunStore
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.tables import pipelines, runs, stage_runs

STAGES = ("read", "examples", "features", "batches", "model", "evaluation")
# A demo-sized run: ~20 s with a sample a second per stage, 15 epochs, 10 evaluation metrics.
SAMPLES_PER_STAGE = 60
SAMPLE_BATCH = 10  # samples the executor buffers before one add_samples call
EPOCHS = 15
CLI = "from seqline.orchestration.cli.runs import runs_app; runs_app()"


def seed_runs(store: RunStore, count: int) -> None:
    """`count` finished runs of 6 stages each, in one transaction of executemany."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run_rows = [{"run_id": f"run-{i:06d}", "pipeline_id": 1, "pipeline": f"p{i % 5}",
                 "status": "failed" if i % 10 == 0 else "succeeded", "runner": "local",
                 "options": {"workers": 2}, "trigger": "manual",
                 "started": start + timedelta(minutes=i),
                 "finished": start + timedelta(minutes=i, seconds=20)} for i in range(count)]
    stage_rows = [{"run_id": r["run_id"], "stage": s, "component": s, "status": "succeeded",
                   "attempt": 1, "records_in": 1461, "records_out": 1461, "seconds": 3.0,
                   "params": {}, "cache_key": f"{r['run_id']}-{s}"}
                  for r in run_rows for s in STAGES]
    with writing(store.engine) as conn:
        conn.execute(insert(pipelines).values(id=1, name="p", created=start))
        conn.execute(insert(runs), run_rows)
        conn.execute(insert(stage_runs), stage_rows)


def time_list(root: Path, repeats: int) -> tuple[float, float]:
    """Median ms of list_runs(limit=50) in-process, and of `runs list --json` as a command."""
    store = RunStore.open(root)
    calls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        store.list_runs(limit=50)
        calls.append(time.perf_counter() - t0)
    store.close()
    commands = []
    for _ in range(max(1, repeats // 10)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", CLI, "list", "--root", str(root), "--json"],
                       check=True, capture_output=True)
        commands.append(time.perf_counter() - t0)
    return statistics.median(calls) * 1e3, statistics.median(commands) * 1e3


def write_demo_run(store: RunStore, run_id: str, clock: float) -> None:
    """One demo-sized run written the way the executor writes it, call by call."""
    store.create_run(run_id, "seattle_weather", pipeline_file="pipeline.yaml",
                     fingerprint="f" * 64, runner="local",
                     options={"workers": 2, "window": 8, "queue": 4})
    for i, stage in enumerate(STAGES):
        sid = store.start_stage(run_id, stage, stage, params={"batch_size": 32},
                                cache_key=f"{run_id}-{stage}-{'k' * 48}")
        if i:
            store.record_artifact(sid, "input", f"/root/runs/{run_id}/{STAGES[i - 1]}",
                                  "tfrecord", 1461, 50_000, "sha256:" + "0" * 64)
        store.record_artifact(sid, "output", f"/root/runs/{run_id}/{stage}", "tfrecord", 1461,
                              50_000, "sha256:" + "0" * 64)
        batch = [{"stage_run_id": sid, "t": clock + t, "records_done": t * 25,
                  "rows_per_s": 25.0, "waited_input": 0.1 * t, "waited_output": 0.0,
                  "in_flight": 4, "reorder_held": 1} for t in range(SAMPLES_PER_STAGE)]
        for b in range(0, len(batch), SAMPLE_BATCH):
            store.add_samples(batch[b:b + SAMPLE_BATCH])
        if stage == "model":
            store.add_epochs(sid, [{"epoch": e, "metrics": {"loss": 1.0, "mae": 2.0,
                                    "val_loss": 1.5, "val_mae": 2.5},
                                    "input_wait_seconds": 0.01, "seconds": 1.0}
                                   for e in range(EPOCHS)])
        if stage == "evaluation":  # 2 overall + 4 slices x 2 = 10 metrics
            store.add_eval_metrics(sid, {"mae": 2.8, "rmse": 3.7}, {"weather": {
                w: {"mae": 3.0, "rmse": 4.0} for w in ("drizzle", "fog", "rain", "sun")}},
                blessed=True)
        store.finish_stage(sid, "succeeded", counts={"records_in": 1461, "records_out": 1461},
                           seconds=3.0, waited_input=0.5, waited_output=0.1, max_in_flight=8)
    store.finish_run(run_id, "succeeded")


def database_bytes(root: Path, store: RunStore) -> int:
    with store.engine.connect() as conn:  # fold the WAL into the file before measuring
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in root.glob(DB_FILE + "*"))


def time_add_samples(store: RunStore, sizes: tuple[int, ...], repeats: int) -> dict[int, float]:
    """Median µs of one add_samples call, per batch size."""
    store.create_run("samples", "p", pipeline_file=None, fingerprint=None, runner="local",
                     options={})
    sid = store.start_stage("samples", "s", "s", params={}, cache_key=None)
    result = {}
    for size in sizes:
        batch = [{"stage_run_id": sid, "t": float(i), "records_done": i, "rows_per_s": 1.0,
                  "waited_input": 0.0, "waited_output": 0.0, "in_flight": 1,
                  "reorder_held": 0} for i in range(size)]
        took = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            store.add_samples(batch)
            took.append(time.perf_counter() - t0)
        result[size] = statistics.median(took) * 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, about two seconds")
    smoke = parser.parse_args().smoke
    n_runs, n_demo, repeats = (200, 3, 10) if smoke else (10_000, 100, 50)
    with tempfile.TemporaryDirectory() as tmp:
        big, demo, samples = (Path(tmp) / name for name in ("big", "demo", "samples"))
        store = RunStore.open(big)
        t0 = time.perf_counter()
        seed_runs(store, n_runs)
        seeded = time.perf_counter() - t0
        store.close()
        call_ms, command_ms = time_list(big, repeats)
        store = RunStore.open(demo)
        t0 = time.perf_counter()
        for i in range(n_demo):
            write_demo_run(store, f"demo-{i:03d}", 1.8e9 + i * 60)
        per_run = (time.perf_counter() - t0) / n_demo
        size = database_bytes(demo, store)
        store.close()
        store = RunStore.open(samples)
        costs = time_add_samples(store, (1, 10, 60), repeats)
        store.close()
    print(f"| figure | value |\n|---|---|\n"
          f"| seed {n_runs:,} runs x 6 stages (executemany) | {seeded:.2f} s |\n"
          f"| list_runs(limit=50) at {n_runs:,} runs | {call_ms:.2f} ms |\n"
          f"| `runs list --json` command at {n_runs:,} runs (python start incl.) "
          f"| {command_ms:.0f} ms |\n"
          f"| write one demo-sized run through RunStore | {per_run * 1e3:.0f} ms |\n"
          f"| database after {n_demo} demo-sized runs | {size / 1e6:.2f} MB "
          f"({size / n_demo / 1e3:.0f} KB a run) |")
    for batch, us in costs.items():
        print(f"| add_samples, batch of {batch} | {us:.0f} us ({us / batch:.1f} us a sample) |")


if __name__ == "__main__":
    main()
