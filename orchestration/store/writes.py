"""Every write of a run's record: the run row, its stage runs, artifacts, samples, events,
epochs and evaluation. The run path writes through these (the recorder, from the run's events)."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.exc import IntegrityError

import seqline
from seqline.orchestration.store.documents import ran_seconds
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.errors import RunIdTaken, RunNotFound
from seqline.orchestration.store.liveness import HOST, STALE_AFTER_S, reap
from seqline.orchestration.store.rows import now, pipeline_id, upsert_artifact
from seqline.orchestration.store.statuses import ENDED, RunStatus, StageStatus
from seqline.orchestration.store.tables import (
    ARTIFACT_ROLES,
    COUNTS,
    RUN_STATUSES,
    STAGE_STATUSES,
    TRIGGERS,
    epochs,
    eval_metrics,
    events,
    runs,
    samples,
    stage_runs,
)
from seqline.pipeline.errors import ConfigError, InternalError

__all__ = ["RunWriter"]


def _expect(value: str | None, allowed: tuple[str, ...], what: str) -> None:
    if value is not None and value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}: expected one of {', '.join(allowed)}.")


class RunWriter:
    """Runs and what they did, written as they go (each write one short transaction)."""

    def __init__(self, engine: Engine) -> None:
        """Args:
            engine: the store's engine, migrated (`store.engine.make_engine`).
        """
        self.engine = engine
        self.url = engine.url.render_as_string(hide_password=True)  # safe to print

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, run_id: str, pipeline: str, *, pipeline_file: str | None,
                   fingerprint: str | None, runner: str, options: dict[str, Any],
                   trigger: str = "manual", status: str = "running") -> None:
        """Record a new run, started now, by this process on this host.

        Args:
            run_id: the run's id; the INSERT itself refuses a taken one (no check first, so
                two processes racing for one id cannot both win).
            pipeline: the pipeline's name.
            pipeline_file: its file, if any.
            fingerprint: a digest of that file, if known.
            runner: local, beam or ray.
            options: the runner's options (workers, window, queue, …), as JSON.
            trigger: manual, schedule, backfill or resume.
            status: queued or running.

        Raises:
            RunIdTaken: the id is already in the store.
            ConfigError: an unknown status or trigger.
        """
        _expect(status, RUN_STATUSES, "run status")
        _expect(trigger, TRIGGERS, "trigger")
        started = now()
        try:
            with writing(self.engine) as conn:
                conn.execute(insert(runs).values(
                    run_id=run_id, pipeline=pipeline,
                    pipeline_id=pipeline_id(conn, pipeline, pipeline_file, fingerprint),
                    status=status, runner=runner, options=options, trigger=trigger,
                    started=started, heartbeat=started, host=HOST, pid=os.getpid(),
                    seqline_version=seqline.__version__))
        except IntegrityError as exc:
            if self._known(run_id):  # the unique key, not another constraint, refused it
                raise RunIdTaken(
                    f"run id {run_id!r} is already used in the run store. Choose another "
                    "--run-id (run_id= in Python), or none for a fresh one, or add --resume "
                    "(resume=True) to finish it."
                ) from exc
            raise

    def resume_run(self, run_id: str, runner: str | None = None,
                   options: dict[str, Any] | None = None) -> None:
        """Mark a run running again, driven by this process (trigger becomes `resume`).

        Args:
            run_id: the run to resume.
            runner, options: how this attempt runs, if given: the run's record then says how
                its latest attempt ran (its rerun command repeats that), not its first.

        Raises:
            RunNotFound: the store has no such run.
        """
        beat = now()
        with writing(self.engine) as conn:
            before = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
            if before is None:
                raise RunNotFound(run_id, f"to resume in the run store at {self.url}")
            # the attempts so far ran this long; the pause until now is no run's time
            ran = ran_seconds(before)
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(
                status=RunStatus.running, trigger="resume", finished=None, heartbeat=beat,
                host=HOST, pid=os.getpid(), error_stage=None, error_seq=None,
                error_message=None, error_traceback=None, resumed=beat, earlier_seconds=ran,
                **({"runner": runner} if runner else {}),
                **({"options": options} if options is not None else {})))

    def heartbeat(self, run_id: str) -> None:
        """Say the run's driver is alive (call it every few seconds, well under 30 s).

        Args:
            run_id: the run.
        """
        with writing(self.engine) as conn:
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(heartbeat=now()))

    def finish_run(self, run_id: str, status: str, *, error_stage: str | None = None,
                   error_seq: int | None = None, error_message: str | None = None,
                   error_traceback: str | None = None) -> None:
        """Record how a run ended.

        Args:
            run_id: the run.
            status: succeeded, failed, interrupted or cancelled.
            error_stage: the stage that failed, if any.
            error_seq: the seq of the record it failed on, if known.
            error_message: the error, one line.
            error_traceback: where it happened (the worker's or the driver's traceback).

        Raises:
            ConfigError: an unknown status.
            InternalError: no such run.
        """
        _expect(status, ENDED, "final run status")
        ended = now()
        with writing(self.engine) as conn:
            done = conn.execute(update(runs).where(runs.c.run_id == run_id).values(
                status=status, finished=ended, heartbeat=ended, error_stage=error_stage,
                error_seq=error_seq, error_message=error_message,
                error_traceback=error_traceback))
        if done.rowcount == 0:
            raise InternalError(f"finish_run: no run {run_id!r} in the store; create it first")

    def reap_interrupted(self, stale_after_s: float = STALE_AFTER_S) -> list[str]:
        """Mark `interrupted` the running runs whose driver is gone (liveness.driver_gone).

        Their unfinished stage runs become failed.

        Args:
            stale_after_s: how old a heartbeat may be.

        Returns:
            The ids of the runs marked interrupted.
        """
        return reap(self.engine, stale_after_s)

    def _known(self, run_id: str) -> bool:
        with self.engine.connect() as conn:
            found = conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id))
            return found.first() is not None

    # -- stages -----------------------------------------------------------------------------

    def start_stage(self, run_id: str, stage: str, component: str, *, params: dict[str, Any],
                    cache_key: str | None, attempt: int = 1, status: str = "running",
                    reason: str | None = None, key_parts: dict[str, Any] | None = None) -> int:
        """Record a stage run that starts now (or, `pending`, that will: see `begin_stage`).

        Args:
            run_id: its run.
            stage: the stage's name in the pipeline.
            component: its component (ingest, preprocess, …).
            params: its parameters, as JSON.
            cache_key: its cache key, if it has one.
            attempt: 1, then 2, … for retries.
            status: running, or pending for a stage that waits for its turn.
            reason: why it runs (the plan's reason), one line.
            key_parts: what its cache key was made of, for the next plan's reasons.

        Returns:
            The stage run's id, for the calls below.

        Raises:
            InternalError: no such run, or this attempt of this stage is already recorded.
        """
        _expect(status, (StageStatus.running, StageStatus.pending), "starting stage status")
        try:
            with writing(self.engine) as conn:
                result = conn.execute(insert(stage_runs).values(
                    run_id=run_id, stage=stage, component=component, status=status,
                    attempt=attempt, started=now() if status == StageStatus.running else None,
                    params=params, cache_key=cache_key, reason=reason, key_parts=key_parts))
        except IntegrityError as exc:
            raise InternalError(f"start_stage: run {run_id!r} is not in the store, or its "
                                f"stage {stage!r} attempt {attempt} already is") from exc
        key = result.inserted_primary_key
        if key is None:  # only for an insert that made no row, which the IntegrityError covers
            raise InternalError(f"start_stage: no stage run made for {run_id!r}/{stage!r}")
        return int(key[0])

    def begin_stage(self, stage_run_id: int) -> None:
        """A pending stage run starts now."""
        with writing(self.engine) as conn:
            conn.execute(update(stage_runs).where(stage_runs.c.id == stage_run_id)
                         .values(status=StageStatus.running, started=now()))

    def finish_stage(self, stage_run_id: int, status: str, *, counts: dict[str, int],
                     seconds: float | None, waited_input: float | None,
                     waited_output: float | None, max_in_flight: int | None,
                     cached_from: str | None = None,
                     error: str | None = None, block_retries: int | None = None,
                     reason: str | None = None) -> None:
        """Record how a stage run ended.

        Args:
            stage_run_id: from `start_stage`.
            status: succeeded, failed, cancelled (stopped at work, before its commit),
                cached or skipped (it did nothing).
            counts: records_in, records_out, filtered, exploded, dead_lettered (any missing
                stay NULL).
            seconds: the stage's wall time (None: it did nothing, nor did its waits).
            waited_input: seconds it waited for input (backpressure upstream).
            waited_output: seconds it waited for room downstream.
            max_in_flight: the most blocks it had in flight.
            cached_from: for a cache hit, the run whose artifact it reused.
            error: why it failed, one line.
            block_retries: blocks run again because their worker died.
            reason: replaces the planned reason when set (a cancelled or skipped stage: what
                stopped it).

        Raises:
            ConfigError: an unknown status or count name.
            InternalError: no such stage run.
        """
        _expect(status, STAGE_STATUSES, "stage status")
        unknown = sorted(set(counts) - set(COUNTS))
        if unknown:
            raise ConfigError(f"unknown counts {unknown}: expected some of {', '.join(COUNTS)}.")
        values = {"reason": reason} if reason is not None else {}
        with writing(self.engine) as conn:
            done = conn.execute(update(stage_runs).where(stage_runs.c.id == stage_run_id).values(
                status=status, finished=now(), seconds=seconds, waited_input=waited_input,
                waited_output=waited_output, max_in_flight=max_in_flight,
                cached_from=cached_from, error=error, block_retries=block_retries,
                **counts, **values))
        if done.rowcount == 0:
            raise InternalError(f"finish_stage: no stage run {stage_run_id} in the store")

    def note_stage(self, run_id: str, stage: str, reason: str) -> None:
        """Say why a stage's latest attempt stands in this run (kept by a resumed run).

        Args:
            run_id: the run.
            stage: the stage's name.
            reason: one line, e.g. "kept: the earlier attempt committed it".
        """
        latest = select(func.max(stage_runs.c.id)).where(
            stage_runs.c.run_id == run_id, stage_runs.c.stage == stage).scalar_subquery()
        with writing(self.engine) as conn:
            conn.execute(update(stage_runs).where(stage_runs.c.id == latest)
                         .values(reason=reason))

    def record_artifact(self, stage_run_id: int, role: str, uri: str, kind: str,
                        records: int | None, bytes: int | None, checksum: str | None) -> None:
        """Record that a stage run read (`input`) or wrote (`output`) an artifact.

        Args:
            stage_run_id: from `start_stage`.
            role: input or output.
            uri: where the artifact is (a folder path or an fsspec URL).
            kind: its kind (tfrecord, model, evaluation, …).
            records: its record count, if it has records.
            bytes: its size.
            checksum: a digest of its content, if known.

        Raises:
            ConfigError: an unknown role.
        """
        _expect(role, ARTIFACT_ROLES, "artifact role")
        row = {"uri": uri, "kind": kind, "records": records, "bytes": bytes,
               "checksum": checksum}
        with writing(self.engine) as conn:
            upsert_artifact(conn, stage_run_id, role, row)

    # -- metrics over time ------------------------------------------------------------------

    def add_samples(self, batch: list[dict[str, Any]]) -> None:
        """Append a batch of per-second samples in one transaction (one executemany).

        Args:
            batch: dicts of the SAMPLE_COLUMNS (statements.py; the head of line's are None
                where unknown), with stage_run_id.
        """
        if batch:
            with writing(self.engine) as conn:
                conn.execute(insert(samples), batch)

    def add_events(self, batch: list[dict[str, Any]]) -> None:
        """Append a batch of a run's events in one transaction (one executemany).

        Args:
            batch: dicts of run_id, t (Unix seconds), stage (or None), kind, body (JSON).
        """
        if batch:
            with writing(self.engine) as conn:
                conn.execute(insert(events), batch)

    def add_epochs(self, stage_run_id: int, rows: list[dict[str, Any]]) -> None:
        """Record training epochs (train's manifest entries can be passed as they are).

        Args:
            stage_run_id: the train stage run.
            rows: dicts with epoch, metrics, and optionally input_wait_seconds and seconds.
        """
        if rows:
            with writing(self.engine) as conn:
                conn.execute(insert(epochs), [{
                    "stage_run_id": stage_run_id, "epoch": r["epoch"], "metrics": r["metrics"],
                    "input_wait_seconds": r.get("input_wait_seconds"),
                    "seconds": r.get("seconds")} for r in rows])

    def add_eval_metrics(self, stage_run_id: int, metrics: dict[str, float],
                         slices: dict[str, dict[str, dict[str, float]]], *,
                         blessed: bool | None = None) -> None:
        """Record evaluation metrics, overall and per slice, and the blessing.

        Args:
            stage_run_id: the evaluate stage run.
            metrics: {metric: value} over all the evaluation data.
            slices: {column: {value: {metric: value}}}, as evaluate's manifest has them.
            blessed: whether the model was blessed (None: not decided).
        """
        rows = [{"stage_run_id": stage_run_id, "slice_column": None, "slice_value": None,
                 "metric": m, "value": v} for m, v in metrics.items()]
        rows += [{"stage_run_id": stage_run_id, "slice_column": column,
                  "slice_value": str(value), "metric": m, "value": v}
                 for column, values in slices.items()
                 for value, by_metric in values.items() for m, v in by_metric.items()]
        with writing(self.engine) as conn:
            if rows:
                conn.execute(insert(eval_metrics), rows)
            if blessed is not None:
                conn.execute(update(stage_runs).where(stage_runs.c.id == stage_run_id)
                             .values(blessed=blessed))
