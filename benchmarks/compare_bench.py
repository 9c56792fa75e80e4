"""The bench that benchmarks/compare.py's comparisons share: generated data, pipeline files,
seqline and peer runs measured from outside, and the rows and notes of the report."""

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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml
from compare_measure import Run, measure
from compare_report import Row, spread
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
        self._smoke_runs: dict[tuple, Run] = {}  # with --smoke: see seqline()
        self.peer_rows = args.peer_rows or args.rows
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
                *options: str, verify: bool = False) -> Run:
        """`seqline run` (`--no-verify` unless `verify`); result: the run's own seconds and
        each stage's. With --smoke each distinct command runs once (its figures mean nothing
        there, and the suite runs the smoke on two busy cores): a repeat is the first run."""
        asked = (str(pipeline), runner, workers, options, verify)
        if self.args.smoke and asked in self._smoke_runs:
            return self._smoke_runs[asked]
        self._count += 1
        run_id = f"{pipeline.stem}-{runner}-{workers}w-{self._count}"
        run = measure([*SEQLINE, "run", str(pipeline), "--runner", runner, "--root",
                       str(self.root), "--run-id", run_id, "--workers", str(workers),
                       *([] if verify else ["--no-verify"]), *options], self.env,
                      f"seqline {pipeline.parent.name}/{pipeline.stem}, {runner}, "
                      f"{workers} worker(s){', verified' if verify else ''}")
        found = re.search(r"stages \(([\d.,]+) s\)", run.output)
        run.result["seconds"] = float(found.group(1).replace(",", "")) if found else \
            float("nan")
        run_dir = self.root / "runs" / run_id
        run.result["stages"] = {m.parent.name: json.loads(m.read_text())
                                for m in run_dir.glob("*/manifest.json")}
        shutil.rmtree(run_dir)  # keep the disk bounded; what is needed is read
        self._smoke_runs[asked] = run
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

    def job_runs(self, rows: int, verify: bool = False) -> list[Run]:
        """The whole job on the local runner with 2 workers, once per repeat (shared); with
        `verify`, as `seqline run` runs by default, without, with `--no-verify`."""
        key = ("job", rows, verify)
        if key not in self._jobs:
            pipeline = self.job_pipeline(rows)
            self._jobs[key] = [self.seqline(pipeline, verify=verify)
                               for _ in range(self.args.repeats)]
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
