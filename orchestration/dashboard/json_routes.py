"""The JSON under `/api/`: the same data as the pages (`/api/runs/{id}` = `runs show --json`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from seqline.orchestration.dashboard.context import (
    GZIPPED,
    check_one_of,
    dashboard_of,
    page_number,
)
from seqline.orchestration.dashboard.page_data import stage_view
from seqline.orchestration.dashboard.schedules import schedules_view
from seqline.orchestration.store.tables import RUN_STATUSES, TRIGGERS

__all__ = ["routes"]

TIME_KEYS = ("t0", "t1", "live")  # the page's extras, not part of `runs show --json`


def _json(data: Any) -> JSONResponse:
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


def runs(request: Request) -> JSONResponse:
    """`/api/runs?pipeline=&status=&trigger=&limit=&older=&newer=`: as `seqline runs list
    --json`, a page at a time: the body stays the list, and a Link header (RFC 8288, as
    GitHub's API pages) names the next (older) and previous (newer) pages. An unknown status
    or trigger is a 400 naming the valid ones, a limit below 1 one too (as the CLI's exit 2)."""
    q = request.query_params
    for name, known in (("status", RUN_STATUSES), ("trigger", TRIGGERS)):
        check_one_of(name, q.get(name), known)
    limit = q.get("limit") or "50"
    if not limit.isdigit() or int(limit) < 1:  # as `runs list --limit` refuses it
        raise HTTPException(400, f"invalid limit: {limit!r} is not a whole number of at "
                                 "least 1")
    size = min(int(limit), 1000)  # (a page at most; the Link header names the next)
    page = dashboard_of(request).reader.runs_page(
        pipeline=q.get("pipeline") or None, status=q.get("status") or None,
        trigger=q.get("trigger") or None, older=q.get("older") or None,
        newer=q.get("newer") or None, limit=size)
    kept = {k: q[k] for k in ("pipeline", "status", "trigger", "limit") if q.get(k)}
    links = [f'</api/runs?{urlencode({**kept, key: page[key]})}>; rel="{rel}"'
             for key, rel in (("older", "next"), ("newer", "prev")) if page[key]]
    return JSONResponse(page["runs"], headers={"Cache-Control": "no-store",
                                               **({"Link": ", ".join(links)} if links else {})})


def run(request: Request) -> JSONResponse:
    """`/api/runs/{run_id}`: as `seqline runs show --json` (liveness derived, not written)."""
    dash = dashboard_of(request)
    detail = dash.found(dash.reader.run_page, request.path_params["run_id"])
    for key in TIME_KEYS:
        detail.pop(key, None)
    for stage in detail["stages"]:
        for key in TIME_KEYS:
            stage.pop(key, None)
    return _json(detail)


async def samples(request: Request) -> Response:
    """`/api/runs/{run_id}/samples`: {stage: {t, records_done, rows_per_s, waits, …}}."""
    dash, run_id = dashboard_of(request), request.path_params["run_id"]

    def answer() -> Response:
        detail = dash.found(dash.reader.run_page, run_id)
        return _json({"run_id": detail["run_id"], "status": detail["status"],
                      "t0": detail["t0"], "stages": dash.series(detail["stages"])})

    return await dash.live(request, run_id, answer)


def stage(request: Request) -> JSONResponse:
    """`/api/runs/{run_id}/stages/{stage}?shards=&dead=&epoch=&batches=`: the stage page's data."""
    view = stage_view(dashboard_of(request), request.path_params["run_id"],
                      request.path_params["stage"], shards=page_number(request, "shards"),
                      dead=page_number(request, "dead"), epoch=page_number(request, "epoch"),
                      batches=page_number(request, "batches"))
    view["run"] = {k: view["run"][k] for k in ("run_id", "pipeline", "status")}
    for key in TIME_KEYS:
        view["stage"].pop(key, None)
    return _json(view)


async def stage_samples(request: Request) -> Response:
    """`/api/runs/{run_id}/stages/{stage}/samples`: one stage's samples, for its charts."""
    dash, run_id = dashboard_of(request), request.path_params["run_id"]

    def answer() -> Response:
        stage = dash.found(dash.reader.stage_of, run_id, request.path_params["stage"])
        return _json({"stage": stage["name"], "samples": dash.series([stage])[stage["name"]]})

    return await dash.live(request, run_id, answer)


def history(request: Request) -> JSONResponse:
    """`/api/runs/{run_id}/stages/{stage}/history`: the stage across the pipeline's runs."""
    dash = dashboard_of(request)
    detail = dash.found(dash.reader.run_page, request.path_params["run_id"])
    name = request.path_params["stage"]
    if not any(s["name"] == name for s in detail["stages"]):
        raise HTTPException(404, "no such stage in this run")
    return _json(dash.reader.history(detail["pipeline"], name))


def schedules(request: Request) -> JSONResponse:
    """`/api/schedules`: each schedule, its next fire times and recent ticks."""
    return _json(schedules_view(dashboard_of(request).schedules))


routes = [
    Route("/api/runs", runs, middleware=GZIPPED),
    Route("/api/runs/{run_id}", run, middleware=GZIPPED),
    Route("/api/runs/{run_id}/samples", samples),  # the samples: gzipped by the LiveCache
    Route("/api/runs/{run_id}/stages/{stage:path}/samples", stage_samples),
    Route("/api/runs/{run_id}/stages/{stage:path}/history", history, middleware=GZIPPED),
    Route("/api/runs/{run_id}/stages/{stage:path}", stage, middleware=GZIPPED),
    Route("/api/schedules", schedules, middleware=GZIPPED),
]
