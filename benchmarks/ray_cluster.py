"""The two-node Ray cluster against one node, and training on 2 workers against 1 (demo data).

    .venv/bin/python -m benchmarks.ray_cluster [--epochs 3]

Starts a two-node cluster on this machine (tests/ray_cluster.py), runs the weather example's
data job (ingest -> tfrecord_write -> preprocess -> batching) with the CLI on the local runner,
on a local Ray (one node, 2 CPUs) and on the cluster (two nodes, 1 CPU each), then trains the
example's model for --epochs on 1 worker (in the driver) and on 2 Ray Train workers (one per
node). Prints wall-clock seconds side by side; results go to benchmarks/RAY_CLUSTER.md by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.integration.test_ray_cluster import TRAIN_ON_WORKERS, _data_pipeline
from tests.integration.test_training import example_folder
from tests.ray_cluster import two_node_cluster

REPO = Path(__file__).resolve().parent.parent


def _timed(args: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=1800)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    epochs = parser.parse_args().epochs
    cli = ["-m", "seqline.orchestration.cli", "run"]
    with tempfile.TemporaryDirectory() as tmp, two_node_cluster() as cluster:
        base = Path(tmp)
        pipeline = str(_data_pipeline(base))
        rows = {}
        for label, extra in {"local runner": ["--runner", "local"],
                             "ray, one node (2 CPUs)": ["--runner", "ray"],
                             "ray, two nodes (1 CPU each)": [
                                 "--runner", "ray", "--ray-address", cluster.address]}.items():
            rows[label] = _timed([*cli, pipeline, *extra, "--root", str(base / "root"),
                                  "--no-cache", "--no-verify"], cluster.env)
        print("data job (CLI wall clock, s):", json.dumps(rows, indent=1))
        one = base / "one"
        one.mkdir()
        folder = example_folder(one, epochs=epochs)
        _timed([*cli, str(folder / "pipeline.yaml"), "--runner", "local", "--root",
                str(one / "root"), "--run-id", "one", "--no-verify"])
        model = json.loads((one / "root" / "runs" / "one" / "model" / "manifest.json")
                           .read_text())
        two = base / "two"
        two.mkdir()
        folder = example_folder(two, epochs=epochs, workers=2)
        seconds = _timed(["-c", TRAIN_ON_WORKERS, str(folder), str(two / "root"),
                          cluster.address], cluster.env)
        print(f"training, {epochs} epochs: 1 worker {model['seconds']:.1f} s (train stage); "
              f"2 workers on 2 nodes {seconds:.1f} s (data job + train, driver wall clock)")


if __name__ == "__main__":
    main()
