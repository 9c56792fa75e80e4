"""What a run's log (log.jsonl, decision 56) costs a run: the 1M-row data job with it and without.

Usage: .venv/bin/python benchmarks/run_log.py [--rows 1000000] [--repeats 3]
       [--out benchmarks/RUN_LOG.md]

The job is benchmarks/verify.py's (`verify.make_job`): a seeded CSV -> ingest ->
tfrecord_write (gzip) -> preprocess (x*x, gzip), local runner, 2 workers, no cache, no verify,
run as `seqline run` in a process of its own. Two measures:

- **In the run**: every call into the log's code (its event subscriber, which sees every event
  of the run, and its logging handler) timed with perf_counter and summed, over the whole run:
  the seconds the log takes from the run, free of the machine's load.
- **Run against run**: the same job with the log and with the log replaced by one that does
  nothing, alternated after a warm-up of each; medians of wall and CPU seconds (a shared
  2-core machine makes the wall noisy: read the first measure first).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify import make_job  # noqa: E402  (benchmarks/ is not a package)

BENCHMARKS = Path(__file__).resolve().parent


def child(mode: str, pipeline: str, run_id: str, report: str) -> None:
    """`seqline run` in this process, the log timed ("on") or replaced by a no-op ("off")."""
    from seqline.orchestration import executor
    from seqline.orchestration.cli.main import main_command
    from seqline.orchestration.run_log import RunLog

    spent = {"seconds": 0.0, "events": 0, "records": 0}

    class TimedLog(RunLog):
        def __call__(self, event: Any) -> None:
            start = time.perf_counter()
            super().__call__(event)
            spent["seconds"] += time.perf_counter() - start
            spent["events"] += 1

        def emit(self, record: Any) -> None:
            start = time.perf_counter()
            super().emit(record)
            spent["seconds"] += time.perf_counter() - start
            spent["records"] += 1

    class NoLog(RunLog):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, max_bytes=0, error_bytes=0, **kwargs)

        def __call__(self, event: Any) -> None:
            return None

        def attach(self) -> None:
            return None

    executor.RunLog = TimedLog if mode == "on" else NoLog  # type: ignore[misc]
    sys.argv = ["seqline", "run", pipeline, "--root", "root", "--run-id", run_id,
                "--workers", "2", "--no-cache", "--no-verify"]
    start = time.perf_counter()
    try:
        main_command()
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        spent["wall"] = time.perf_counter() - start
        Path(report).write_text(json.dumps(spent))


def per_line(lines: int = 20_000) -> float:
    """Microseconds a log record costs the thread that logs it (a chatty engine at -v): a
    warning through the root logger into the run's log, in this process."""
    import logging

    from seqline.orchestration.run_log import RunLog

    with tempfile.TemporaryDirectory() as tmp:
        log = RunLog(Path(tmp), ["read"])
        log.attach()
        chatty = logging.getLogger("bench.chatty")
        chatty.addHandler(logging.NullHandler())  # so that nothing is printed as well
        start = time.perf_counter()
        for i in range(lines):
            chatty.warning("block %d of stage %s took %.2f s", i, "read", 0.25)
        seconds = time.perf_counter() - start
        log.close()
    return seconds / lines * 1e6


def run(pipeline: Path, mode: str, run_id: str) -> dict[str, float]:
    """One run in a fresh process: its wall and CPU seconds, and the log's own seconds."""
    report = pipeline.parent / f"{run_id}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", mode, "--pipeline", str(pipeline),
                    "--run-id", run_id, "--report", str(report)], cwd=pipeline.parent,
                   check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = json.loads(report.read_text())
    log = pipeline.parent / "root" / "runs" / run_id / "log.jsonl"
    return {**found, "outer_wall": time.perf_counter() - start,
            "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "lines": len(log.read_text().splitlines()) if log.exists() else 0,
            "bytes": log.stat().st_size if log.exists() else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child")
    parser.add_argument("--pipeline")
    parser.add_argument("--run-id")
    parser.add_argument("--report")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pipeline, args.run_id, args.report)
        return
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = make_job(Path(tmp) / "job", args.rows, name="run-log-bench")
        run(pipeline, "on", "warm-on")  # page cache, .pyc: not counted
        run(pipeline, "off", "warm-off")
        runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
        for i in range(args.repeats):
            for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                runs[mode].append(run(pipeline, mode, f"{mode}-{i}"))
                r = runs[mode][-1]
                print(f"  {mode}-{i}: wall {r['outer_wall']:.2f} s, CPU {r['cpu']:.2f} s, log "
                      f"{r['seconds'] * 1000:.2f} ms, {r['lines']} lines", file=sys.stderr)
    micros = per_line()
    text = report(args.rows, runs) + (
        f"\nA log record costs the thread that logs it {micros:.1f} µs (20,000 warnings "
        "through the root logger into the run's log, flushed line by line, in one process): "
        f"an engine logging 1,000 lines a second would pay {micros / 10:.1f} % of a core, "
        "and the cap bounds the file.\n")
    print(text)
    if args.out:
        args.out.write_text(text)


def report(rows: int, runs: dict[str, list[dict[str, float]]]) -> str:
    on = runs["on"]
    median = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("outer_wall", "cpu")}
              for m in runs}
    log_s = statistics.median(r["seconds"] for r in on)
    lines = [
        f"# What a run's log costs (decision 56): the {rows:,}-row data job", "",
        "`benchmarks/run_log.py` on 2 cores (a shared machine: read the in-run figure first).", "",
        "| measure | with the log | without |", "| --- | ---: | ---: |",
        f"| median wall s | {median['on']['outer_wall']:.2f} | {median['off']['outer_wall']:.2f} |",
        f"| median CPU s (driver) | {median['on']['cpu']:.2f} | {median['off']['cpu']:.2f} |",
        f"| events the log saw | {statistics.median(r['events'] for r in on):.0f} | |",
        f"| log records it took | {statistics.median(r['records'] for r in on):.0f} | |",
        f"| lines written | {statistics.median(r['lines'] for r in on):.0f} | 0 |",
        f"| log.jsonl bytes | {statistics.median(r['bytes'] for r in on):.0f} | 0 |",
        f"| seconds in the log's code | {log_s:.4f} | |", "",
        f"**The log's own time: {log_s * 1000:.1f} ms, "
        f"{100 * log_s / median['on']['outer_wall']:.3f} % of the run's median wall time.** "
        f"Ratio of the medians, with/without: wall "
        f"{median['on']['outer_wall'] / median['off']['outer_wall']:.3f}, CPU "
        f"{median['on']['cpu'] / median['off']['cpu']:.3f} (noise on a shared machine).", "",
        "Each run: " + "; ".join(f"{m}: " + ", ".join(f"{r['outer_wall']:.2f}" for r in runs[m])
                                 + " s" for m in runs), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
