"""The one rule for a run whose driver is gone (a stale heartbeat, or a dead pid on this host),
applied two ways: readers show such a run as interrupted, the reaper records it so."""

from __future__ import annotations

import socket
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, case, literal, select, update

from seqline.orchestration.processes import pid_alive
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.rows import now
from seqline.orchestration.store.statuses import RunStatus, StageStatus
from seqline.orchestration.store.tables import runs, stage_runs

__all__ = ["HOST", "STAGE_INTERRUPTED", "STAGE_NOT_REACHED", "STALE_AFTER_S", "driver_gone",
           "interrupted", "interrupted_stage", "pid_alive", "reap", "shown_status"]

HOST = socket.gethostname()  # pids are only checked for runs driven from this machine
# The bound: a run whose driver died shows as interrupted within 30 s, so a driver
# heartbeats more often than that (the recorder's flush, every 2 s).
STALE_AFTER_S = 30.0
# What became of its stages, as of a run stopped by a cancel (decision 68): no stage failed.
STAGE_INTERRUPTED = "interrupted with its run"  # at work: cancelled
STAGE_NOT_REACHED = "not run: the run was interrupted first"  # waiting for its turn: skipped


def interrupted(run_id: str) -> str:
    """What an interrupted run's error says: what happened and how to go on, its id in it."""
    return ("the run's driver stopped (killed or rebooted) without finishing it; "
            f"`seqline run … --resume --run-id {run_id}` goes on from its last committed stage "
            f"(`seqline runs show {run_id}` prints the whole command)")


# A stage of an interrupted run that had not ended -> (its status, its reason): one at work
# was stopped (cancelled), one waiting never ran (skipped); none of them failed.
_UNENDED: dict[str, tuple[str, str]] = {
    StageStatus.running: (StageStatus.cancelled, STAGE_INTERRUPTED),
    StageStatus.pending: (StageStatus.skipped, STAGE_NOT_REACHED)}


def interrupted_stage(status: str) -> tuple[str, str] | None:
    """What a stage of an interrupted run shows as (see _UNENDED); None if it had ended."""
    return _UNENDED.get(status)


def driver_gone(heartbeat: datetime | None, started: datetime, host: str | None,
                pid: int | None, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether a running run's driver is gone.

    Gone: its newest heartbeat (its start, before the first) is older than `stale_after_s`,
    or it ran on this host and its pid no longer exists.

    Example: (beat 40 s ago, …) -> True; (beat 2 s ago, this host, a live pid) -> False.
    """
    stale = (heartbeat or started) < now() - timedelta(seconds=stale_after_s)
    return stale or (host == HOST and pid is not None and not pid_alive(pid))


def shown_status(status: str, heartbeat: datetime | None, started: datetime,
                 host: str | None, pid: int | None) -> str:
    """A run's status as readers show it, derived without writing: a `running` run whose
    driver is gone shows as `interrupted` (what the reaper would record).

    Example: ("running", beat 40 s ago, …) -> "interrupted"; ("failed", …) -> "failed".
    """
    if status == RunStatus.running and driver_gone(heartbeat, started, host, pid):
        return RunStatus.interrupted
    return status


def reap(engine: Engine, stale_after_s: float) -> list[str]:
    """Mark `interrupted` the running runs whose driver is gone; see RunWriter.reap_interrupted.

    Args:
        engine: the store's engine.
        stale_after_s: how old a heartbeat may be.

    Returns:
        The ids of the runs marked interrupted.
    """
    with engine.connect() as conn:
        running = conn.execute(select(runs.c.run_id, runs.c.heartbeat, runs.c.started,
                                      runs.c.host, runs.c.pid)
                               .where(runs.c.status == RunStatus.running)).all()
    gone = [r for r in running
            if driver_gone(r.heartbeat, r.started, r.host, r.pid, stale_after_s)]
    if not gone:
        return []
    with writing(engine) as conn:
        return [r.run_id for r in gone if _interrupt(conn, r)]


def _interrupt(conn: Connection, run: Any) -> bool:
    """Mark one run interrupted unless it beat (or ended) since it was read."""
    same_beat = runs.c.heartbeat.is_(None) if run.heartbeat is None \
        else runs.c.heartbeat == run.heartbeat
    # It ended, as far as anyone can tell, at its last heartbeat (as its seconds count,
    # documents.ran_seconds), not when a reader happened to notice.
    ended = max(run.heartbeat or run.started, run.started)
    done = conn.execute(update(runs).where(
        runs.c.run_id == run.run_id, runs.c.status == RunStatus.running, same_beat).values(
        status=RunStatus.interrupted, finished=ended, error_message=interrupted(run.run_id)))
    if done.rowcount == 0:
        return False
    for was, (status, reason) in _UNENDED.items():
        conn.execute(update(stage_runs).where(
            stage_runs.c.run_id == run.run_id, stage_runs.c.status == was).values(
            status=status, reason=reason,  # (a stage started after that beat: at its start)
            finished=case((stage_runs.c.started > ended, stage_runs.c.started),
                          else_=literal(ended, stage_runs.c.finished.type))
            if was == StageStatus.running else None))
    return True
