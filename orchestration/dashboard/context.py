"""What every handler needs: the artifact root, a read-only store engine, the live watchers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from seqline.orchestration.dashboard.cache import LiveCache, Memo
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
    # What a page shows (run_view's or stage_view's dict) per run, view and version: the
    # live stream's update and the pages loaded at the same version share one computation.
    views: Memo[dict[str, Any]] = field(default_factory=lambda: Memo(256))

    def version(self, run_id: str) -> int:
        """The run's version: while it is watched live, its count of changes; else a
        negative number that moves every UNWATCHED_SECONDS (never equal to a count)."""
        version = self.watchers.version_of(run_id)
        return version if version is not None \
            else -int(time.monotonic() // UNWATCHED_SECONDS) - 1

    def live(self, request: Request, run_id: str, compute: Callable[[], Response]) -> Response:
        """`compute()`'s answer, shared by every request for the same address: while the run
        is watched, until it changes; else for up to UNWATCHED_SECONDS (see LiveCache)."""
        key = request.url.path + "?" + request.url.query
        return self.cache.get(request, key, self.version(run_id), compute)

    def view(self, run_id: str, name: str, version: int,
             compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A page's data (`name`: "run" or "stage/NAME") at `version`, computed once."""
        return self.views.get((run_id, name), version, compute)

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
