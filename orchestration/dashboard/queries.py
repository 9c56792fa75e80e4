"""Read-only SQL over the run store for the dashboard's pages: every function only SELECTs."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, Connection, Engine, bindparam, event, func, select

from seqline.orchestration.store.liveness import INTERRUPTED, pid_alive
from seqline.orchestration.store.rows import iso, now
from seqline.orchestration.store.store import HOST, STALE_AFTER_S
from seqline.orchestration.store.tables import epochs, eval_metrics, runs, samples, stage_runs
from seqline.orchestration.store.views import run_detail, run_summary

__all__ = ["ENDED", "grid", "history", "list_runs", "liveness", "make_read_only",
           "pipelines_known", "previous_run", "run_exists", "run_page", "run_stamp", "stage_row"]

ENDED = ("succeeded", "failed", "interrupted", "cancelled")


def make_read_only(engine: Engine) -> Engine:
    """Make every connection of `engine` refuse writes at the database (defence in depth)."""
    statement = ("PRAGMA query_only = ON" if engine.dialect.name == "sqlite"
                 else "SET default_transaction_read_only = on")

    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(statement)
        cursor.close()

    event.listen(engine, "connect", _read_only)
    return engine


def liveness(status: str, heartbeat: datetime | None, started: datetime,
             host: str | None, pid: int | None) -> str:
    """A run's status as readers should see it, derived without writing.

    A `running` run whose heartbeat is older than STALE_AFTER_S, or whose driver pid on this
    host is gone, shows as `interrupted` (what `seqline runs list` would mark it).

    Example: ("running", beat 40 s ago, …) -> "interrupted".
    """
    if status != "running":
        return status
    stale = (heartbeat or started) < now() - timedelta(seconds=STALE_AFTER_S)
    dead = host == HOST and pid is not None and not pid_alive(pid)
    return "interrupted" if stale or dead else status


def _live(row: Any) -> dict[str, Any]:
    summary = run_summary(row)
    summary["status"] = liveness(row.status, row.heartbeat, row.started, row.host, row.pid)
    if summary["status"] != row.status:
        summary["error"] = INTERRUPTED
    return summary


def list_runs(conn: Connection, *, pipeline: str | None = None, status: str | None = None,
              trigger: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest runs first, as `seqline runs list --json` prints them, liveness derived.

    Args:
        conn: a read connection.
        pipeline: only this pipeline's runs.
        status: only runs showing this status (a stale `running` run shows `interrupted`).
        trigger: only runs started this way (manual, schedule, backfill, resume).
        limit: at most this many.

    Returns:
        One dict per run (run_id, pipeline, status, runner, trigger, started, …).
    """
    query = select(runs).order_by(runs.c.started.desc(), runs.c.run_id.desc())
    if pipeline:
        query = query.where(runs.c.pipeline == pipeline)
    if trigger:
        query = query.where(runs.c.trigger == trigger)
    if status in ("running", "interrupted"):  # either may be a running row gone stale
        query = query.where(runs.c.status.in_(("running", "interrupted")))
    elif status:
        query = query.where(runs.c.status == status)
    found = []
    for row in conn.execute(query.limit(limit if status not in ("running", "interrupted")
                                        else limit * 4)):
        summary = _live(row)
        if not status or summary["status"] == status:
            found.append(summary)
    return found[:limit]


def pipelines_known(conn: Connection) -> list[str]:
    """Every pipeline name with a run, sorted (the filter's choices)."""
    return list(conn.execute(select(runs.c.pipeline).distinct().order_by(runs.c.pipeline))
                .scalars())


def grid(conn: Connection, run_ids: list[str]) -> dict[str, Any]:
    """Recent runs × stages (Airflow's grid): each cell the stage's latest attempt.

    Args:
        conn: a read connection.
        run_ids: the runs, newest first (the columns, drawn oldest first).

    Returns:
        {"runs": run ids oldest first, "stages": names in pipeline order,
         "cells": {stage: {run_id: {status, seconds, attempts}}}}.
    """
    rows = conn.execute(select(stage_runs.c.id, stage_runs.c.run_id, stage_runs.c.stage,
                               stage_runs.c.status, stage_runs.c.seconds,
                               stage_runs.c.attempt)
                        .where(stage_runs.c.run_id.in_(run_ids))
                        .order_by(stage_runs.c.id)).all()
    cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:  # ordered by id: a later attempt overwrites the earlier one
        cells[r.stage][r.run_id] = {"status": r.status, "seconds": r.seconds,
                                    "attempts": r.attempt}
    return {"runs": list(reversed(run_ids)), "stages": list(cells), "cells": dict(cells)}


def run_page(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """`seqline runs show --json`'s object, liveness derived, plus exact stage times.

    Args:
        conn: a read connection.
        run_id: the run.

    Returns:
        The object (None when the store has no such run); each stage gains `t0`/`t1`
        (Unix seconds, for the timeline) and the run gains `t0`/`t1`.
    """
    detail = run_detail(conn, run_id)
    if detail is None:
        return None
    row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one()
    shown = liveness(row.status, row.heartbeat, row.started, row.host, row.pid)
    detail["t0"] = row.started.timestamp()
    detail["t1"] = row.finished.timestamp() if row.finished else None
    times = {r.id: r for r in conn.execute(select(
        stage_runs.c.id, stage_runs.c.started, stage_runs.c.finished)
        .where(stage_runs.c.run_id == run_id))}
    for stage in detail["stages"]:
        exact = times[stage["stage_run_id"]]
        stage["t0"] = exact.started.timestamp() if exact.started else None
        stage["t1"] = exact.finished.timestamp() if exact.finished else None
        if shown != row.status and stage["status"] in ("pending", "running"):
            stage["status"] = "failed"  # as the reaper would mark it: "interrupted with its run"
            stage["error"] = stage["error"] or "interrupted with its run"
    if shown != row.status:
        detail["status"] = shown
        detail["error"] = {"stage": None, "seq": None, "message": INTERRUPTED}
    return detail


def run_exists(conn: Connection, run_id: str) -> bool | None:
    """True when the store has the run, else None (as the other lookups: `found` 404s)."""
    return conn.execute(_EXISTS, {"run_id": run_id}).first() is not None or None


def previous_run(conn: Connection, run_id: str) -> str | None:
    """The run of the same pipeline started just before `run_id` (None: it is the first)."""
    found: str | None = conn.execute(_PREVIOUS, {"run_id": run_id}).scalar()
    return found


def stage_row(conn: Connection, run_id: str, stage: str) -> Any:
    """The latest attempt of `stage` in `run_id` (None when the store has no such stage)."""
    return conn.execute(select(stage_runs).where(
        stage_runs.c.run_id == run_id, stage_runs.c.stage == stage)
        .order_by(stage_runs.c.attempt.desc()).limit(1)).first()


def _stamp_queries() -> tuple[Any, Any]:
    """run_stamp's two statements, built once: it runs every second per watched run, and
    building a statement costs more than SQLite takes to answer it."""
    run_id: BindParameter[str] = bindparam("run_id")
    ids = select(stage_runs.c.id).where(stage_runs.c.run_id == run_id).scalar_subquery()
    newest = select(func.max(samples.c.t)).where(samples.c.stage_run_id.in_(ids))
    trained = select(func.count()).select_from(epochs).where(epochs.c.stage_run_id.in_(ids))
    run = select(runs.c.status, runs.c.heartbeat, runs.c.started, runs.c.host, runs.c.pid,
                 runs.c.finished, newest.scalar_subquery().label("newest"),
                 trained.scalar_subquery().label("trained")).where(runs.c.run_id == run_id)
    stages = select(stage_runs.c.id, stage_runs.c.status).where(
        stage_runs.c.run_id == run_id).order_by(stage_runs.c.id)
    return run, stages


_STAMP, _STAGE_STATUSES = _stamp_queries()
_EXISTS = select(runs.c.run_id).where(runs.c.run_id == bindparam("run_id"))


def run_stamp(conn: Connection, run_id: str) -> tuple[Any, ...] | None:
    """What changes whenever the run's page would: polled once a second by the live stream.

    Returns:
        (status shown, finished, stage statuses, newest sample, epochs), or None when the
        store has no such run. Not the heartbeat: no page shows it, and a beat alone would
        push an update that changes nothing (a stale one changes the status shown).
    """
    row = conn.execute(_STAMP, {"run_id": run_id}).first()
    if row is None:
        return None
    stages = tuple(conn.execute(_STAGE_STATUSES, {"run_id": run_id}).all())
    newest, trained = row.newest, row.trained
    shown = liveness(row.status, row.heartbeat, row.started, row.host, row.pid)
    return (shown, iso(row.finished), stages, newest, trained)


def history(conn: Connection, pipeline: str, stage: str, limit: int = 30) -> list[dict[str, Any]]:
    """This stage's latest attempt in each of the pipeline's recent runs, newest first.

    Args:
        conn: a read connection.
        pipeline: the pipeline's name.
        stage: the stage's name.
        limit: at most this many runs.

    Returns:
        run_id, started, status, seconds, records_in, records_out, dead_lettered,
        cached_from and stage_run_id per run.
    """
    rows = conn.execute(_HISTORY, {"pipeline": pipeline, "stage": stage,
                                   "rows": limit * 4}).all()  # a few attempts per run at most
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.run_id not in seen and len(seen) < limit:
            seen[r.run_id] = {
                "run_id": r.run_id, "started": iso(r.run_started), "status": r.status,
                "seconds": r.seconds, "records_in": r.records_in,
                "records_out": r.records_out, "dead_lettered": r.dead_lettered,
                "cached_from": r.cached_from, "stage_run_id": r.id, "metrics": {}}
    found = list(seen.values())
    metrics = _final_metrics(conn, [h["stage_run_id"] for h in found])
    for h in found:
        h["metrics"] = metrics.get(h["stage_run_id"], {})
    return found


def _final_metrics(conn: Connection, ids: list[int]) -> dict[int, dict[str, float]]:
    """Each stage run's headline numbers: evaluate's overall metrics, train's last epoch."""
    found: dict[int, dict[str, float]] = defaultdict(dict)
    for r in conn.execute(_OVERALL_METRICS, {"ids": ids}):
        found[r.stage_run_id][r.metric] = r.value
    for r in conn.execute(_EPOCHS, {"ids": ids}):
        found[r.stage_run_id] = dict(r.metrics)  # the last epoch's metrics win
    return found


def _lookups() -> tuple[Any, ...]:
    """The statements the pages run on every change of a watched run, built once (building
    one costs more than SQLite takes to answer it)."""
    this = select(runs.c.pipeline, runs.c.started).where(
        runs.c.run_id == bindparam("run_id")).subquery()
    previous = (select(runs.c.run_id).join(this, runs.c.pipeline == this.c.pipeline)
                .where((runs.c.started < this.c.started)
                       | ((runs.c.started == this.c.started)
                          & (runs.c.run_id < bindparam("run_id"))))
                .order_by(runs.c.started.desc(), runs.c.run_id.desc()).limit(1))
    history = (select(stage_runs, runs.c.started.label("run_started"))
               .join(runs, runs.c.run_id == stage_runs.c.run_id)
               .where(runs.c.pipeline == bindparam("pipeline"),
                      stage_runs.c.stage == bindparam("stage"))
               .order_by(runs.c.started.desc(), stage_runs.c.attempt.desc())
               .limit(bindparam("rows")))
    ids: BindParameter[list[int]] = bindparam("ids", expanding=True)
    overall = select(eval_metrics).where(eval_metrics.c.stage_run_id.in_(ids),
                                         eval_metrics.c.slice_column.is_(None))
    trained = select(epochs).where(epochs.c.stage_run_id.in_(ids)).order_by(epochs.c.epoch)
    return previous, history, overall, trained


_PREVIOUS, _HISTORY, _OVERALL_METRICS, _EPOCHS = _lookups()
