"""The soak's plan (faults, manual runs, input changes: all drawn from the seed) and its faults.

Each fault is injected from outside, as life does: SIGKILL to a real pid (a worker, a run's
driver, the scheduler, the dashboard), a real tmpfs filled to the last byte for a few
seconds, a real SQLite connection holding the store's write lock for a few seconds.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import signal
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

__all__ = ["KINDS", "Fault", "Plan", "drivers", "fill_disk", "kill", "lock_store", "make_plan",
           "workers"]

KINDS = ("worker", "driver", "scheduler", "dashboard", "disk_full", "store_lock")
WARMUP_S = 45.0  # the first runs start before the first fault
QUIET_TAIL_S = 10.0  # no fault starts this close to the end of the chaos window


@dataclass(frozen=True)
class Fault:
    at: float  # seconds from the soak's start
    kind: str
    hold: float  # seconds a full disk or a held lock lasts (0 for a kill)
    pick: float  # in [0, 1): which of the candidates found at that moment is hit


@dataclass(frozen=True)
class Plan:
    faults: list[Fault]
    manual: list[tuple[float, str]]  # (at, runner) of each manual run
    parts: list[tuple[float, int]]  # (at, rows) of each input part added (at 0: the first ones)
    backfill_at: float

    def digest(self) -> str:
        """The plan's sha256 (16 hex digits): the same seed, the same digest."""
        text = json.dumps({"faults": [asdict(f) for f in self.faults], "manual": self.manual,
                           "parts": self.parts, "backfill_at": self.backfill_at})
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_plan(seed: int, seconds: float, mean_gap: float, first_parts: int = 12) -> Plan:
    """Everything the soak does on purpose, drawn from `seed` alone.

    Faults come at exponential gaps of mean `mean_gap` s; their kinds in shuffled rounds of
    every kind (so each kind gets about a sixth of them).
    """
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = WARMUP_S
    cycle: list[str] = []
    while True:
        t += rng.expovariate(1 / mean_gap)
        if t >= seconds - QUIET_TAIL_S:
            break
        if not cycle:
            cycle = list(KINDS)
            rng.shuffle(cycle)
        kind = cycle.pop()
        hold = round(rng.uniform(2, 6), 2) if kind in ("disk_full", "store_lock") else 0.0
        faults.append(Fault(round(t, 2), kind, hold, round(rng.random(), 4)))
    manual, t = [], 20.0
    while t < seconds - 30:
        manual.append((round(t, 2), rng.choice(["local", "local", "ray"])))
        t += rng.uniform(60, 150)
    parts = [(0.0, rng.randint(20, 60)) for _ in range(first_parts)]
    for minute in range(int(seconds // 60) + 1):  # a new part each minute, at a random second
        at = minute * 60 + rng.uniform(5, 55)
        if at < seconds:
            parts.append((round(at, 2), rng.randint(20, 60)))
    return Plan(faults, manual, parts, round(seconds * rng.uniform(0.2, 0.35), 2))


# -- finding targets ------------------------------------------------------------------------


def _cmdline(process: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        if process.status() != psutil.STATUS_ZOMBIE:
            return process.cmdline()
    return []


def drivers(under: psutil.Process) -> dict[str, psutil.Process]:
    """The live `seqline run` processes below `under`, by run id."""
    found = {}
    for process in under.children(recursive=True):
        line = _cmdline(process)
        for i, part in enumerate(line[:-1]):
            if part.endswith("/seqline") and line[i + 1] == "run" and "--run-id" in line:
                found[line[line.index("--run-id") + 1]] = process
                break
    return found


def workers(driver: psutil.Process) -> list[psutil.Process]:
    """A driver's workers in the middle of blocks: Ray's task workers (titled after the task,
    which the runner names for its stage and block: ray::features:block-12), or the
    local runner's forked workers (children of its forkserver, never the server itself)."""
    found = []
    with contextlib.suppress(psutil.Error):
        for process in driver.children(recursive=True):
            line = " ".join(_cmdline(process))
            forked = "forkserver" in line and "forkserver" in " ".join(
                _cmdline(process.parent()))
            if (line.startswith("ray::") and ":block-" in line) or forked:
                found.append(process)
    return found


def kill(process: psutil.Process) -> bool:
    """SIGKILL; False if it had already gone."""
    try:
        process.send_signal(signal.SIGKILL)
        return True
    except psutil.Error:
        return False


# -- a full disk, a store that refuses writes ------------------------------------------------


def fill_disk(root: Path, hold: float) -> str:
    """Fill the filesystem of `root` to its last byte for `hold` s, then free it.

    Returns:
        What happened, for the fault's record.
    """
    filler = root / ".soak-fill"
    try:
        with open(filler, "wb", buffering=0) as out:
            free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
            with contextlib.suppress(OSError):
                os.posix_fallocate(out.fileno(), 0, max(free - 65536, 4096))
            chunk = b"\0" * 65536
            while True:  # the last bytes, down to one block
                try:
                    out.write(chunk)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    if len(chunk) <= 512:
                        break
                    chunk = chunk[: len(chunk) // 8]
            left = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
            time.sleep(hold)
        return f"full ({left} bytes free) for {hold:.1f} s"
    finally:
        with contextlib.suppress(OSError):
            filler.unlink()


def lock_store(db: Path, hold: float) -> str:
    """Hold the SQLite store's write lock (BEGIN EXCLUSIVE) for `hold` s: every writer waits
    (the store's busy timeout is 30 s) or is refused."""
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        time.sleep(hold)
        conn.execute("ROLLBACK")
        return f"write lock held {hold:.1f} s"
    except sqlite3.OperationalError as exc:
        return f"not taken: {exc}"
    finally:
        conn.close()
