"""What every handler needs: the artifact root, a read-only store engine, the live watchers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from seqline.orchestration.dashboard.cache import LiveCache
from seqline.orchestration.dashboard.live import Watchers

__all__ = ["Dashboard", "dashboard_of", "page_number"]

T = TypeVar("T")
# A page of a run nobody watches live (an ended run, mostly) changes only when another run of
# its pipeline shows up in its history: fifty people opening it within 2 s cost one render.
# A live page is refreshed by its stream anyway.
UNWATCHED_SECONDS = 2.0


@dataclass
class Dashboard:
    """The server's state, built once by `create_app` (handlers only read it)."""

    root: Path
    engine: Engine
    watchers: Watchers
    cache: LiveCache

    def live(self, request: Request, run_id: str, compute: Callable[[], Response]) -> Response:
        """`compute()`'s answer, shared by every request for the same address: while the run
        is watched, until it changes; else for up to UNWATCHED_SECONDS (see LiveCache)."""
        key = request.url.path + "?" + request.url.query
        version = self.watchers.version_of(run_id)
        if version is None:  # negative: never equal to a watched run's count of changes
            version = -int(time.monotonic() // UNWATCHED_SECONDS) - 1
        return self.cache.get(key, version, compute)

    def read(self, query: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `query(conn, *args, **kwargs)` on a pooled read-only connection."""
        with self.engine.connect() as conn:
            return query(conn, *args, **kwargs)

    def found(self, query: Callable[..., T | None], *args: Any) -> T:
        """Like `read`, but a missing run or stage is a 404 (ids are never trusted)."""
        with self.engine.connect() as conn:
            value = query(conn, *args)
        if value is None:
            raise HTTPException(404, "no such run or stage in the run store")
        return value


def dashboard_of(request: Request) -> Dashboard:
    dash: Dashboard = request.app.state.dashboard
    return dash


def page_number(request: Request, name: str) -> int:
    """A 0-based page number from the query string; anything else is page 0."""
    raw = request.query_params.get(name, "0")
    return int(raw) if raw.isdigit() and len(raw) < 9 else 0
