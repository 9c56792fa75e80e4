"""`seqline store rebuild`: recreate a lost store's rows from the run folders' JSON files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert

from seqline.components import COMPONENTS
from seqline.orchestration.cache import artifact_checksum
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.rows import insert_ignoring, pipeline_id, upsert_artifact
from seqline.orchestration.store.tables import (
    COUNTS,
    RUN_STATUSES,
    epochs,
    eval_metrics,
    runs,
    stage_runs,
)
from seqline.pipeline.artifacts import MANIFEST
from seqline.pipeline.storage import Folder, storage_of

__all__ = ["index_runs"]


def index_runs(engine: Engine, root: Folder) -> int:
    """Add every run under `<root>/runs/` that the store lacks; runs it has are left alone
    (the store knows more than the folders: samples, heartbeats, failed attempts).

    Args:
        engine: the store's engine, migrated.
        root: the artifact root.

    Returns:
        How many runs were added.
    """
    added = 0
    runs_dir = root / "runs"
    records = [f for f in (d / "run.json" for d in storage_of(runs_dir).entries(runs_dir))
               if f.exists()]
    for record_file in records:
        with writing(engine) as conn:  # one run, one transaction: a bad folder spoils only it
            added += _index_run(conn, record_file.parent, json.loads(record_file.read_text()))
    return added


def _index_run(conn: Connection, folder: Folder, record: dict[str, Any]) -> int:
    """Insert one run and its committed stages; 0 if the store already had it."""
    status = record.get("status")
    started = _time(record.get("started_at")) or _mtime(folder / "run.json")
    row = {
        "run_id": record.get("run_id", folder.name), "pipeline": record["pipeline"],
        "pipeline_id": pipeline_id(conn, record["pipeline"], None, None),
        "status": status if status in RUN_STATUSES else "interrupted",
        "runner": record.get("runner", "local"), "trigger": "manual",
        "options": {k: record[k] for k in ("workers", "window", "queue") if k in record},
        "started": started, "finished": _time(record.get("finished_at")),
        # A run still "running" in its folder: its newest write stands in for a heartbeat,
        # and the reaper decides whether its driver is gone.
        "heartbeat": max((_mtime(p) for p in _files(folder)), default=started),
        "error_message": record.get("error"),
    }
    added = insert_ignoring(conn, runs, ["run_id"]).values(**row).returning(runs.c.run_id)
    if conn.execute(added).first() is None:  # the store has it already
        return 0
    stages = [(d, json.loads((d / MANIFEST).read_text()))
              for d in storage_of(folder).entries(folder) if (d / MANIFEST).is_file()]
    # What the run's plan did with each stage, and why, in plan order (the live run's rows'
    # order; a run from before the plan was recorded: by start).
    planned = {step["stage"]: step for step in record.get("plan") or []}
    order = list(planned)
    stages.sort(key=lambda s: (order.index(s[0].name) if s[0].name in order else len(order),
                               s[1].get("timeline", {}).get("started") or 0, s[0].name))
    outputs = {d.name: _artifact(d, m) for d, m in stages}
    for stage_dir, manifest in stages:
        _index_stage(conn, row["run_id"], manifest, planned.get(stage_dir.name) or {},
                     outputs[stage_dir.name], stage_dir.parent / (manifest.get("input") or ""))
    return 1


def _index_stage(conn: Connection, run_id: str, m: dict[str, Any], step: dict[str, Any],
                 output: dict[str, Any], source: Folder) -> None:
    """One committed stage: its stage run, artifacts and lineage, epochs, evaluation; as the
    live run recorded it (a reused stage: cached, about 0 s now, from its run)."""
    timeline, waited = m.get("timeline") or {}, m.get("waited") or {}
    reused = step.get("action") == "reuse"
    result = conn.execute(insert(stage_runs).values(
        run_id=run_id, stage=m["stage"], component=m["component"],
        status="cached" if reused else m.get("status", "succeeded"),
        attempt=m.get("attempt", 1),
        started=_unix(timeline.get("started")), finished=_unix(timeline.get("finished")),
        **{k: m.get(k) for k in COUNTS}, seconds=0.0 if reused else m.get("seconds"),
        waited_input=0.0 if reused else waited.get("input"),
        waited_output=0.0 if reused else waited.get("output"),
        max_in_flight=0 if reused else m.get("max_in_flight"),
        cache_key=step.get("cache_key"),
        block_retries=None if reused else m.get("block_retries"),
        cached_from=step.get("reused_from") if reused else None,
        reason=step.get("reason"), params=m.get("params") or {},
        blessed=m.get("blessed")).returning(stage_runs.c.id))
    stage_run_id = int(result.scalar_one())
    upsert_artifact(conn, stage_run_id, "output", output)
    if m.get("input"):  # what the live run records of the stage it read: its folder
        upsert_artifact(conn, stage_run_id, "input", {
            "uri": str(source.resolve()), "kind": "", "records": None, "bytes": None,
            "checksum": None})
    if m.get("epochs"):
        conn.execute(insert(epochs), [{
            "stage_run_id": stage_run_id, "epoch": e["epoch"], "metrics": e.get("metrics", {}),
            "seconds": e.get("seconds"), "input_wait_seconds": e.get("input_wait_seconds")}
            for e in m["epochs"]])
    if isinstance(m.get("metrics"), dict) and "slices" in m:
        _index_evaluation(conn, stage_run_id, m)


def _index_evaluation(conn: Connection, stage_run_id: int, m: dict[str, Any]) -> None:
    rows = [{"slice_column": None, "slice_value": None, "metric": k, "value": v}
            for k, v in m["metrics"].items()]
    rows += [{"slice_column": column, "slice_value": str(value), "metric": k, "value": v}
             for column, values in (m.get("slices") or {}).items()
             for value, by_metric in values.items() for k, v in by_metric.items()]
    if rows:
        conn.execute(insert(eval_metrics), [{**r, "stage_run_id": stage_run_id} for r in rows])


def _artifact(stage_dir: Folder, m: dict[str, Any]) -> dict[str, Any]:
    """A stage folder as the artifact row a live run records (recorder.py): its kind is what
    its component writes, its checksum covers every file, as at commit."""
    shards = m.get("shards") or []
    files = [*shards, m.get("dead_letters") or {}]
    component = COMPONENTS.get(m["component"])
    return {"uri": str(stage_dir.resolve()),
            "kind": component.writes if component else m["component"],
            "records": m.get("records_out"),
            "bytes": sum(s.get("bytes", 0) for s in shards) if shards else None,
            "checksum": artifact_checksum(stage_dir, {f["path"]: f["sha256"] for f in files
                                                      if "sha256" in f})}


def _time(text: str | None) -> datetime | None:
    """An ISO-8601 time from run.json (zone-less ones are taken as UTC, as seqline writes)."""
    if not text:
        return None
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _unix(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None


def _files(folder: Folder) -> list[Folder]:
    return [folder / name for name in storage_of(folder).files(folder)]


def _mtime(path: Folder) -> datetime:
    return storage_of(path).modified(path)
