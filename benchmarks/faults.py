"""What surviving faults costs a run that has none, and how fast a dead worker's block reruns.

Usage: .venv/bin/python benchmarks/faults.py [--smoke] [--rows 1000000]

1. The 1M-row data job (benchmarks/data_stages.py's data) through `seqline.Pipeline.run` on
   the local runner: its wall time and block count. The retry machinery's share of it is
   measured part by part, since it is far below the noise of two whole runs on two cores:
   - local: each block writes and removes a marker naming itself (local_worker.run_marked);
     its cost per block, times the run's blocks, over the run's time;
   - Beam: the driver looks for the job's new SDK worker processes once a second (and checks
     the ones it knows five times a second, a cheap call); the CPU of one look;
   - Ray: `max_retries` costs nothing on a run without faults (Ray keeps a task's lineage
     anyway); waits are cut into 0.25 s slices, a call each.
2. For each runner, a worker SIGKILLed in the middle of a block: the time from the kill to
   the block starting again in another process (the function leaves a file named after the
   block and its process as it starts), median of three.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_stages import _generate  # noqa: E402 - the same generated data as the data bench

import seqline  # noqa: E402
from seqline.orchestration.runners.local_worker import run_marked  # noqa: E402
from seqline.pipeline.blocks import Block  # noqa: E402

SEQLINE = Path(sys.executable).parent / "seqline"
SLOW = """\
name: slow
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 100}}
  - {name: features, component: preprocess,
     params: {fn: "marked:marked", fn_kwargs: {mark_dir: "MARKS", ms: 3000}}}
"""


class _Nothing:
    stage = "bench"

    def __call__(self, block: Block) -> None:
        return None


def marker_cost(folder: Path, calls: int = 20_000) -> float:
    """Seconds a block's marker adds (run_marked around a task that does nothing)."""
    task, block = _Nothing(), Block(0, None)  # type: ignore[arg-type]
    start = time.perf_counter()
    for _ in range(calls):
        run_marked(task, block, str(folder), 1)  # type: ignore[arg-type]
    marked = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(calls):
        task(block)
    return (marked - (time.perf_counter() - start)) / calls


def watch_cost(looks: int = 200) -> float:
    """CPU seconds of one look over this process's children (Beam's watch)."""
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                for _ in range(2)]
    try:
        start = time.process_time()
        for _ in range(looks):
            for child in psutil.Process().children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    " ".join(child.cmdline())
        return (time.process_time() - start) / looks
    finally:
        for child in children:
            child.kill()


def data_job(rows: int, folder: Path) -> tuple[float, int]:
    pipeline = seqline.Pipeline.from_yaml(_generate(folder / "data", rows))
    pipeline.run(root=folder / "root", run_id="warm", cache=False, verify=False)
    start = time.perf_counter()
    result = pipeline.run(root=folder / "root", run_id="timed", cache=False, verify=False)
    wall = time.perf_counter() - start
    return wall, sum(report.blocks for report in result.stages)


MARKED = """\
import os
import time


def marked(batch, mark_dir, ms):
    \"\"\"Say which process starts which block (a file named first-seq.pid), then work.\"\"\"
    first = batch.column("__seq__")[0].as_py()
    open(os.path.join(mark_dir, f"{first}.{os.getpid()}"), "w").close()
    time.sleep(ms / 1000)
    return batch
"""


def rerun_delay(runner: str, folder: Path) -> float:
    """Seconds from a worker's SIGKILL, mid-block, to its block starting again elsewhere."""
    marks = folder / "marks"
    marks.mkdir(parents=True)
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(2000)))
    (folder / "marked.py").write_text(MARKED)
    (folder / "slow.yaml").write_text(SLOW.replace("MARKS", str(marks)))
    driver = subprocess.Popen([str(SEQLINE), "run", str(folder / "slow.yaml"), "--root",
                               str(folder / "root"), "--no-cache", "--no-verify",
                               "--runner", runner], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not (started := sorted(marks.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.005)
        first, pid = started[0].name.split(".")
        psutil.Process(int(pid)).kill()
        killed = time.perf_counter()
        while not [m for m in marks.glob(f"{first}.*") if m.suffix[1:] != pid]:
            time.sleep(0.005)
        return time.perf_counter() - killed
    finally:
        driver.kill()
        driver.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = 2_000 if args.smoke else args.rows
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "markers").mkdir()
        per_block = marker_cost(folder / "markers", 200 if args.smoke else 20_000)
        look = watch_cost(20 if args.smoke else 200)
        wall, blocks = data_job(rows, folder)
        print(f"data job, {rows:,} rows on local: {wall:.2f} s, {blocks} blocks")
        print(f"local: a block's marker {per_block * 1e6:.0f} us; {blocks} blocks = "
              f"{blocks * per_block * 1e3:.1f} ms = {blocks * per_block / wall:.4%} of the run "
              "(target <= 1 %)")
        print(f"beam: one look for new SDK workers {look * 1e3:.2f} ms CPU; one a second = "
              f"{look:.2%} of one core while a Beam job runs")
        if args.smoke:
            return
        for runner in ("local", "beam", "ray"):
            delays = [rerun_delay(runner, folder / f"{runner}-{i}") for i in range(3)
                      if not (folder / f"{runner}-{i}").mkdir()]
            print(f"{runner}: worker killed -> its block running again: median "
                  f"{statistics.median(delays):.2f} s ({', '.join(f'{d:.2f}' for d in delays)})")


if __name__ == "__main__":
    main()
