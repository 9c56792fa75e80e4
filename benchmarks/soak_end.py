"""The soak's end: chaos off, the scheduler stopped between fire times, every run drained; what
outlived it all (orphan processes); and, whatever happened, the evidence kept."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import psutil
import soak_chaos
import soak_setup
from soak_setup import MAX_RESUMES
from sqlalchemy import select

from seqline.orchestration.store.tables import runs

__all__ = ["close", "drain", "orphans"]


def drain(soak: Any) -> datetime:
    """Chaos off: stop the scheduler between fire times once no tick waits, then wait for
    every run (and resume) to end. Returns when the scheduler was stopped."""
    for thread in soak.holds:
        thread.join()
    deadline = time.monotonic() + 300
    while True:
        soak.supervise()
        at = datetime.now(UTC)
        waiting = soak.store.schedules.ticks_with_status(("queued", "launching"))
        # A restarted scheduler still importing (30 s under load) has not yet recorded
        # the last fire time: stopping it then would lose that tick to the harness.
        due = at.replace(second=0, microsecond=0)
        behind = [n for n in soak.schedules if (last := soak.store.schedules.latest_tick(n))
                  is None or last.fire_time < due]
        if 15 <= at.second <= 45 and (not waiting and not behind or
                                      time.monotonic() > deadline):
            break
        time.sleep(1)
    scheduler = soak.owned.pop("scheduler", None)
    stopped = datetime.now(UTC)
    if scheduler is not None:
        scheduler.terminate()
        scheduler.wait(timeout=60)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        soak.supervise(restart=False)
        pending = [n for n in soak.owned if n != "dashboard"]
        if not pending and not soak_chaos.drivers(soak.me) and not soak.running and \
                not _resumable(soak):
            break
        time.sleep(2)
    dashboard = soak.owned.pop("dashboard", None)
    soak.dashboard_ok = soak_setup.answers(soak.port)
    if dashboard is not None:
        dashboard.terminate()
        try:
            dashboard.wait(timeout=20)
        except subprocess.TimeoutExpired:
            soak.exits["dashboard did not stop on SIGTERM in 20 s"] += 1
    return stopped

def _resumable(soak: Any) -> bool:
    with soak.store.engine.connect() as conn:
        rows = conn.execute(select(runs.c.run_id, runs.c.status)).all()
    return any(r.status != "succeeded" and soak.resumes[r.run_id] < MAX_RESUMES
               for r in rows)

def orphans(soak: Any) -> list[str]:
    """Our descendants still alive a while after everything ended (then killed)."""
    deadline = time.monotonic() + 90  # Ray's agents flush their logs before exiting
    while True:
        soak._reap()
        left = [p for p in soak.me.children(recursive=True) if soak_setup.live(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1)
    found = []
    for process in left:
        with contextlib.suppress(psutil.Error):
            found.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
            process.kill()
    soak._reap()
    return found


def close(soak: Any) -> None:
    """Stop whatever is still ours (after a failure or SIGTERM), keep the evidence."""
    for process in soak.me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            process.kill()
    for process in soak.owned.values():
        process.wait()
    soak._reap()
    soak.tmp_link.unlink(missing_ok=True)
    soak.store.close()
    evidence = soak.base / "evidence"
    evidence.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        shutil.copy(soak.root / "seqline.db", evidence)
        shutil.copytree(soak.root / "logs", evidence / "logs", dirs_exist_ok=True)
    (soak.base / "faults.json").write_text(json.dumps(soak.faults, indent=1))
    if soak.tmpfs:
        subprocess.run(["umount", "-l", soak.tmpfs], check=False)
