"""The demo's figures: wall time per runner and stage, training speed, and why order matters."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "data" / "seattle_weather"
SEQLINE = [sys.executable, "-m", "seqline.orchestration.cli"]


def variant(folder: Path, name: str, shuffle: str | None, seed: int, epochs: int | None) -> Path:
    """The example pipeline with batching's shuffle and the seeds set; returns its file."""
    spec = yaml.safe_load((EXAMPLE / "pipeline.yaml").read_text())
    for stage in spec["stages"]:
        if stage["component"] == "batching":
            stage["params"] |= {"shuffle": shuffle, "seed": seed}
        if stage["component"] == "train":
            stage["params"]["seed"] = seed
            stage["params"]["epochs"] = epochs or stage["params"]["epochs"]
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run(pipeline: Path, root: Path, run_id: str, runner: str) -> tuple[float, Path]:
    start = time.perf_counter()
    proc = subprocess.run([*SEQLINE, "run", str(pipeline), "--runner", runner, "--root",
                           str(root), "--run-id", run_id], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{run_id} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start, root / "runs" / run_id


def manifest(run_dir: Path, stage: str) -> dict:
    return json.loads((run_dir / stage / "manifest.json").read_text())


def runner_table(folder: Path, root: Path, runners: list[str], epochs: int | None) -> None:
    print("| runner | wall s (process) | " + " | ".join(STAGES) + " | train steps/s | "
          "input wait, % of epoch time | eval MAE |")
    print("|---" * (len(STAGES) + 5) + "|")
    pipeline = variant(folder, "ordered", None, 0, epochs)
    for runner in runners:
        wall, run_dir = run(pipeline, root, f"demo-{runner}", runner)
        seconds = [manifest(run_dir, s)["seconds"] for s in STAGES]
        model = manifest(run_dir, "model")
        steps = sum(len(e["batches"]) for e in model["epochs"])
        epoch_s = sum(e["seconds"] for e in model["epochs"])
        input_s = sum(e["input_wait_seconds"] for e in model["epochs"])
        mae = manifest(run_dir, "evaluation")["metrics"]["mae"]
        print(f"| {runner} | {wall:.1f} | " + " | ".join(f"{s:.2f}" for s in seconds)
              + f" | {steps / epoch_s:.0f} | {input_s / epoch_s:.1%} | {mae:.3f} |")


def order_table(folder: Path, root: Path, seeds: list[int], epochs: int | None) -> None:
    print("\n| batching shuffle | eval MAE °C (min / median / max over seeds "
          f"{', '.join(map(str, seeds))}) | eval RMSE median |")
    print("|---|---|---|")
    for shuffle in (None, "examples", "records"):
        maes, rmses = [], []
        for seed in seeds:
            name = f"{shuffle or 'none'}-{seed}"
            _, run_dir = run(variant(folder, name, shuffle, seed, epochs), root, name, "local")
            metrics = manifest(run_dir, "evaluation")["metrics"]
            maes.append(metrics["mae"])
            rmses.append(metrics["rmse"])
        label = {None: "off (source order)", "examples": "examples (whole windows)",
                 "records": "records (order destroyed)"}[shuffle]
        print(f"| {label} | {min(maes):.3f} / {statistics.median(maes):.3f} / {max(maes):.3f} "
              f"| {statistics.median(rmses):.3f} |")


STAGES = ["read", "examples", "features", "batches", "model", "evaluation"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runners", default="local,beam,ray")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--smoke", action="store_true", help="1 epoch, 1 seed, local only")
    args = parser.parse_args()
    runners = ["local"] if args.smoke else args.runners.split(",")
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    epochs = 1 if args.smoke else None
    with tempfile.TemporaryDirectory(prefix="seqline-demo-bench-") as tmp:
        folder = Path(tmp)
        for name in ("seattle-weather.csv", "features.py"):
            shutil.copy(EXAMPLE / name, folder / name)
        runner_table(folder, folder / "root", runners, epochs)
        order_table(folder, folder / "root", seeds, epochs)


if __name__ == "__main__":
    main()
