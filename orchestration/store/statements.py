"""The reads a live dashboard makes every second or every change, as statements built once:
building one costs more than SQLite takes to answer it. Values are passed as bound parameters."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, bindparam, func, select

from seqline.orchestration.store.tables import epochs, eval_metrics, runs, samples, stage_runs

__all__ = ["EPOCHS", "EXISTS", "HISTORY", "OVERALL_METRICS", "PREVIOUS", "SAMPLES",
           "SAMPLES_AFTER", "SAMPLE_COLUMNS", "STAGE_STATUSES", "STAMP"]

# A sample's columns, in the order sample rows are read (the charts' columns).
SAMPLE_COLUMNS = ("t", "records_done", "rows_per_s", "waited_input", "waited_output",
                  "in_flight", "reorder_held", "watermark", "seq_done", "held_records",
                  "held_bytes", "blocker_block", "blocker_seq", "blocker_attempt",
                  "blocker_worker", "blocker_seconds")


def _stamp() -> tuple[Any, Any]:
    """What changes whenever a run's page would: its row, newest sample, epochs; its stages."""
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


def _lookups() -> tuple[Any, ...]:
    """The run before a run, a stage's history, and the headline numbers of stage runs."""
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


STAMP, STAGE_STATUSES = _stamp()
PREVIOUS, HISTORY, OVERALL_METRICS, EPOCHS = _lookups()
EXISTS = select(runs.c.run_id).where(runs.c.run_id == bindparam("run_id"))
SAMPLES = select(*(samples.c[c] for c in SAMPLE_COLUMNS)).where(
    samples.c.stage_run_id == bindparam("id")).order_by(samples.c.t)
SAMPLES_AFTER = SAMPLES.where(samples.c.t > bindparam("after"))
