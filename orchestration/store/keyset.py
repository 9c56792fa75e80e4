"""The runs list a page at a time, by keyset: a page starts beyond a run named by its id."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row

from seqline.orchestration.store.documents import run_summary
from seqline.orchestration.store.liveness import interrupted, shown_status
from seqline.orchestration.store.statements import CURSOR, runs_beyond
from seqline.orchestration.store.statuses import RunStatus

__all__ = ["LIVE", "runs_page", "shown"]

# The stored statuses a run shown as interrupted may have: a stale `running` row shows so.
LIVE = (RunStatus.running, RunStatus.interrupted)


def runs_page(conn: Connection, wanted: dict[str, str | None], *, older: str | None,
              newer: str | None, limit: int) -> dict[str, Any]:
    """A page of the runs list; see RunReader.runs_page.

    Args:
        conn: a read connection.
        wanted: the filters: pipeline, status (as shown) and trigger, each None for any.
        older: a run id: the page after it.
        newer: a run id: the page before it.
        limit: runs on a page.

    Returns:
        {"runs": [...], "older": id or None, "newer": id or None}.
    """
    cursor = conn.execute(CURSOR, {"run_id": older or newer}).first() \
        if older or newer else None
    key = None if cursor is None else (cursor.started, cursor.run_id)
    if newer is not None and key is not None:
        found, more = _matching(conn, wanted, key, False, limit)
        if more or len(found) == limit:
            found.reverse()  # read nearest first, oldest first: the list is newest first
            return {"runs": found, "older": found[-1]["run_id"],
                    "newer": found[0]["run_id"] if more else None}
        key = None  # too near the top to fill a page: the first page, whole
    found, more = _matching(conn, wanted, key, True, limit)
    return {"runs": found, "older": found[-1]["run_id"] if more else None,
            "newer": found[0]["run_id"] if key is not None and found else None}


def _matching(conn: Connection, wanted: dict[str, str | None], cursor: tuple[Any, str] | None,
              older: bool, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to `limit` runs beyond `cursor` (statements.runs_beyond) in the status shown that
    is `wanted`, nearest first, and whether more lie beyond them.

    A status that a stale `running` row may show as is read from the rows stored so and
    kept by the status shown: batch after batch, each a page and one row. More than one
    batch only past a page's worth of stale rows, which the reaper soon records as
    interrupted.
    """
    status = wanted["status"]
    stored = ((RunStatus.running,) if status == RunStatus.running
              else LIVE if status == RunStatus.interrupted
              else (status,) if status else None)
    kept: list[dict[str, Any]] = []
    while True:
        rows = conn.execute(runs_beyond(pipeline=wanted["pipeline"], statuses=stored,
                                        trigger=wanted["trigger"], cursor=cursor,
                                        older=older, rows=limit + 1)).all()
        kept += [r for r in map(shown, rows) if not status or r["status"] == status]
        if len(kept) > limit or len(rows) <= limit:
            return kept[:limit], len(kept) > limit
        cursor = (rows[-1].started, rows[-1].run_id)


def shown(row: Row[Any]) -> dict[str, Any]:
    """A `runs` row as `runs list` prints it, its status as shown: a `running` run whose
    driver is gone is `interrupted`, with the reaper's error (liveness.shown_status)."""
    summary = run_summary(row)
    summary["status"] = shown_status(row.status, row.heartbeat, row.started, row.host, row.pid)
    if summary["status"] != row.status:
        summary["error"] = interrupted(row.run_id)
    return summary
