"""The store's totals for Prometheus: runs by status, stage runs' counts and waits, the newest
sample of each running stage, and each pipeline's newest model results. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select

from seqline.orchestration.store.liveness import shown_status
from seqline.orchestration.store.statuses import RAN, StageStatus
from seqline.orchestration.store.tables import (
    COUNTS,
    epochs,
    eval_metrics,
    runs,
    samples,
    stage_runs,
)

__all__ = ["Totals", "read_totals"]


@dataclass(frozen=True)
class Totals:
    """What one scrape reads, as plain rows (every value a column of the store's rows).

    Attributes:
        runs: each run's pipeline, status as shown (liveness.shown_status) and finished time.
        stages: each worked stage run's pipeline, stage, status, COUNTS, seconds, waits, id.
        newest: the newest sample of each running stage run, by its id.
        models: each pipeline's newest succeeded stage run of a model component (pipeline,
            stage, component, blessed, id).
        model_metrics: the overall evaluation metrics of those (stage_run_id, metric, value).
        model_epochs: the last training epoch of those (stage_run_id, epoch, metrics).
    """

    runs: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    newest: dict[int, dict[str, Any]]
    models: list[dict[str, Any]]
    model_metrics: list[dict[str, Any]]
    model_epochs: list[dict[str, Any]]


def read_totals(conn: Connection, model_components: tuple[str, ...]) -> Totals:
    """The totals of the whole store, on one read connection.

    Args:
        conn: a read connection.
        model_components: the components whose stage runs hold a model's quality.
    """
    run_rows = [{"pipeline": r.pipeline, "finished": r.finished,
                 "status": shown_status(r.status, r.heartbeat, r.started, r.host, r.pid)}
                for r in conn.execute(select(runs.c.pipeline, runs.c.status, runs.c.heartbeat,
                                             runs.c.started, runs.c.finished, runs.c.host,
                                             runs.c.pid))]
    stages = [dict(r._mapping) for r in conn.execute(
        select(runs.c.pipeline, stage_runs.c.stage, stage_runs.c.status,
               *(stage_runs.c[c] for c in COUNTS), stage_runs.c.seconds,
               stage_runs.c.waited_input, stage_runs.c.waited_output, stage_runs.c.id)
        .join(runs, runs.c.run_id == stage_runs.c.run_id)
        .where(stage_runs.c.status.in_(RAN)))]  # cached and skipped ones processed nothing
    running = [s["id"] for s in stages if s["status"] == StageStatus.running]
    return Totals(run_rows, stages, _newest_samples(conn, running),
                  *_models(conn, model_components))


def _newest_samples(conn: Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    """The last sample of each running stage run (uses the (stage_run_id, t) index)."""
    if not ids:
        return {}
    last = select(samples.c.stage_run_id, func.max(samples.c.t).label("t")).where(
        samples.c.stage_run_id.in_(ids)).group_by(samples.c.stage_run_id).subquery()
    rows = conn.execute(select(samples).join(last, (samples.c.stage_run_id == last.c.stage_run_id)
                                             & (samples.c.t == last.c.t)))
    return {r.stage_run_id: dict(r._mapping) for r in rows}


def _models(conn: Connection, components: tuple[str, ...]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Each pipeline's newest succeeded stage run of a model component; the overall metrics
    of those evaluated; the last epoch of those trained."""
    newest = select(runs.c.pipeline, stage_runs.c.stage, func.max(stage_runs.c.id).label("id")) \
        .join(runs, runs.c.run_id == stage_runs.c.run_id) \
        .where(stage_runs.c.status == StageStatus.succeeded,
               stage_runs.c.component.in_(components)) \
        .group_by(runs.c.pipeline, stage_runs.c.stage).subquery()
    picked = [dict(r._mapping) for r in conn.execute(
        select(newest, stage_runs.c.component, stage_runs.c.blessed)
        .join(stage_runs, stage_runs.c.id == newest.c.id))]
    ids = [p["id"] for p in picked]
    metrics = [dict(m._mapping) for m in conn.execute(select(eval_metrics).where(
        eval_metrics.c.stage_run_id.in_(ids), eval_metrics.c.slice_column.is_(None)))]
    last = select(epochs.c.stage_run_id, func.max(epochs.c.epoch).label("epoch")).where(
        epochs.c.stage_run_id.in_(ids)).group_by(epochs.c.stage_run_id).subquery()
    trained = [dict(e._mapping) for e in conn.execute(select(epochs).join(
        last, (epochs.c.stage_run_id == last.c.stage_run_id) & (epochs.c.epoch == last.c.epoch)))]
    return picked, metrics, trained
