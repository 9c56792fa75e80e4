"""The scheduler's figures: tick latency, idle cost, and how many schedules one scheduler serves.

Run: `.venv/bin/python benchmarks/scheduler.py` (about 6 minutes) or `--smoke` (~30 s).
Writes nothing: paste the printed table into benchmarks/SCHEDULER.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
from sqlalchemy import select

from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.launch import LaunchRequest, ProcessLauncher
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.tables import runs

SEQLINE = str(Path(sys.executable).parent / "seqline")
# The smallest real pipeline: one ingest stage of 20 rows (the run's own work is not measured,
# only how long it takes to be started and recorded).
PIPELINE = "name: tick\nstages:\n  - {name: read, component: ingest, params: {format: csv, " \
           "paths: [in.csv]}}\n"


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="seqline-sched-"))
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(20)))
    (folder / "tick.yaml").write_text(PIPELINE)
    return folder


class Shifted:
    """Real time plus an offset: the benchmark jumps over the idle 55 s of each minute."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def tick_latency(ticks: int) -> dict[str, list[float]]:
    """`ticks` every-minute ticks under the real loop (1 s passes), each a real `seqline run`.

    Each minute is compressed: the clock jumps to a random 0-1 s before the next fire time
    (the phase a 1 s loop has), so the loop's own wait is part of the figure.

    Returns:
        Seconds from fire time to the run's process started (`launched`) and to the run's
        row in the store (`started`, written by `seqline run` once it has imported).
    """
    folder = _folder()
    store = RunStore.open(folder / "root")
    clock = Shifted()
    t0 = clock().replace(second=0, microsecond=0) + timedelta(minutes=1)
    schedule, _ = new_schedule("tick", folder / "tick.yaml", "* * * * *", workers=1,
                               overlap="allow", at=t0 - timedelta(seconds=30))
    store.schedules.add_schedule(schedule)
    launcher = ProcessLauncher(folder / "root", None, folder / "logs")
    scheduler = Scheduler(store, launcher, clock=clock)
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop, 1.0), daemon=True)
    clock.offset = t0 - timedelta(seconds=random.uniform(0, 1)) - datetime.now(UTC)
    loop.start()
    launched: list[float] = []
    started: list[float] = []
    for minute in range(ticks):
        fire = t0 + timedelta(minutes=minute)
        run_id = f"tick-{fire:%Y%m%dT%H%M%SZ}"
        while _status(store, run_id) not in ("succeeded", "failed"):  # one run at a time:
            time.sleep(0.05)  # the next tick's start is not slowed by this one's work
        with store.engine.connect() as conn:  # to the microsecond (show_run rounds to 1 s)
            run_started = conn.execute(select(runs.c.started).where(runs.c.run_id == run_id)
                                       ).scalar_one()
        tick = next(t for t in store.schedules.ticks_of("tick", limit=3) if t.run_id == run_id)
        real_fire = fire - clock.offset  # the fire time on the real clock
        launched.append((tick.launched - fire).total_seconds())
        started.append((run_started - real_fire).total_seconds())
        nxt = fire + timedelta(minutes=1)
        clock.offset = nxt - timedelta(seconds=random.uniform(0, 1)) - datetime.now(UTC)
    stop.set()
    loop.join(timeout=10)
    store.close()
    return {"launched": launched, "started": started}


def _status(store: RunStore, run_id: str) -> str | None:
    return next((r["status"] for r in store.list_runs(limit=5) if r["run_id"] == run_id), None)


def idle_cost(seconds: float, schedules: int) -> tuple[float, float]:
    """A real `seqline scheduler` with `schedules` daily schedules, nothing due.

    Returns:
        CPU use in % of one core over `seconds`, and resident memory in MB.
    """
    folder = _folder()
    root = str(folder / "root")
    for i in range(schedules):
        subprocess.run([SEQLINE, "schedule", "add", f"daily-{i}", str(folder / "tick.yaml"),
                        "--cron", f"{i % 60} 3 * * *", "--root", root], check=True,
                       capture_output=True)
    daemon = subprocess.Popen([SEQLINE, "scheduler", "--root", root],
                              stderr=subprocess.DEVNULL)
    process = psutil.Process(daemon.pid)
    time.sleep(5)  # past start-up (imports)
    before = process.cpu_times()
    time.sleep(seconds)
    after = process.cpu_times()
    rss = process.memory_info().rss / 2**20
    daemon.terminate()
    daemon.wait(timeout=30)
    cpu = (after.user + after.system - before.user - before.system) / seconds * 100
    return cpu, rss


def spawn_true(request: LaunchRequest) -> int:
    """A real process per tick, without Python's start-up: the scheduler's share of a launch."""
    return subprocess.Popen(["/bin/true"], start_new_session=True).pid


def _dead_pid() -> int:
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid


def many_schedules(count: int, spawn: bool = True) -> float:
    """`count` every-minute schedules firing at once: the seconds one pass takes to record
    and launch them all (the last one's latency beyond the loop's own wait).

    Args:
        count: how many schedules.
        spawn: start a real process per tick (else only the store's work: a launcher that
            returns the pid of a process that already ended).
    """
    folder = _folder()
    store = RunStore.open(folder / "root")
    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    for i in range(count):
        schedule, _ = new_schedule(f"s{i:05d}", folder / "tick.yaml", "* * * * *", at=t0)
        store.schedules.add_schedule(schedule)
    clock = [t0]
    dead = _dead_pid()
    scheduler = Scheduler(store, spawn_true if spawn else lambda request: dead,
                          clock=lambda: clock[0])
    scheduler.acquire()
    seconds = []
    for minute in (1, 2):  # the second pass is the steady state (ticks and runs exist)
        clock[0] = t0 + timedelta(minutes=minute)
        start = time.perf_counter()
        scheduler.tick_once()
        seconds.append(time.perf_counter() - start)
    store.close()
    return seconds[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI keeps it working)")
    parser.add_argument("--latency-only", action="store_true", help="only the tick latency")
    args = parser.parse_args()
    ticks, idle_s, counts = (3, 5, [10, 50]) if args.smoke else (60, 60,
                                                               [10, 100, 250, 500, 1000, 2000])
    latency = tick_latency(ticks)
    for name, values in latency.items():
        print(f"| fire -> run {name} over {ticks} every-minute ticks | "
              f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s |")
    if args.latency_only:
        return
    cpu, rss = idle_cost(idle_s, 10)
    print(f"| idle scheduler, 10 schedules, {idle_s:.0f} s | CPU {cpu:.2f} % of a core, "
          f"RSS {rss:.0f} MB |")
    for count in counts:
        print(f"| {count} schedules firing at once | one pass: {many_schedules(count):.2f} s; "
              f"without spawning: {many_schedules(count, spawn=False):.2f} s |")


if __name__ == "__main__":
    main()
