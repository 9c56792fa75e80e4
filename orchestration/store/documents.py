"""Rows to the documents of `seqline runs list --json` / `runs show --json` (the JSON contract
that the dashboard's /api and pages share)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Connection, Row, func, select

from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.statuses import COMMITTED, RAN, RunStatus, attempts
from seqline.orchestration.store.tables import (
    COUNTS,
    artifacts,
    epochs,
    eval_metrics,
    events,
    lineage,
    pipelines,
    runs,
    samples,
    stage_runs,
)

__all__ = ["cached_stage", "key_parts_of", "last_stage_run", "ran_seconds", "run_detail",
           "run_events", "run_summary"]


def run_summary(row: Row[Any]) -> dict[str, Any]:
    """One `runs list` entry.

    Args:
        row: a row of `runs`.

    Returns:
        run_id, pipeline, status, runner, trigger, started, finished, seconds (see
        ran_seconds), resumed (when it was last resumed, or None), host, error.
    """
    ended = row.finished
    return {
        "run_id": row.run_id,
        "pipeline": row.pipeline,
        "status": row.status,
        "runner": row.runner,
        "trigger": row.trigger,
        "started": iso(row.started),
        "finished": iso(ended),
        "seconds": round(ran_seconds(row), 3) if ended else None,
        "resumed": iso(row.resumed),
        "host": row.host,
        "error": row.error_message,
    }


def ran_seconds(row: Row[Any]) -> float:
    """The seconds an ended run ran: its attempts', without the pauses between them (a run
    failed on a typo and resumed an hour later ran for seconds, not an hour). An attempt
    whose driver died ran until its last heartbeat, not until the reaper noticed."""
    start = row.resumed or row.started
    end = row.finished if row.status != RunStatus.interrupted else None
    end = end or row.heartbeat or start  # (still running: until its newest heartbeat)
    return (row.earlier_seconds or 0.0) + max((end - start).total_seconds(), 0.0)


def run_detail(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """The `runs show` object: the run, then its stages in the order they started.

    Args:
        conn: a read connection.
        run_id: the run.

    Returns:
        The object, or None when the store has no such run.
    """
    row = conn.execute(
        select(runs, pipelines.c.file, pipelines.c.fingerprint)
        .join(pipelines, pipelines.c.id == runs.c.pipeline_id)
        .where(runs.c.run_id == run_id)).first()
    if row is None:
        return None
    error = None
    if row.error_message or row.error_stage:
        error = {"stage": row.error_stage, "seq": row.error_seq, "message": row.error_message,
                 "traceback": row.error_traceback}
    return {
        **run_summary(row),
        "pipeline_file": row.file or None,
        "fingerprint": row.fingerprint or None,
        "options": row.options,
        "heartbeat": iso(row.heartbeat),
        "pid": row.pid,
        "seqline_version": row.seqline_version,
        "error": error,
        "stages": _stages(conn, run_id),
    }


def _stages(conn: Connection, run_id: str) -> list[dict[str, Any]]:
    """One entry per stage (its latest attempt), earlier attempts under `history`."""
    rows = conn.execute(select(stage_runs).where(stage_runs.c.run_id == run_id)
                        .order_by(stage_runs.c.id)).all()
    ids = [r.id for r in rows]
    details = _Details(conn, ids)
    attempts: dict[str, list[Row[Any]]] = defaultdict(list)
    for r in rows:  # dicts keep insertion order: stages in the order they first started
        attempts[r.stage].append(r)
    return [_stage(sorted(tried, key=lambda r: r.attempt), details)
            for tried in attempts.values()]


def _stage(tried: list[Row[Any]], details: _Details) -> dict[str, Any]:
    last = tried[-1]
    return {
        "name": last.stage,
        "component": last.component,
        "status": last.status,
        "attempts": attempts([r.status for r in tried]),
        "stage_run_id": last.id,
        "started": iso(last.started),
        "finished": iso(last.finished),
        **{name: last._mapping[name] for name in COUNTS},
        "seconds": last.seconds,
        "waited_input": last.waited_input,
        "waited_output": last.waited_output,
        "max_in_flight": last.max_in_flight,
        "block_retries": last.block_retries,
        "cache_key": last.cache_key,
        "cached_from": last.cached_from,
        "params": last.params,
        "reason": last.reason,
        # the stage it reads (the plan's source, kept in its cache key's parts): the edges
        # of the run page's graph; None for a stage that reads files
        "source": ((last.key_parts or {}).get("reads") or {}).get("stage"),
        "error": last.error,
        "artifacts": details.artifacts.get(last.id, []),
        "epochs": details.epochs.get(last.id, []),
        "evaluation": details.evaluation(last),
        "samples": details.samples.get(last.id, 0),
        "history": [_attempt(r, [t.status for t in tried[:i + 1]])
                    for i, r in enumerate(tried[:-1])],
    }


def _attempt(r: Row[Any], statuses: list[str]) -> dict[str, Any]:
    """An earlier row of a stage; `attempt`: which attempt at the stage it was, None for a
    row of a run's attempt that never ran it (skipped)."""
    return {"attempt": attempts(statuses) if r.status in RAN else None, "status": r.status,
            "started": iso(r.started),
            "finished": iso(r.finished), "seconds": r.seconds, "error": r.error}


class _Details:
    """Artifacts, epochs, evaluation and sample counts of some stage runs: 4 queries in all."""

    def __init__(self, conn: Connection, ids: list[int]) -> None:
        self.artifacts: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.epochs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.metrics: dict[int, list[Row[Any]]] = defaultdict(list)
        linked = select(lineage.c.stage_run_id, lineage.c.role, artifacts).join(
            artifacts, artifacts.c.id == lineage.c.artifact_id)
        for r in conn.execute(linked.where(lineage.c.stage_run_id.in_(ids))
                              .order_by(lineage.c.role, artifacts.c.uri)):
            self.artifacts[r.stage_run_id].append({
                "role": r.role, "uri": r.uri, "kind": r.kind, "records": r.records,
                "bytes": r.bytes, "checksum": r.checksum})
        for r in conn.execute(select(epochs).where(epochs.c.stage_run_id.in_(ids))
                              .order_by(epochs.c.epoch)):
            self.epochs[r.stage_run_id].append({
                "epoch": r.epoch, "metrics": r.metrics, "seconds": r.seconds,
                "input_wait_seconds": r.input_wait_seconds})
        for r in conn.execute(select(eval_metrics).where(eval_metrics.c.stage_run_id.in_(ids))
                              .order_by(eval_metrics.c.id)):
            self.metrics[r.stage_run_id].append(r)
        counted = select(samples.c.stage_run_id, func.count()).where(
            samples.c.stage_run_id.in_(ids)).group_by(samples.c.stage_run_id)
        self.samples: dict[int, int] = {r[0]: r[1] for r in conn.execute(counted)}

    def evaluation(self, stage: Row[Any]) -> dict[str, Any] | None:
        """Overall metrics, per-slice metrics and the blessing; None if nothing was recorded."""
        rows = self.metrics.get(stage.id, [])
        if not rows and stage.blessed is None:
            return None
        overall: dict[str, float] = {}
        slices: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        for r in rows:
            if r.slice_column is None:
                overall[r.metric] = r.value
            else:
                slices[r.slice_column][r.slice_value][r.metric] = r.value
        nested = {column: dict(values) for column, values in slices.items()}
        return {"metrics": overall, "slices": nested, "blessed": stage.blessed}


def cached_stage(conn: Connection, cache_key: str) -> dict[str, Any] | None:
    """The newest committed stage run with `cache_key`; see RunReader.find_cached.

    Args:
        conn: a read connection.
        cache_key: the key.

    Returns:
        stage_run_id, run_id, stage, component, status, cached_from and its output
        artifacts; None on a miss.
    """
    row = conn.execute(select(stage_runs).where(
        stage_runs.c.cache_key == cache_key, stage_runs.c.status.in_(COMMITTED))
        .order_by(stage_runs.c.finished.desc(), stage_runs.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    outputs = [a for a in _Details(conn, [row.id]).artifacts.get(row.id, [])
               if a["role"] == "output"]
    return {"stage_run_id": row.id, "run_id": row.run_id, "stage": row.stage,
            "component": row.component, "status": row.status,
            "cached_from": row.cached_from, "seconds": row.seconds, "artifacts": outputs}


def last_stage_run(conn: Connection, pipeline: str, stage: str) -> dict[str, Any] | None:
    """The newest committed run of a pipeline's stage; see RunReader.last_stage_run."""
    row = conn.execute(
        select(stage_runs.c.id, stage_runs.c.run_id, stage_runs.c.cache_key,
               stage_runs.c.key_parts, stage_runs.c.params, stage_runs.c.seconds)
        .join(runs, runs.c.run_id == stage_runs.c.run_id)
        .where(runs.c.pipeline == pipeline, stage_runs.c.stage == stage,
               stage_runs.c.status.in_(COMMITTED))
        .order_by(stage_runs.c.finished.desc(), stage_runs.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    return {"run_id": row.run_id, "stage_run_id": row.id, "cache_key": row.cache_key,
            "key_parts": row.key_parts, "params": row.params, "seconds": row.seconds}


def run_events(conn: Connection, run_id: str) -> list[dict[str, Any]]:
    """A run's events in publishing order; see RunReader.events_of."""
    rows = conn.execute(select(events).where(events.c.run_id == run_id).order_by(events.c.id))
    # (Row.t is SQLAlchemy's tuple view of the row, not the column: read it by name)
    return [{"t": r._mapping["t"], "stage": r.stage, "kind": r.kind, **r.body} for r in rows]


def key_parts_of(conn: Connection, run_id: str) -> dict[str, dict[str, Any]]:
    """Each stage's cache key parts in a run (its latest attempt's), by stage; see
    RunReader.key_parts."""
    rows = conn.execute(select(stage_runs.c.stage, stage_runs.c.key_parts)
                        .where(stage_runs.c.run_id == run_id).order_by(stage_runs.c.attempt))
    return {r.stage: r.key_parts or {} for r in rows}
