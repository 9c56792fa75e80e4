"""What a stage's data profile costs a run: the 1M-row data job with profiling on and off.

Usage: .venv/bin/python benchmarks/data_profile.py [--smoke] [--rows 1000000] [--repeats 3]
       [--out benchmarks/PROFILE.md]

The job is benchmarks/verify.py's (`verify.make_job`): a seeded CSV of `k` (int), `x` (float),
`s` (one of four words) -> ingest -> tfrecord_write (gzip) -> preprocess (a pyarrow function
adding x*x, gzip); all three stages output records, so all three are profiled. `seqline run`
on the local runner, 2 workers, no cache, no verify: the same job with every stage's default
(profile on) and with `profile: false` on every stage, alternated (`--repeats` pairs, after one
unmeasured warm-up of each); medians of wall time and their ratio. Then the profiling alone, in
this process: ProfileWindows over the job's blocks (ingest's default block size), the three
stages' columns, best of `--repeats`: the CPU the driver's stage threads spend on it. The
machine may be shared (2 cores): compare the medians' ratio and the in-process seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import yaml
from pyarrow import csv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify import make_job  # noqa: E402  (benchmarks/ is not a package)

from seqline.components.ingest import DEFAULT_BLOCK_RECORDS  # noqa: E402
from seqline.pipeline.blocks import SEQ  # noqa: E402
from seqline.pipeline.drift import ProfileWindows  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parent
SEQLINE = Path(sys.executable).parent / "seqline"


def without_profile(pipeline: Path) -> Path:
    """The same job with `profile: false` on every stage."""
    spec = yaml.safe_load(pipeline.read_text())
    for stage in spec["stages"]:
        stage["profile"] = False
    out = pipeline.with_name("pipeline-off.yaml")
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def run(pipeline: Path, run_id: str) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the run's processes (the driver and the workers it
    waited for): on a shared machine the CPU is what the profile adds, the wall is noise."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(SEQLINE), "run", str(pipeline), "--root", "root", "--run-id", run_id,
                    "--workers", "2", "--no-cache", "--no-verify"], cwd=pipeline.parent,
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_runs(on: Path, off: Path, repeats: int) -> dict[str, list[tuple[float, float]]]:
    runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    run(on, "warm-on")  # page cache, .pyc: not counted
    run(off, "warm-off")
    for i in range(repeats):
        for name, pipeline in (("on", on), ("off", off)) if i % 2 == 0 else (("off", off),
                                                                            ("on", on)):
            runs[name].append(run(pipeline, f"{name}-{i}"))
            wall, cpu = runs[name][-1]
            print(f"  {name}-{i}: {wall:.2f} s, CPU {cpu:.2f} s", file=sys.stderr)
    return runs


def stage_blocks(folder: Path) -> dict[str, list[pa.RecordBatch]]:
    """The blocks each stage outputs (as the job cuts them): read and examples `k, x, s`,
    features with `x2` added; each with its seq column."""
    table = csv.read_csv(folder / "input.csv")
    table = table.append_column(SEQ, pa.array(range(table.num_rows), pa.int64()))
    blocks = table.to_batches(max_chunksize=DEFAULT_BLOCK_RECORDS)
    features = [b.append_column("x2", pc.multiply(b.column("x"), b.column("x"))) for b in blocks]
    return {"read": blocks, "examples": blocks, "features": features}


def profile_seconds(blocks: dict[str, list[pa.RecordBatch]], repeats: int) -> dict[str, float]:
    """Per stage, the best of `repeats` passes of ProfileWindows over its blocks."""
    best: dict[str, float] = {}
    for stage, batches in blocks.items():
        for _ in range(repeats):
            start = time.process_time()  # CPU seconds: what it takes from the workers
            windows = ProfileWindows()
            for batch in batches:
                windows.add(batch)
            windows.finish()
            seconds = time.process_time() - start
            best[stage] = min(best.get(stage, seconds), seconds)
    return best


def report(rows: int, runs: dict[str, list[tuple[float, float]]], alone: dict[str, float],
           repeats: int) -> str:
    walls = {k: [w for w, _ in v] for k, v in runs.items()}
    cpus = {k: [c for _, c in v] for k, v in runs.items()}
    on, off = statistics.median(walls["on"]), statistics.median(walls["off"])
    cpu_on, cpu_off = statistics.median(cpus["on"]), statistics.median(cpus["off"])
    lines = [
        "# The data profile's cost (issue 27, item 4; decision 52)",
        "",
        f"`benchmarks/data_profile.py --rows {rows} --repeats {repeats}` on "
        f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} at the end). The job: "
        "verify.py's k, x, s CSV -> ingest -> tfrecord_write (gzip) -> preprocess (x*x, "
        "gzip), local runner, 2 workers, no cache, no verify; every stage profiled, against "
        "`profile: false` on every stage; alternated pairs after a warm-up of each.",
        "",
        "| run | median wall s | median CPU s | wall (s) | CPU (s) |",
        "| --- | ---: | ---: | --- | --- |",
        *(f"| {label} | {statistics.median(walls[k]):.2f} | {statistics.median(cpus[k]):.2f} "
          f"| {', '.join(f'{s:.2f}' for s in walls[k])} "
          f"| {', '.join(f'{s:.2f}' for s in cpus[k])} |"
          for k, label in (("on", "profile on (default)"), ("off", "profile: false"))),
        "",
        f"**Ratio on/off: wall {on / off:.3f} ({(on / off - 1) * 100:+.1f} %), CPU "
        f"{cpu_on / cpu_off:.3f} ({(cpu_on / cpu_off - 1) * 100:+.1f} %)**; target <= 3 %. "
        "Median of the pairs' own ratios (each on-run against the off-run beside it): wall "
        f"{_paired(walls):.3f}, CPU {_paired(cpus):.3f}. CPU is the driver's (where the "
        "profile runs) and what it waited for; the local runner's workers are children of "
        "its fork server and are not in it.",
        "",
        "The profiling alone, in one process (ProfileWindows over each stage's blocks of "
        f"{DEFAULT_BLOCK_RECORDS:,} records, best of {repeats}):",
        "",
        "| stage | columns | CPU seconds | share of the on-run's median |",
        "| --- | --- | ---: | ---: |",
    ]
    columns = {"read": "k, x, s", "examples": "k, x, s", "features": "k, x, s, x2"}
    for stage, seconds in alone.items():
        lines.append(f"| {stage} | {columns[stage]} | {seconds:.3f} | {seconds / on:.1%} |")
    total = sum(alone.values())
    lines += [f"| all three | | {total:.3f} | {total / on:.1%} |", ""]
    return "\n".join(lines)


def _paired(runs: dict[str, list[float]]) -> float:
    """The median of on/off within each alternated pair: a load that drifts over the
    benchmark moves both runs of a pair alike."""
    return statistics.median(a / b for a, b in zip(runs["on"], runs["off"], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "PROFILE.md")
    args = parser.parse_args()
    rows, repeats = (2_000, 1) if args.smoke else (args.rows, args.repeats)
    with tempfile.TemporaryDirectory(prefix="profile-bench-") as tmp:
        on = make_job(Path(tmp) / "job", rows, name="profile-bench")
        off = without_profile(on)
        alone = profile_seconds(stage_blocks(on.parent), repeats)
        runs = measure_runs(on, off, repeats)
    text = report(rows, runs, alone, repeats)
    print(text)
    if not args.smoke:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
