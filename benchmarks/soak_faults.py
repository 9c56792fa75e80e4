"""The soak's faults as they come due: each planned fault hits a target found at that moment;
one that finds none (no run going, the scheduler being started again, another hold still on)
waits for one, tried once a second, for up to `--patience` seconds; then, or when the chaos
ends, it counts as "no target"."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any

import psutil
import soak_chaos

__all__ = ["KILLS_PER_RUN", "give_up", "inject", "retry"]

# A run resumed this many times is no longer a kill's target (its driver or its workers):
# kills that wait for a target would otherwise hit the one run going again and again, past
# the supervisor's tries (MAX_RESUMES), and the audit would count a run the harness gave up.
KILLS_PER_RUN = 3
KILLS = ("worker", "driver", "scheduler", "dashboard")
HOLDS = {"disk_full": soak_chaos.fill_disk, "store_lock": soak_chaos.lock_store}


class Look:
    """What runs now, looked up once for the faults injected together (each look walks all
    of the harness's processes)."""

    def __init__(self, soak: Any) -> None:
        self.soak = soak

    @cached_property
    def drivers(self) -> dict[str, psutil.Process]:
        """The live drivers of runs that may still be hit, by run id."""
        return {run_id: process for run_id, process in soak_chaos.drivers(self.soak.me).items()
                if self.soak.resumes[run_id] < KILLS_PER_RUN}

    @cached_property
    def workers(self) -> list[tuple[str, psutil.Process]]:
        """Their workers in the middle of blocks, with their run ids."""
        return [(run_id, worker) for run_id, driver in sorted(self.drivers.items())
                for worker in soak_chaos.workers(driver)]


def inject(soak: Any, fault: soak_chaos.Fault, now: float, look: Look | None = None) -> None:
    """Inject `fault` (`now` s into the soak), or keep it waiting for a target."""
    record = {"at": fault.at, "late_s": round(now - fault.at, 2), "kind": fault.kind}
    if fault.kind in HOLDS and (fault.kind != "disk_full" or soak.tmpfs):
        _hold(soak, fault, record, now)
        return
    target = _target(soak, fault, record, look or Look(soak))
    if target is None and fault.kind in KILLS and _may_wait(soak, fault, now):
        return
    if target is not None and soak_chaos.kill(target):
        soak.killed.add(target.pid)
        record["pid"] = target.pid
        soak.kinds[fault.kind]["injected"] += 1
    else:
        record["note"] = "no target" if fault.kind != "disk_full" else "no tmpfs"
        soak.kinds[fault.kind]["no target"] += 1
    soak.faults.append(record)


def retry(soak: Any, now: float) -> None:
    """Try the faults that wait for a target again (once a second), with one look for all."""
    waiting, soak.waiting = soak.waiting, []
    look = Look(soak)
    for fault in waiting:
        inject(soak, fault, now, look)


def give_up(soak: Any) -> None:
    """The chaos is over: the faults still waiting found no target."""
    for fault in soak.waiting:
        soak.kinds[fault.kind]["no target"] += 1
        soak.faults.append({"at": fault.at, "kind": fault.kind,
                            "note": "no target before the chaos ended"})
    soak.waiting = []


def _may_wait(soak: Any, fault: soak_chaos.Fault, now: float) -> bool:
    """Keep `fault` waiting if its patience is not spent; whether it was kept."""
    if now - fault.at >= soak.args.patience:
        return False
    soak.waiting.append(fault)
    return True


def _target(soak: Any, fault: soak_chaos.Fault, record: dict,
            look: Look) -> psutil.Process | None:
    """The process `fault` kills now (its run id in `record`), or None."""
    if fault.kind in ("scheduler", "dashboard"):
        process = soak.owned.get(fault.kind)  # not there, or ended: being started again
        return psutil.Process(process.pid) if process and process.poll() is None else None
    if fault.kind == "driver":
        live = sorted(run_id for run_id, process in look.drivers.items()
                      if run_id in soak.running and process.pid not in soak.killed)
        if live:
            record["run_id"] = live[int(fault.pick * len(live))]
            return look.drivers[record["run_id"]]
    if fault.kind == "worker":
        found = [(run_id, w) for run_id, w in look.workers if w.pid not in soak.killed]
        if found:
            record["run_id"], worker = found[int(fault.pick * len(found))]
            return worker
    return None


def _hold(soak: Any, fault: soak_chaos.Fault, record: dict, now: float) -> None:
    """Fill the disk or lock the store for the fault's hold, on a thread; one hold at a time
    (a full disk and a held lock do not stack): while one is on, the next waits."""
    soak.holds = [t for t in soak.holds if t.is_alive()]
    if soak.holds:
        if _may_wait(soak, fault, now):
            return
        record["note"] = "a hold was still on"
        soak.kinds[fault.kind]["no target"] += 1
        soak.faults.append(record)
        return
    place = soak.root if fault.kind == "disk_full" else soak.root / "seqline.db"

    def hold() -> None:
        record["note"] = HOLDS[fault.kind](place, fault.hold)
        ok = not record["note"].startswith("not taken")
        soak.kinds[fault.kind]["injected" if ok else "no target"] += 1
        soak.faults.append(record)

    thread = threading.Thread(target=hold, daemon=True)
    soak.holds.append(thread)
    thread.start()
