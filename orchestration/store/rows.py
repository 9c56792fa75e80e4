"""Statements shared by the store's writes and `store rebuild`: upserts and times."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Insert, Table, select

from seqline.orchestration.store.tables import artifacts, lineage, pipelines

__all__ = ["insert_ignoring", "iso", "now", "pipeline_id", "upsert_artifact"]


def now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 with its zone, to the second: `2026-11-23T10:27:00+00:00` (None stays None)."""
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


def _insert(conn: Connection, table: Table) -> Any:
    """INSERT with ON CONFLICT support: both dialects have it, in their own module (the one
    its engine imported: PostgreSQL's alone takes 23 ms, which a SQLite store never needs)."""
    return importlib.import_module(f"sqlalchemy.dialects.{conn.dialect.name}").insert(table)


def insert_ignoring(conn: Connection, table: Table, keys: list[str]) -> Insert:
    """INSERT … ON CONFLICT (keys) DO NOTHING: atomic get-or-create, no check-then-insert.

    Args:
        conn: the transaction's connection (picks the dialect).
        table: the table to insert into.
        keys: the columns of the unique constraint that may conflict.

    Returns:
        The statement; add `.values(...)` and execute it.
    """
    statement: Insert = _insert(conn, table).on_conflict_do_nothing(index_elements=keys)
    return statement


def pipeline_id(conn: Connection, name: str, file: str | None, fingerprint: str | None) -> int:
    """The id of the pipeline row (name, file, fingerprint), created when new.

    Args:
        conn: a write transaction.
        name: the pipeline's name.
        file: its file, if known.
        fingerprint: a digest of the file, if known.

    Returns:
        The row's id.
    """
    key = {"name": name, "file": file or "", "fingerprint": fingerprint or ""}
    conn.execute(insert_ignoring(conn, pipelines, list(key)).values(**key, created=now()))
    where = [pipelines.c[column] == value for column, value in key.items()]
    return int(conn.execute(select(pipelines.c.id).where(*where)).scalar_one())


def upsert_artifact(conn: Connection, stage_run_id: int, role: str, row: dict[str, Any]) -> None:
    """Record an artifact (one row per URI, refreshed) and its link to a stage run.

    Args:
        conn: a write transaction.
        stage_run_id: the stage run that read or wrote it.
        role: "input" or "output".
        row: uri, kind, records, bytes, checksum.
    """
    # What is known refreshes the row; what is not (a reader records only the URI it read)
    # never blanks what the writer recorded, whichever of the two comes first.
    fresh = {k: row[k] for k in ("kind", "records", "bytes", "checksum")
             if row[k] not in (None, "")}
    statement = _insert(conn, artifacts).values(**row)
    conn.execute(statement.on_conflict_do_update(index_elements=["uri"], set_=fresh) if fresh
                 else statement.on_conflict_do_nothing(index_elements=["uri"]))
    artifact_id = conn.execute(
        select(artifacts.c.id).where(artifacts.c.uri == row["uri"])).scalar_one()
    link = {"stage_run_id": stage_run_id, "artifact_id": artifact_id, "role": role}
    conn.execute(insert_ignoring(conn, lineage, list(link)).values(**link))
