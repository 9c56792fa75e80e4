"""The reads a live dashboard makes every second or every change, as statements built once:
building one costs more than SQLite takes to answer it. Values are passed as bound parameters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, Select, bindparam, exists, func, select, tuple_

from seqline.orchestration.store.statuses import RunStatus
from seqline.orchestration.store.tables import (
    epochs,
    eval_metrics,
    pipelines,
    runs,
    samples,
    stage_runs,
)

__all__ = ["CURSOR", "EPOCHS", "EXISTS", "HISTORY", "LAST_SUCCEEDED", "LISTED",
           "OVERALL_METRICS", "PIPELINE_NAMES", "PREVIOUS", "SAMPLES", "SAMPLES_AFTER",
           "SAMPLE_COLUMNS", "STAGE_STATUSES", "STAMP", "before_in_pipeline", "runs_beyond"]

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


# A run's columns that the runs list shows or derives its status from (documents.run_summary,
# liveness.shown_status): not `options` (JSON to decode) nor the traceback (kilobytes of text),
# which a list of runs never shows. A page of 50 reads 4x fewer bytes a row.
LISTED = (runs.c.run_id, runs.c.pipeline, runs.c.status, runs.c.runner, runs.c.trigger,
          runs.c.started, runs.c.finished, runs.c.heartbeat, runs.c.host, runs.c.pid,
          runs.c.error_message, runs.c.resumed, runs.c.earlier_seconds)


def before_in_pipeline(run_id: BindParameter[str]) -> Select[Any]:
    """The runs of `run_id`'s pipeline listed after it (started before it; ties by id), in
    the runs list's order. One comparison of (started, run_id) pairs, not `started < s OR
    (started = s AND run_id < id)`: the OR kept SQLite from seeking in the index, so the run
    before an old run was found by walking every newer run of its pipeline."""
    this = select(runs.c.pipeline, runs.c.started).where(runs.c.run_id == run_id).subquery()
    return (select(runs.c.run_id).join(this, runs.c.pipeline == this.c.pipeline)
            .where(tuple_(runs.c.started, runs.c.run_id) < tuple_(this.c.started, run_id))
            .order_by(runs.c.started.desc(), runs.c.run_id.desc()))


def runs_beyond(*, pipeline: str | None, statuses: tuple[str, ...] | None,
                trigger: str | None, cursor: tuple[datetime, str] | None, older: bool,
                rows: int) -> Select[Any]:
    """A page of the runs list (newest first, ties by id), by keyset: the runs listed after
    `cursor` (`older`), or before it, nearest first (then oldest first: reverse them).

    Args:
        pipeline: only this pipeline's runs.
        statuses: only runs stored in one of these.
        trigger: only runs started so.
        cursor: (started, run_id) of the run the page starts beyond; None: from the newest.
        older: toward older runs (the next page) or newer ones (the previous page).
        rows: at most this many.

    Example: cursor (10:00, "b"), older -> runs started before 10:00, or at 10:00 with an id
    below "b", newest first. SQLite and PostgreSQL seek to the cursor in revision 2's indexes
    (started; pipeline or status, then started) and read the page in their order, so a page
    costs the same at any depth: no OFFSET walks the rows before it (a trigger, unindexed,
    reads the started index until the page is full).
    """
    key = tuple_(runs.c.started, runs.c.run_id)
    query = select(*LISTED)
    if cursor is not None:
        query = query.where(key < tuple_(*cursor) if older else key > tuple_(*cursor))
    if pipeline is not None:
        query = query.where(runs.c.pipeline == pipeline)
    if statuses is not None:
        query = query.where(runs.c.status.in_(statuses))
    if trigger is not None:
        query = query.where(runs.c.trigger == trigger)
    order = (runs.c.started.desc(), runs.c.run_id.desc()) if older \
        else (runs.c.started.asc(), runs.c.run_id.asc())
    return query.order_by(*order).limit(rows)


def _lookups() -> tuple[Any, ...]:
    """The run before a run, a stage's history, and the headline numbers of stage runs."""
    previous = before_in_pipeline(bindparam("run_id")).limit(1)
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
# What a stage's data profile is compared with: the newest succeeded run before this one.
LAST_SUCCEEDED = before_in_pipeline(bindparam("run_id")).where(
    runs.c.status == RunStatus.succeeded).limit(1)
# Where a page of the runs list starts: the (started, run_id) of the run named in its address.
CURSOR = select(runs.c.started, runs.c.run_id).where(runs.c.run_id == bindparam("run_id"))
# Pipeline names that have a run, from the pipelines table (a row per name, file and
# fingerprint: a few dozen) rather than a DISTINCT over every run; EXISTS keeps a name whose
# runs are all gone out, one index seek per name.
PIPELINE_NAMES = (select(pipelines.c.name).distinct()
                  .where(exists().where(runs.c.pipeline == pipelines.c.name))
                  .order_by(pipelines.c.name))
SAMPLES = select(*(samples.c[c] for c in SAMPLE_COLUMNS)).where(
    samples.c.stage_run_id == bindparam("id")).order_by(samples.c.t)
SAMPLES_AFTER = SAMPLES.where(samples.c.t > bindparam("after"))
