"""Every read of the run store: what `seqline runs`, `run --json`, the planner's cache lookups
and every dashboard page show. Each method opens its own connection and only SELECTs."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Engine, Select, select

from seqline.orchestration.store.documents import (
    cached_stage,
    key_parts_of,
    last_stage_run,
    run_detail,
    run_events,
    run_summary,
)
from seqline.orchestration.store.engine import make_engine
from seqline.orchestration.store.errors import RunNotFound
from seqline.orchestration.store.keyset import runs_page
from seqline.orchestration.store.liveness import interrupted, interrupted_stage, shown_status
from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.statements import (
    EPOCHS,
    EXISTS,
    HISTORY,
    LAST_SUCCEEDED,
    OVERALL_METRICS,
    PIPELINE_NAMES,
    PREVIOUS,
    SAMPLES,
    SAMPLES_AFTER,
    STAGE_STATUSES,
    STAMP,
)
from seqline.orchestration.store.statuses import attempts
from seqline.orchestration.store.tables import RUN_STATUSES, runs, samples, stage_runs
from seqline.orchestration.store.totals import Totals, read_totals
from seqline.pipeline.errors import ConfigError

__all__ = ["RUNS_PAGE", "RunReader", "Totals"]

# Runs on a page of the runs list: a screenful or two, as Airflow's and Dagster's lists page.
RUNS_PAGE = 50


class RunReader:
    """The run store's reads: runs as `runs list/show --json` documents, and what pages show.

    Statuses come two ways: as stored (`list_runs`, `show_run`: `seqline runs` reaps dead
    drivers first), or as shown (`list_runs_shown`, `run_page`, `run_stamp`, totals): a run
    whose driver is gone shows as interrupted by the liveness rule, with nothing written.
    """

    def __init__(self, engine: Engine) -> None:
        """Args:
            engine: the store's engine, migrated.
        """
        self.engine = engine
        self.url = engine.url.render_as_string(hide_password=True)  # safe to print

    @classmethod
    def read_only(cls, url: str) -> RunReader:
        """A reader whose connections refuse writes at the database (the dashboard's).

        Args:
            url: the URL of a store already migrated (RunStore.open migrates).
        """
        return cls(make_engine(url, read_only=True))

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # -- runs, as `seqline runs` prints them ------------------------------------------------

    def list_runs(self, *, pipeline: str | None = None, status: str | None = None,
                  trigger: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The newest runs first, as stored, as `seqline runs list --json` prints them.

        Args:
            pipeline: only this pipeline's runs.
            status: only runs in this status.
            trigger: only runs started so (manual, schedule, backfill, resume).
            limit: at most this many.

        Returns:
            One dict per run (run_id, pipeline, status, runner, trigger, started, finished,
            seconds, host, error).

        Raises:
            ConfigError: an unknown status or a limit below 1.
        """
        if status is not None and status not in RUN_STATUSES:
            raise ConfigError(f"unknown run status {status!r}: expected one of "
                              f"{', '.join(RUN_STATUSES)}.")
        if limit < 1:
            raise ConfigError(f"--limit must be at least 1, not {limit}.")
        query = _newest_first(pipeline, None)
        if status is not None:
            query = query.where(runs.c.status == status)
        if trigger is not None:
            query = query.where(runs.c.trigger == trigger)
        with self.engine.connect() as conn:
            return [run_summary(row) for row in conn.execute(query.limit(limit))]

    def show_run(self, run_id: str) -> dict[str, Any]:
        """One run in full, as stored, as `seqline runs show --json` prints it.

        Returns:
            The run (error, host, options, …) with its stages (counts, waits, cache,
            artifacts and lineage, epochs, evaluation, earlier attempts).

        Raises:
            RunNotFound: the store has no such run.
        """
        with self.engine.connect() as conn:
            detail = run_detail(conn, run_id)
        if detail is None:
            raise RunNotFound(run_id, f"in the run store at {self.url}")
        return detail

    def events_of(self, run_id: str) -> list[dict[str, Any]]:
        """A run's events in the order they were published: one dict per event, its t,
        stage, kind and own fields."""
        with self.engine.connect() as conn:
            return run_events(conn, run_id)

    def samples_of(self, stage_run_id: int) -> list[dict[str, Any]]:
        """A stage run's samples in time order, each a dict of the columns of add_samples."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(samples).where(samples.c.stage_run_id == stage_run_id)
                                .order_by(samples.c.t))
            return [dict(r._mapping) for r in rows]

    # -- what a plan compares with -----------------------------------------------------------

    def find_cached(self, cache_key: str) -> dict[str, Any] | None:
        """The newest committed stage run with this cache key (the caller checks its
        artifact's bytes before reusing it): stage_run_id, run_id, stage, component, status,
        cached_from and its output artifacts; None on a miss."""
        with self.engine.connect() as conn:
            return cached_stage(conn, cache_key)

    def last_stage_run(self, pipeline: str, stage: str) -> dict[str, Any] | None:
        """The newest committed stage run of `pipeline`'s `stage`, with the parts of its cache
        key (what the next plan compares with to say why): run_id, stage_run_id, cache_key,
        key_parts, params, seconds; None if there is none."""
        with self.engine.connect() as conn:
            return last_stage_run(conn, pipeline, stage)

    def key_parts(self, run_id: str) -> dict[str, dict[str, Any]]:
        """What each stage's cache key was made of (code, params, reads, versions), by stage:
        what two runs' comparison tells apart as code. Empty for an unknown run."""
        with self.engine.connect() as conn:
            return key_parts_of(conn, run_id)

    # -- what pages show: statuses as shown -------------------------------------------------

    def list_runs_shown(self, *, pipeline: str | None = None, status: str | None = None,
                        trigger: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """As `list_runs`, each status as shown (a stale `running` run is `interrupted`, with
        the reaper's error), filtered by the status shown and by trigger: `runs_page`'s
        first page."""
        return self.runs_page(pipeline=pipeline, status=status, trigger=trigger,
                              limit=limit)["runs"]

    def runs_page(self, *, pipeline: str | None = None, status: str | None = None,
                  trigger: str | None = None, older: str | None = None,
                  newer: str | None = None, limit: int = RUNS_PAGE) -> dict[str, Any]:
        """A page of the runs list: newest first, statuses as shown, paged by a run id
        (keyset) rather than an offset, so a deep page costs what the first does and a run
        that starts meanwhile shifts no run onto the next page twice.

        Args:
            pipeline: only this pipeline's runs.
            status: only runs shown in this status.
            trigger: only runs started so.
            older: a run id: the runs listed after it (the next page).
            newer: a run id: the runs listed before it (the previous page); a run id the
                store no longer has, or too near the top to fill a page, gives the first.
            limit: runs on a page.

        Returns:
            {"runs": list_runs_shown's dicts, "older": the id to pass as `older` for the
            next page (None: this is the last), "newer": the id to pass as `newer` for the
            previous page (None: this is the first)}.

        Example: 120 runs, limit 50: the first page's "older" is its 50th run's id; that
        page's "newer" is its first run's id, its "older" the 100th run's.
        """
        with self.engine.connect() as conn:
            return runs_page(conn, {"pipeline": pipeline, "status": status,
                                    "trigger": trigger}, older=older, newer=newer, limit=limit)

    def run_page(self, run_id: str) -> dict[str, Any] | None:
        """`show_run`'s document as shown, plus exact times: each stage and the run gain
        `t0`/`t1` (Unix seconds, for the timeline). None when the store has no such run."""
        with self.engine.connect() as conn:
            detail = run_detail(conn, run_id)
            if detail is None:
                return None
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one()
            times = {r.id: r for r in conn.execute(select(
                stage_runs.c.id, stage_runs.c.started, stage_runs.c.finished)
                .where(stage_runs.c.run_id == run_id))}
        shown = shown_status(row.status, row.heartbeat, row.started, row.host, row.pid)
        detail["t0"] = (row.resumed or row.started).timestamp()  # the attempt shown
        detail["t1"] = row.finished.timestamp() if row.finished else None
        for stage in detail["stages"]:
            exact = times[stage["stage_run_id"]]
            stage["t0"] = exact.started.timestamp() if exact.started else None
            stage["t1"] = exact.finished.timestamp() if exact.finished else None
            ended = interrupted_stage(stage["status"]) if shown != row.status else None
            if ended is not None:  # as the reaper would mark it
                stage["status"], stage["reason"] = ended
        if shown != row.status:
            detail["status"] = shown
            detail["error"] = {"stage": None, "seq": None, "message": interrupted(run_id)}
        return detail

    def run_stamp(self, run_id: str) -> tuple[Any, ...] | None:
        """What changes whenever the run's page would (polled once a second per watched run):
        (status shown, finished, stage statuses, newest sample, epochs); None when the store
        has no such run. Not the heartbeat: no page shows it, and a beat alone would push an
        update that changes nothing (a stale one changes the status shown)."""
        with self.engine.connect() as conn:
            row = conn.execute(STAMP, {"run_id": run_id}).first()
            if row is None:
                return None
            stages = tuple(conn.execute(STAGE_STATUSES, {"run_id": run_id}).all())
        shown = shown_status(row.status, row.heartbeat, row.started, row.host, row.pid)
        return (shown, iso(row.finished), stages, row.newest, row.trained)

    def run_exists(self, run_id: str) -> bool | None:
        """True when the store has the run, else None (as the other lookups: None is a 404)."""
        with self.engine.connect() as conn:
            return conn.execute(EXISTS, {"run_id": run_id}).first() is not None or None

    def stage_of(self, run_id: str, stage: str) -> dict[str, Any] | None:
        """The latest attempt of `stage` in `run_id`: its stage_run_id, name and t0 (as
        run_page's); None when the store has no such stage."""
        with self.engine.connect() as conn:
            row = conn.execute(select(stage_runs.c.id, stage_runs.c.stage, stage_runs.c.started)
                               .where(stage_runs.c.run_id == run_id,
                                      stage_runs.c.stage == stage)
                               .order_by(stage_runs.c.attempt.desc()).limit(1)).first()
        if row is None:
            return None
        return {"stage_run_id": row.id, "name": row.stage,
                "t0": row.started.timestamp() if row.started else None}

    def previous_run(self, run_id: str) -> str | None:
        """The run of the same pipeline started just before `run_id` (None: it is the first)."""
        with self.engine.connect() as conn:
            found: str | None = conn.execute(PREVIOUS, {"run_id": run_id}).scalar()
        return found

    def last_succeeded_before(self, run_id: str) -> str | None:
        """The newest succeeded run of the same pipeline started before `run_id` (what a
        stage's data profile is compared with); None when there is none."""
        with self.engine.connect() as conn:
            found: str | None = conn.execute(LAST_SUCCEEDED, {"run_id": run_id}).scalar()
        return found

    def pipelines(self) -> list[str]:
        """Every pipeline name with a run, sorted (the runs page's filter)."""
        with self.engine.connect() as conn:
            return list(conn.execute(PIPELINE_NAMES).scalars())

    def grid(self, run_ids: list[str]) -> dict[str, Any]:
        """Recent runs × stages (Airflow's grid): each cell the stage's latest attempt.

        Args:
            run_ids: the runs, newest first (the columns, drawn oldest first).

        Returns:
            {"runs": run ids oldest first, "stages": names in pipeline order,
             "cells": {stage: {run_id: {status, seconds, attempts}}}}.
        """
        with self.engine.connect() as conn:
            rows = conn.execute(select(stage_runs.c.run_id, stage_runs.c.stage,
                                       stage_runs.c.status, stage_runs.c.seconds,
                                       stage_runs.c.attempt)
                                .where(stage_runs.c.run_id.in_(run_ids))
                                .order_by(stage_runs.c.id)).all()
        cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        earlier: dict[tuple[str, str], list[str]] = defaultdict(list)
        for r in rows:  # ordered by id: a later attempt overwrites the earlier one
            tried = earlier[r.stage, r.run_id]
            tried.append(r.status)
            cells[r.stage][r.run_id] = {"status": r.status, "seconds": r.seconds,
                                        "attempts": attempts(tried)}
        return {"runs": list(reversed(run_ids)), "stages": list(cells), "cells": dict(cells)}

    def history(self, pipeline: str, stage: str, limit: int = 30) -> list[dict[str, Any]]:
        """This stage's latest attempt in each of the pipeline's recent runs, newest first:
        run_id, started, status, seconds, records_in, records_out, dead_lettered,
        cached_from, stage_run_id and metrics (evaluate's overall, or train's last epoch)."""
        seen: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as conn:  # a few attempts per run at most: 4 rows a run
            for r in conn.execute(HISTORY, {"pipeline": pipeline, "stage": stage,
                                            "rows": limit * 4}):
                if r.run_id not in seen and len(seen) < limit:
                    seen[r.run_id] = {
                        "run_id": r.run_id, "started": iso(r.run_started), "status": r.status,
                        "seconds": r.seconds, "records_in": r.records_in,
                        "records_out": r.records_out, "dead_lettered": r.dead_lettered,
                        "cached_from": r.cached_from, "stage_run_id": r.id, "metrics": {}}
            ids = [h["stage_run_id"] for h in seen.values()]
            metrics: dict[int, dict[str, float]] = defaultdict(dict)
            for m in conn.execute(OVERALL_METRICS, {"ids": ids}):
                metrics[m.stage_run_id][m.metric] = m.value
            for e in conn.execute(EPOCHS, {"ids": ids}):
                metrics[e.stage_run_id] = dict(e.metrics)  # the last epoch's metrics win
        for h in seen.values():
            h["metrics"] = metrics.get(h["stage_run_id"], {})
        return list(seen.values())

    def sample_rows(self, wanted: list[tuple[int, float | None]]) -> list[list[tuple[Any, ...]]]:
        """Samples of some stage runs in time order, as rows of statements.SAMPLE_COLUMNS.

        Args:
            wanted: (stage_run_id, after) each: only samples later than `after` (None: all).

        Returns:
            One list of rows per entry of `wanted`, on one connection.
        """
        with self.engine.connect() as conn:
            return [[tuple(r) for r in conn.execute(
                SAMPLES if after is None else SAMPLES_AFTER,
                {"id": stage_run_id} if after is None else {"id": stage_run_id, "after": after})]
                for stage_run_id, after in wanted]

    def totals(self, model_components: tuple[str, ...]) -> Totals:
        """The whole store's totals for a Prometheus scrape (see totals.Totals).

        Args:
            model_components: the components whose stage runs hold a model's quality.
        """
        with self.engine.connect() as conn:
            return read_totals(conn, model_components)


def _newest_first(pipeline: str | None, trigger: str | None) -> Select[Any]:
    """Runs, newest first (ties by id), of a pipeline and a trigger if given."""
    query = select(runs).order_by(runs.c.started.desc(), runs.c.run_id.desc())
    if pipeline is not None:
        query = query.where(runs.c.pipeline == pipeline)
    if trigger is not None:
        query = query.where(runs.c.trigger == trigger)
    return query
