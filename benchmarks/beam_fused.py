"""On Beam, the data stages as one job (fused) against one job per stage: wall time and overlap.

Usage: .venv/bin/python benchmarks/beam_fused.py [--rows 1000000] [--repeats 3] [--workers 2]
       [--write benchmarks/BEAM_FUSED.md]

The pipeline is data_stages.py's: CSV ingest -> tfrecord_write -> preprocess (the example's
feature function), run in this process on the Beam runner (FnApiRunner, multi_processing),
alternately with the stages fused (tfrecord_write and preprocess in one Beam job, decisions/
0040) and not (`plan.FUSING_RUNNERS` emptied: one batch job per stage, as before).
Reported per mode, as medians: the run's wall time, when each stage committed (from the run's
start, engine start-up included), and how long after tfrecord_write preprocess committed.
Both modes must store the same records: the seq digests are compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_stages import _generate  # noqa: E402 - the same seeded input as the data-stage figures

from seqline.components import COMPONENTS  # noqa: E402
from seqline.orchestration import plan  # noqa: E402
from seqline.orchestration.api import run_pipeline  # noqa: E402
from seqline.orchestration.runners import make_runner  # noqa: E402
from seqline.pipeline.config import load_pipeline  # noqa: E402


def _once(pipeline: Path, root: Path, fused: bool, workers: int) -> dict:
    spec = load_pipeline(pipeline, COMPONENTS)
    run_id = f"{'fused' if fused else 'jobs'}-{uuid.uuid4().hex[:6]}"
    start = time.time()
    with make_runner("beam", workers=workers, mode="multi_processing") as runner:
        plan.FUSING_RUNNERS = ("beam",) if fused else ()  # the switch this benchmark is about
        run_pipeline(spec, runner, root, run_id)
    wall = time.time() - start
    manifests = {name: json.loads((root / "runs" / run_id / name / "manifest.json").read_text())
                 for name in ("examples", "features")}
    digests = {name: m["seq_digest"] for name, m in manifests.items()}
    ends = {name: m["timeline"]["finished"] for name, m in manifests.items()}
    return {"wall": wall, "write_at": ends["examples"] - start,
            "features_at": ends["features"] - start, "gap": ends["features"] - ends["examples"],
            "digests": digests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seqline-bench-fused-") as tmp:
        pipeline = _generate(Path(tmp) / "in", args.rows)
        runs: dict[bool, list[dict]] = {True: [], False: []}
        for _ in range(args.repeats):
            for fused in (True, False):  # alternated, so load on the machine hits both
                runs[fused].append(_once(pipeline, Path(tmp) / "root", fused, args.workers))
    digests = {json.dumps(r["digests"], sort_keys=True) for rs in runs.values() for r in rs}
    if len(digests) != 1:
        sys.exit(f"FAILED: fused and unfused runs stored different records: {digests}")
    rows = []
    for fused, label in ((False, "one Beam job per stage"), (True, "fused: one Beam job")):
        rs = runs[fused]

        def med(key: str, rs: list[dict] = rs) -> str:
            return f"{statistics.median(r[key] for r in rs):.2f}"

        walls = ", ".join(f"{r['wall']:.2f}" for r in rs)
        rows.append(f"| {label} | {med('wall')} ({walls}) | {med('write_at')} | "
                    f"{med('features_at')} | {med('gap')} |")
    speedup = (statistics.median(r["wall"] for r in runs[False])
               / statistics.median(r["wall"] for r in runs[True]))
    text = "\n".join([
        "# Beam: the data stages as one job",
        "",
        f"Written by `benchmarks/beam_fused.py --rows {args.rows} --repeats {args.repeats}` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.rows:,} rows; Beam FnApiRunner "
        f"multi_processing, {args.workers} workers; medians of {args.repeats} (each run listed).",
        "CSV ingest -> tfrecord_write -> preprocess; both modes stored the same records "
        "(seq digests equal). Seconds.",
        "",
        "| mode | run wall s (each) | tfrecord_write commits at s | preprocess commits at s "
        "| preprocess commits after tfrecord_write s |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Fused ÷ one job per stage, wall: {speedup:.2f}× faster.",
        "",
    ])
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
