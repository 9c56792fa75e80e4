"""Shard compression: deflate implementations and levels on real shard bytes, and a run's cost.

Usage: .venv/bin/python benchmarks/codec.py [--smoke] [--rows 1000000] [--repeats 3]
       [--before REV] [--out benchmarks/CODEC.md]

The job is benchmarks/verify.py's: a seeded CSV of `k` (int), `x` (float), `s` (one of four
words) -> ingest -> tfrecord_write -> preprocess (a pyarrow function adding x*x).

1. Codecs. The job runs once with `compression: none`; its two artifacts' shards (65,536
   records each, as stored) are the input. Each implementation and level compresses every
   shard whole, as the sink does, `--repeats` times; the best pass counts. Inflate: each
   implementation's reader on its own output (libdeflate whole-buffer, the others their
   streaming decompressobj), best pass. MB/s are of uncompressed bytes; ratio is
   uncompressed / compressed. isal and zlib-ng are measured if installed (they are not
   seqline's dependencies: `pip install isal zlib-ng` to see them).
2. Runs. `seqline run --no-verify --no-cache` of the job (gzip, each stage's default level) on
   the local runner with 2 workers: this tree against `--before REV` (its packages first on
   PYTHONPATH, as benchmarks/startup.py does), alternated, after one unmeasured warm-up of
   each, medians of wall time; artifact sizes from the manifests. Then `seqline verify` of
   each tree's first run, by that tree (so each inflates its own shards), alternated.
The machine may be shared (2 cores, a CI run in the background): compare medians and ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import deflate
import yaml
from startup import tree_at
from verify import make_job

BENCHMARKS = Path(__file__).resolve().parent
SEQLINE = Path(sys.executable).parent / "seqline"
# The revision before decision 51: zlib level 6 (tf.io.TFRecordWriter's GZIP default).
BEFORE = "cf58e0c"

Codec = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]


def _zlib_like(module, level: int) -> Codec:
    """compressobj / decompressobj with wbits 31 (a gzip member), as Python's zlib has them."""
    def compress(data: bytes) -> bytes:
        c = module.compressobj(level, module.DEFLATED, module.MAX_WBITS | 16)
        return c.compress(data) + c.flush()

    def inflate(data: bytes) -> bytes:
        return module.decompressobj(module.MAX_WBITS | 16).decompress(data)
    return compress, inflate


def _libdeflate(level: int) -> Codec:
    return (lambda data: deflate.gzip_compress(data, level)), deflate.gzip_decompress


def codecs() -> dict[str, Codec]:
    found = {f"zlib {lv}": _zlib_like(zlib, lv) for lv in (1, 6)}
    found |= {f"libdeflate {lv}": _libdeflate(lv) for lv in (1, 2, 3, 4, 6)}
    try:
        from isal import isal_zlib
        found |= {f"isal {lv}": _zlib_like(isal_zlib, lv) for lv in (0, 1, 2, 3)}
    except ImportError:
        pass
    try:
        from zlib_ng import zlib_ng
        found |= {f"zlib-ng {lv}": _zlib_like(zlib_ng, lv) for lv in (1, 3, 6)}
    except ImportError:
        pass
    return found


def best_pass(function: Callable[[bytes], bytes], shards: list[bytes], repeats: int
              ) -> tuple[float, list[bytes]]:
    best, out = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        out = [function(s) for s in shards]
        best = min(best, time.perf_counter() - start)
    return best, out


def measure_codecs(shards: list[bytes], repeats: int) -> list[tuple[str, float, float, float]]:
    """Per codec: name, compress MB/s, ratio, inflate MB/s (its own reader, its own output)."""
    raw = sum(map(len, shards))
    rows = []
    for name, (compress, inflate) in codecs().items():
        seconds, packed = best_pass(compress, shards, repeats)
        assert [zlib.decompress(p, zlib.MAX_WBITS | 16) for p in packed] == shards, name
        inflate_seconds, _ = best_pass(inflate, packed, repeats)
        rows.append((name, raw / seconds / 1e6, raw / sum(map(len, packed)),
                     raw / inflate_seconds / 1e6))
        print(f"  {name}: {rows[-1][1]:.0f} MB/s, ratio {rows[-1][2]:.2f}", file=sys.stderr)
    return rows


def pipeline_with(folder: Path, compression: str) -> Path:
    """verify.py's job, every TFRecord stage with `compression` (and its default level)."""
    spec = yaml.safe_load((folder / "p.yaml").read_text())
    for stage in spec["stages"][1:]:
        stage["params"]["compression"] = compression
    out = folder / f"pipeline-{compression}.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def run(pipeline: Path, run_id: str, env: dict[str, str]) -> float:
    return timed([str(SEQLINE), "run", str(pipeline), "--root", "root", "--run-id", run_id,
                  "--workers", "2", "--no-cache", "--no-verify"], pipeline.parent, env)


def artifact_bytes(root: Path, run_id: str) -> int:
    return sum(sum(s["bytes"] for s in json.loads(m.read_text())["shards"])
               for m in (root / "runs" / run_id).glob("*/manifest.json")
               if json.loads(m.read_text()).get("format") == "tfrecord")


def raw_shards(folder: Path, env: dict[str, str]) -> list[bytes]:
    pipeline = pipeline_with(folder, "none")
    run(pipeline, "raw", env)
    return [p.read_bytes() for p in sorted((folder / "root" / "runs" / "raw").glob(
        "*/shard-*.tfrecord"))]


def measure_runs(folder: Path, trees: dict[str, dict[str, str]], repeats: int
                 ) -> dict[str, tuple[list[float], list[float], int]]:
    """Per tree: run seconds, `seqline verify` seconds (of its own first run), bytes stored."""
    pipeline = pipeline_with(folder, "gzip")
    runs: dict[str, list[float]] = {name: [] for name in trees}
    verifies: dict[str, list[float]] = {name: [] for name in trees}
    for name, env in trees.items():
        run(pipeline, f"warm-{name.split()[0]}", env)  # page cache, .pyc: not counted
    for i in range(repeats):
        for name, env in trees.items():
            runs[name].append(run(pipeline, f"{name.split()[0]}-{i}", env))
    for _ in range(repeats):
        for name, env in trees.items():
            verifies[name].append(timed([str(SEQLINE), "verify", "--root", "root",
                                         f"{name.split()[0]}-0"], folder, env))
    return {name: (runs[name], verifies[name],
                   artifact_bytes(folder / "root", f"{name.split()[0]}-0")) for name in trees}


def report(rows: int, raw: int, codec_rows: list, runs: dict, repeats: int) -> str:
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = [f"# Shard compression at {rows:,} rows", "",
             "Written by `.venv/bin/python benchmarks/codec.py` (its docstring says what is "
             "measured and how); the choice it informs: docs/decisions/0051-deflate.md.", "",
             f"Machine: {datetime.date.today()}: {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, libdeflate via `deflate` "
             f"{deflate.__version__}; load average {load} (1 / 5 / 15 min) at the end.", "",
             f"## Codecs on the job's shards ({raw / 1e6:.1f} MB uncompressed, both "
             f"artifacts), best of {repeats}", "",
             "| implementation and level | compress MB/s | ratio | size vs zlib 6 | "
             "inflate MB/s |", "|---|---:|---:|---:|---:|"]
    base = next(r[2] for r in codec_rows if r[0] == "zlib 6")
    for name, speed, ratio, inflate in codec_rows:
        lines.append(f"| {name} | {speed:,.0f} | {ratio:.2f} | {base / ratio - 1:+.1%} | "
                     f"{inflate:,.0f} |")
    if runs:
        lines += ["", f"## `seqline run --no-verify` of the job, {repeats} alternated runs "
                  "each, medians", "",
                  "| tree | run, median s | each run (s) | `seqline verify`, median s | "
                  "each verify (s) | TFRecord artifacts MB |", "|---|---:|---|---:|---|---:|"]
        for name, (times, verify, size) in runs.items():
            lines.append(f"| {name} | {statistics.median(times):.2f} | "
                         f"{', '.join(f'{t:.2f}' for t in times)} | "
                         f"{statistics.median(verify):.2f} | "
                         f"{', '.join(f'{t:.2f}' for t in verify)} | {size / 1e6:.1f} |")
        (b_run, b_verify, b_size), (a_run, a_verify, a_size) = runs.values()
        lines += ["", f"Before ÷ now, median wall of the run: "
                  f"**{statistics.median(b_run) / statistics.median(a_run):.2f}**; of "
                  f"`seqline verify` (which inflates every shard): "
                  f"{statistics.median(b_verify) / statistics.median(a_verify):.2f}; "
                  f"artifacts now ÷ before: {a_size / b_size:.3f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", metavar="REV", default=BEFORE)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "CODEC.md")
    args = parser.parse_args()
    rows, repeats = (2_000, 1) if args.smoke else (args.rows, args.repeats)
    with tempfile.TemporaryDirectory(prefix="codec-bench-") as tmp:
        folder = Path(tmp) / "job"
        folder.mkdir()
        make_job(folder, rows)
        (folder / "pipeline.yaml").rename(folder / "p.yaml")
        env = dict(os.environ)
        shards = raw_shards(folder, env)
        codec_rows = measure_codecs(shards, repeats)
        before = tree_at(args.before, Path(tmp) / "before")
        path = os.pathsep.join(filter(None, [str(before), env.get("PYTHONPATH")]))
        trees = {f"before ({args.before}, zlib 6)": {**env, "PYTHONPATH": path},
                 "now (libdeflate, default level)": env}
        runs = measure_runs(folder, trees, repeats)
    text = report(rows, sum(map(len, shards)), codec_rows, runs, repeats)
    print(text)
    if not args.smoke:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
