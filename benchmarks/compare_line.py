"""benchmarks/compare.py's comparisons of whole pipelines: the assembly line against its
stages one by one (#7), memory against input size (#8), the demo's input wait (#9) and cold
start (#10)."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import yaml
from compare_bench import EXAMPLE, Bench, seconds_list


def c7_assembly(b: Bench) -> None:
    """The whole line on the generated data, overlapped and one stage after another."""
    rows = b.args.rows
    read = {"format": "csv", "paths": [b.csv(rows).name]}
    pipeline = b.pipeline(f"line-{rows}", [
        {"name": "read", "component": "ingest", "params": read},
        {"name": "examples", "component": "tfrecord_write", "params": {}},
        {"name": "features", "component": "preprocess",
         "params": {"fn": "features:add_features", "batch_format": "pyarrow"}},
        {"name": "batches", "component": "batching",
         "params": {"batch_size": 1024, "label": "ab", "features": ["a", "b", "log_c"],
                    "eval_fraction": 0.1}},
        {"name": "model", "component": "train",
         "params": {"model": "tabular_regression", "epochs": 1}}])
    units = {"read + examples": ("read", "examples"), "features": ("features",),
             "batches": ("batches",), "model": ("model",)}
    ratios, sums, lines, alones, runs = [], [], [], [], []
    for _ in range(b.args.repeats):
        line = b.seqline(pipeline)
        alone = b.seqline(pipeline, "local", 2, "--one-by-one")
        # ingest stores nothing, so it always streams into tfrecord_write: one unit alone
        times = {unit: max(alone.result["stages"][s]["seconds"] for s in stages)
                 for unit, stages in units.items()}
        slowest = max(times.values())
        # Like with like: a stage's seconds alone start at the stage, after `seqline run` has
        # imported TensorFlow for its train stage (~2 s, before any stage starts); so the
        # line's are its stages' span, from the first one's start to the last one's commit.
        timelines = [m["timeline"] for m in line.result["stages"].values()]
        span = max(t["finished"] for t in timelines) - min(t["started"] for t in timelines)
        ratios.append(span / slowest)
        sums.append(span / sum(times.values()))
        lines.append(span)
        runs.append(line.result["seconds"])
        alones.append(times)
    b.add("7", "end-to-end assembly line ÷ its slowest stage alone",
          f"{statistics.median(lines):.1f} s for {rows:,} rows, 5 stages",
          f"slowest alone {statistics.median(max(t.values()) for t in alones):.1f} s, "
          f"sum {statistics.median(sum(t.values()) for t in alones):.1f} s",
          ratios, "≤ 1.2", lambda r: r <= 1.2)
    b.note("7", f"The line ingest csv → tfrecord_write → preprocess add_features → batching "
           f"(1,024, eval 10 %) → train tabular_regression (1 epoch) on {rows:,} generated "
           "rows, local runner, 2 workers, queue 4. The peer is the same pipeline with "
           "`--one-by-one` (each stage starts when the one before has committed; ingest "
           "still streams into tfrecord_write, since it stores nothing). Ratio = the line's "
           "stages' span (the first stage's start to the last one's commit, from their "
           "manifests) ÷ the slowest stage's seconds alone; line ÷ sum of the stages alone: "
           f"{seconds_list(sums)}. The line's span per repeat {seconds_list(lines)} s; its "
           "`seqline run` figure (\"stages (… s)\": the run's seconds as its run store "
           f"keeps them, the engine's start included) {seconds_list(runs)} s. Stage seconds "
           "alone per "
           "repeat: "
           + "; ".join(", ".join(f"{u} {t:.1f}" for u, t in times.items()) for times in alones)
           + ". On 2 cores every stage here is CPU-bound and they share the same two cores "
           "(workers, the driver's encoding and decoding, TensorFlow), so overlapping them "
           "cannot beat the total CPU work ÷ 2: the line ÷ sum column is the one overlap "
           "moves on this machine.")


def c8_memory(b: Bench) -> None:
    small = b.args.rows
    big = 10 * small  # the runs of 5
    at_big, at_small = b.job_runs(big), b.job_runs(small)
    ratios = [g.peak_mb / s.peak_mb for s, g in zip(at_small, at_big, strict=True)]
    b.add("8", "peak RSS at 10× input ÷ at 1× (whole job, local)",
          f"{statistics.median(g.peak_mb for g in at_big):,.0f} MB at {big:,} rows",
          f"{statistics.median(s.peak_mb for s in at_small):,.0f} MB at {small:,} rows",
          ratios, "≤ 1.1", lambda r: r <= 1.1)
    b.note("8", f"The whole job of 3 (ingest csv → preprocess add_features → gzip TFRecords), "
           f"local runner, 2 workers, at {small:,} rows (1×) and {big:,} rows (10×). Peak RSS: "
           "the sum over the `seqline run` process and all its descendants (forkserver and "
           "workers), sampled every 50 ms; pages shared between processes count once per "
           f"process. Peak MB per repeat: 1× {seconds_list([s.peak_mb for s in at_small])}, "
           f"10× {seconds_list([g.peak_mb for g in at_big])}.")


def _demo(b: Bench, name: str, csv_lines: int | None, epochs: int | None) -> Path:
    folder = b.work / name
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE / "features.py", folder)
    lines = (EXAMPLE / "seattle-weather.csv").read_text().splitlines(keepends=True)
    (folder / "seattle-weather.csv").write_text("".join(lines[:csv_lines + 1] if csv_lines
                                                        else lines))
    spec = yaml.safe_load((EXAMPLE / "pipeline.yaml").read_text())
    for stage in spec["stages"]:
        if stage["component"] == "train" and epochs:
            stage["params"]["epochs"] = epochs
    (folder / "pipeline.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "pipeline.yaml"


def c9_input_wait(b: Bench) -> None:
    # --smoke: cold start's pipeline (#10), so that one run serves both rows
    pipeline = _demo(b, "cold", 1_000, 1) if b.args.smoke else _demo(b, "demo", None, None)
    shares, steady, walls = [], [], []
    for _ in range(b.args.repeats):
        run = b.seqline(pipeline)
        epochs = run.result["stages"]["model"]["epochs"]
        shares.append(100 * sum(e["input_wait_seconds"] for e in epochs)
                      / sum(e["seconds"] for e in epochs))
        later = epochs[1:] or epochs
        steady.append(100 * sum(e["input_wait_seconds"] for e in later)
                      / sum(e["seconds"] for e in later))
        walls.append(run.wall)
    b.add("9", "training steps' time waiting for input, the demo",
          f"{statistics.median(shares):.1f} % of epoch time (epochs after the first: "
          f"{statistics.median(steady):.1f} %)", "-", shares, "< 5 %", lambda r: r < 5,
          digits=1)
    b.note("9", f"The demo (data/seattle_weather/pipeline.yaml, {len(epochs)} epoch(s)) on "
           "the local runner as an assembly line. A step waits when its batch is handed to "
           "tf.data after the step asked for it (Keras's on_train_batch_begin); the figure "
           "is Σ of those waits ÷ Σ epoch seconds, in %; a step asks when it starts, or, for "
           "an epoch's first step, when it first pulls the input pipeline (in the first epoch "
           "Keras traces the step for seconds before that). The first epoch runs on the "
           "stream: its wait includes the data stages still producing. Epochs after the "
           "first, per repeat: "
           f"{seconds_list(steady)} %. Process wall s: {seconds_list(walls)}.")


def c10_cold_start(b: Bench) -> None:
    pipeline = _demo(b, "cold", 1_000, 1)
    runners = ["local"] if b.args.smoke else ["local", "beam", "ray"]
    for runner in runners:
        runs = [b.seqline(pipeline, runner=runner) for _ in range(b.args.repeats)]
        walls = [r.wall for r in runs]
        b.add(f"10 ({runner})", "cold start: 1,000 rows through all six stages, wall s",
              f"{statistics.median(walls):.1f} s", "-", walls, "report it", None, digits=1)
        stages = runs[0].result["stages"]
        b.note("10", f"{runner}: process wall s {seconds_list(walls)}; the run's own time "
               f"{seconds_list([r.result['seconds'] for r in runs])} s; stage s (first "
               "repeat) " + ", ".join(f"{s} {stages[s]['seconds']:.2f}" for s in
                                      ("read", "examples", "features", "batches", "model",
                                       "evaluation")) + ".")
    b.note("10", "The example pipeline (ingest → tfrecord_write → preprocess → batching → "
           "train → evaluate) on the first 1,000 days of data/seattle_weather, 1 epoch, 2 "
           "workers, --no-verify; wall time of a fresh `python -m seqline.orchestration.cli "
           "run` process, interpreter and imports included. The ratio column is the wall "
           "seconds.")
