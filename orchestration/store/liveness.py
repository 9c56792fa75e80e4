"""Which running runs lost their driver: a stale heartbeat, or a dead pid on this host."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from seqline.orchestration.processes import pid_alive
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.rows import now
from seqline.orchestration.store.tables import runs, stage_runs

__all__ = ["pid_alive", "reap"]  # pid_alive: re-exported for the store's readers

INTERRUPTED = ("the run's driver stopped (killed or rebooted) without finishing it; "
               "`seqline run --resume --run-id ID` goes on from its last committed stage")


def reap(engine: Engine, host: str, stale_after_s: float) -> list[str]:
    """Mark `interrupted` the running runs whose driver is gone; see RunStore.reap_interrupted.

    Args:
        engine: the store's engine.
        host: this machine's name (pids are checked only for runs driven from here).
        stale_after_s: how old a heartbeat may be.

    Returns:
        The ids of the runs marked interrupted.
    """
    cutoff = now() - timedelta(seconds=stale_after_s)
    with engine.connect() as conn:
        running = conn.execute(select(runs.c.run_id, runs.c.heartbeat, runs.c.started,
                                      runs.c.host, runs.c.pid)
                               .where(runs.c.status == "running")).all()
    gone = [r for r in running if (r.heartbeat or r.started) < cutoff
            or (r.host == host and r.pid is not None and not pid_alive(r.pid))]
    if not gone:
        return []
    with writing(engine) as conn:
        return [r.run_id for r in gone if _interrupt(conn, r)]


def _interrupt(conn: Connection, run: Any) -> bool:
    """Mark one run interrupted unless it beat (or ended) since it was read."""
    same_beat = runs.c.heartbeat.is_(None) if run.heartbeat is None \
        else runs.c.heartbeat == run.heartbeat
    ended = now()
    done = conn.execute(update(runs).where(
        runs.c.run_id == run.run_id, runs.c.status == "running", same_beat).values(
        status="interrupted", finished=ended, error_message=INTERRUPTED))
    if done.rowcount == 0:
        return False
    conn.execute(update(stage_runs).where(
        stage_runs.c.run_id == run.run_id,
        stage_runs.c.status.in_(("pending", "running"))).values(
        status="failed", finished=ended, error="interrupted with its run"))
    return True
