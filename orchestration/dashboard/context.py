"""What every handler needs: the artifact root, the store's reads, the live watchers; and
the runs page's data (a page of runs, its grid, the filters), which is all reads."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response

from seqline.orchestration.dashboard.live import Watchers
from seqline.orchestration.dashboard.memo import LiveCache, Memo
from seqline.orchestration.dashboard.series import SampleCache, ended_at
from seqline.orchestration.store import RunReader, ScheduleStore
from seqline.orchestration.store.tables import RUN_STATUSES, TRIGGERS
from seqline.pipeline.storage import Folder

__all__ = ["GRID_RUNS", "GZIPPED", "Dashboard", "check_one_of", "dashboard_of", "page_number",
           "run_labels", "runs_view"]

# Gzip for the routes whose answers are made per request (HTML, JSON and the vendored
# scripts shrink 3-4x). Not an app-wide middleware: the live pages keep their gzipped bytes
# in the LiveCache, and an event stream is never compressed, yet an app-wide gzip would
# still wrap every one of their answers and every pushed update.
GZIPPED = [Middleware(GZipMiddleware, minimum_size=1024)]

T = TypeVar("T")
GRID_RUNS = 20  # columns of the runs × stages grid: enough history to see a pattern
FILTERS = ("pipeline", "status", "trigger")  # the runs page's, kept in its links
# A page of a run nobody watches live (an ended run, mostly) changes only when another run of
# its pipeline shows up in its history: fifty people opening it within 2 s cost one render.
# A live page is refreshed by its stream anyway.
UNWATCHED_SECONDS = 2.0
# A grid column's label is widened to at least this many characters where it can be: "1" and
# "2" (from run-1, run-2) are too small to read or click.
LABEL_CHARS = 4


@dataclass
class Dashboard:
    """The server's state, built once by `create_app` (handlers only read it)."""

    root: Folder  # a local Path, or a storage.Location for an object-store root
    reader: RunReader  # every read of the store (its connections refuse writes)
    schedules: ScheduleStore  # over the same read-only engine
    watchers: Watchers
    cache: LiveCache
    # What a page shows (run_view's or stage_view's dict) per run, view and version: the
    # live stream's update and the pages loaded at the same version share one computation.
    views: Memo[dict[str, Any]] = field(default_factory=lambda: Memo(256))
    # The run's row and its stages, and every stage's samples, per run and version: a run
    # page and its stage pages at one version read the store once between them, not once
    # each (the run's detail is 8 queries).
    runs: Memo[dict[str, Any]] = field(default_factory=lambda: Memo(64))
    samples: Memo[dict[str, Any]] = field(default_factory=lambda: Memo(64))
    charts: SampleCache = field(default_factory=SampleCache)

    def version(self, run_id: str) -> int:
        """The run's version: while it is watched live, its count of changes; else a
        negative number that moves every UNWATCHED_SECONDS (never equal to a count)."""
        version = self.watchers.version_of(run_id)
        return version if version is not None \
            else -int(time.monotonic() // UNWATCHED_SECONDS) - 1

    async def live(self, request: Request, run_id: str,
                   compute: Callable[[], Response]) -> Response:
        """`compute()`'s answer, shared by every request for the same address: while the run
        is watched, until it changes; else for up to UNWATCHED_SECONDS (see LiveCache).
        A kept answer is sent from the event loop; only computing goes to a worker thread
        (most loads of a watched page are answered from the cache)."""
        key = request.url.path + "?" + request.url.query
        version = self.version(run_id)
        hit = self.cache.cached(request, key, version)
        if hit is not None:
            return hit
        return await run_in_threadpool(self.cache.get, request, key, version, compute)

    def view(self, run_id: str, name: str, version: int,
             compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A page's data (`name`: "run" or "stage/NAME") at `version`, computed once."""
        return self.views.get((run_id, name), version, compute)

    def run_at(self, run_id: str, version: int | None = None) -> dict[str, Any]:
        """`RunReader.run_page` of the run at `version` (None: now), as a copy whose stage
        dicts a view may add to; a missing run is a 404."""
        if version is None:
            return self.found(self.reader.run_page, run_id)
        run = self.runs.get(run_id, version,
                            lambda: self.found(self.reader.run_page, run_id))
        return {**run, "stages": [dict(stage) for stage in run["stages"]]}

    def series(self, stages: list[dict[str, Any]]) -> dict[str, Any]:
        """The samples of some stages (run_page's dicts) as chart columns, {name: columns},
        read incrementally (series.SampleCache); read-only, shared."""
        return self.charts.series(self.reader, [(s["stage_run_id"], s["t0"], s["name"],
                                                 s.get("records_in"), ended_at(s))
                                                for s in stages])

    def samples_at(self, run: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        """Every stage's samples ({name: columns}) of `run` (run_at's) at `version`; treat
        as read-only (shared by the views of that version)."""
        if version is None:
            return self.series(run["stages"])
        return self.samples.get(run["run_id"], version, lambda: self.series(run["stages"]))

    def knows(self, run_id: str, stage: str | None = None) -> bool:
        """Whether the run (and stage) is known without asking the store: it was read for a
        page lately (a run's stages are never removed while it exists). False: ask."""
        run = self.runs.peek(run_id)
        return run is not None and (stage is None or any(s["name"] == stage
                                                         for s in run["stages"]))

    def found(self, read: Callable[..., T | None], *args: Any) -> T:
        """`read(*args)` (a RunReader method), a missing run or stage (None) being a 404:
        ids in an address are never trusted."""
        value = read(*args)
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


def runs_view(dash: Dashboard, query: Mapping[str, str]) -> dict[str, Any]:
    """What the runs page shows: a page of runs (RunReader.runs_page, 50 newest first), the
    grid of its first GRID_RUNS runs × stages (each run's column head: run_labels), the
    filters, and links to the pages of older and newer runs that keep the filters
    (`?older=RUN_ID`, `?newer=RUN_ID`). Four reads at most, whatever the number of runs in
    the store.

    Args:
        dash: the server's state.
        query: the address's query: pipeline, status, trigger, older or newer, part.

    Raises:
        HTTPException: 400 for an unknown status or trigger, naming the valid ones.
    """
    chosen = {k: query.get(k) or None for k in FILTERS}
    check_one_of("status", chosen["status"], RUN_STATUSES)
    check_one_of("trigger", chosen["trigger"], TRIGGERS)
    page = dash.reader.runs_page(pipeline=chosen["pipeline"], status=chosen["status"],
                                 trigger=chosen["trigger"], older=query.get("older") or None,
                                 newer=query.get("newer") or None)
    kept = {k: v for k, v in chosen.items() if v}
    links = {key: f"/?{urlencode({**kept, key: page[key]})}" if page[key] else None
             for key in ("older", "newer")}
    grid = dash.reader.grid([r["run_id"] for r in page["runs"][:GRID_RUNS]])
    return {"runs": page["runs"], "grid": grid, "run_labels": run_labels(grid["runs"]),
        "chosen": chosen, "pipelines": dash.reader.pipelines(), "statuses": RUN_STATUSES,
        "triggers": TRIGGERS,
        "part": query.get("part"), "older": links["older"], "newer": links["newer"],
        "paged": True}


def check_one_of(name: str, value: str | None, known: tuple[str, ...]) -> None:
    """A filter's value must be one it knows, as `seqline runs list --status` says: an unknown
    one is a 400 naming the valid ones (the runs page and /api/runs), not an empty list that
    reads as "no such runs".

    Example: status "bogus" -> 400 {"error": "invalid status: 'bogus' is not one of
    'queued', 'running', …"}.
    """
    if value and value not in known:
        raise HTTPException(400, f"invalid {name}: {value!r} is not one of "
                                 f"{', '.join(repr(str(k)) for k in known)}")


def run_labels(run_ids: Iterable[str]) -> dict[str, str]:
    """A short label per run id, unique among them (the grid's column heads): what the ids do
    not all share, cut where a word or number begins or ends, widened to LABEL_CHARS where
    that is too short. One id alone keeps its whole id.

    Example: nightly-backfill-20261120T013000Z, nightly-backfill-20261121T013000Z ->
    20261120, 20261121; strict, strict2 -> strict, strict2; run-1, run-2 -> run-1, run-2.
    """
    ids = list(dict.fromkeys(run_ids))
    if len(ids) < 2:
        return {r: r for r in ids}
    shared = len(os.path.commonprefix(ids))
    # the suffix never overlaps the prefix: "ab" and "abab" share both "ab"s, not 4 chars
    tail = min(len(os.path.commonprefix([r[::-1] for r in ids])),
               min(len(r) for r in ids) - shared)
    # where each label may start (chars dropped at the front) and end (at the back), nearest
    # to the ids' difference first; 0 always, so the whole id is the widest.
    fronts = [c for c in range(shared, -1, -1) if all(_starts_word(r, c) for r in ids)]
    backs = [k for k in range(tail, -1, -1) if all(_ends_word(r, len(r) - k) for r in ids)]
    front, back = fronts.pop(0), backs.pop(0)
    while min(len(r) - back - front for r in ids) < LABEL_CHARS and (fronts or backs):
        if fronts:  # the front first: "run-1" says more than "1-nightly"
            front = fronts.pop(0)
        else:
            back = backs.pop(0)
    # every id is the shared front + its own part + the shared back, so the labels differ
    return {r: r[front:len(r) - back] for r in ids}


def _kind(char: str) -> str:
    return "digit" if char.isdigit() else "letter" if char.isalpha() else "mark"


def _starts_word(run_id: str, at: int) -> bool:
    """Whether a label may start at `at`: a letter or digit after a change of kind
    ("backfill-|2026", "20261120T|0130")."""
    if at in (0, len(run_id)):
        return True
    return _kind(run_id[at]) != "mark" and _kind(run_id[at - 1]) != _kind(run_id[at])


def _ends_word(run_id: str, at: int) -> bool:
    """Whether a label may end at `at` (exclusive): a letter or digit before a change of
    kind ("20261120|T0130", "0130|-ab")."""
    if at in (0, len(run_id)):
        return True
    return _kind(run_id[at - 1]) != "mark" and _kind(run_id[at - 1]) != _kind(run_id[at])
