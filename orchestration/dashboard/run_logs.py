"""A run's log page: `/runs/{run_id}/logs?stage=&level=&q=&page=`, filters in the address."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqline.orchestration.dashboard.context import GZIPPED, Dashboard, dashboard_of, page_number
from seqline.orchestration.dashboard.files import inside_root
from seqline.orchestration.dashboard.pages import render
from seqline.orchestration.log_search import LEVELS, LogQuery, search_log
from seqline.orchestration.schedule.launch import logs_folder

__all__ = ["logs_page", "logs_view", "routes"]

# A scheduled run's process output, the end of it: where a crash or a C++ abort is told.
TAIL_LINES = 100
TAIL_BYTES = 64 * 1024
# The text search box: longer is not a search anybody types, and it is echoed in the page.
MAX_QUERY_CHARS = 200


def logs_view(dash: Dashboard, run_id: str, params: dict[str, str], page: int
              ) -> dict[str, Any]:
    """The page's data: the run, the filters as asked, a page of the lines they keep.

    Raises:
        HTTPException: 404 for a run the store does not have (ids in an address are never
            trusted), 400 for an unknown level.
    """
    run = dash.run_at(run_id, dash.version(run_id))  # a 404 before any file is opened
    folder = inside_root(dash.root, "runs", run_id)
    if folder is None:
        raise HTTPException(404, "that run's folder is outside the artifact root")
    chosen = {"stage": params.get("stage") or None,
              "level": (params.get("level") or "").lower() or None,
              "q": (params.get("q") or "")[:MAX_QUERY_CHARS] or None}
    try:
        query = LogQuery(chosen["stage"], chosen["level"], chosen["q"])
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    found = search_log(folder, query, page)
    tick = dash.schedules.tick_of_run(run_id)
    stages = [s["name"] for s in run["stages"]]
    return {"run_id": run_id, "log": found, "chosen": chosen, "levels": LEVELS,
            "stages": stages + [s for s in found.stages if s not in stages],
            "link": lambda **change: _link(run_id, chosen, change),
            "process": _process_output(dash, run_id) if tick else None}


def _process_output(dash: Dashboard, run_id: str) -> dict[str, Any] | None:
    """A scheduled run's process output (stdout and stderr, where the scheduler put it:
    C++ lines and crashes that no logger saw): its place and its last lines, if this machine
    has it at the default place (`--logs` elsewhere: not known here)."""
    place = logs_folder(dash.root, None) / f"{run_id}.log"
    if not place.is_file():
        return None
    with open(place, "rb") as file:
        file.seek(max(0, place.stat().st_size - TAIL_BYTES))
        text = file.read().decode(errors="replace")
    return {"path": str(place), "tail": text.splitlines()[-TAIL_LINES:]}


def _link(run_id: str, chosen: dict[str, str | None], change: dict[str, Any]) -> str:
    """This page's address with some filters changed (None drops one): filters live in the
    URL, so a filtered view can be bookmarked and sent."""
    wanted = {**chosen, **change}
    query = urlencode({k: v for k, v in wanted.items() if v not in (None, "", 0)})
    return f"/runs/{run_id}/logs" + (f"?{query}" if query else "")


async def logs_page(request: Request) -> Response:
    """`/runs/{run_id}/logs`: the run's log lines, filtered by stage, level and text."""
    dash, run_id = dashboard_of(request), request.path_params["run_id"]
    params = dict(request.query_params)
    view = await run_in_threadpool(logs_view, dash, run_id, params,
                                   page_number(request, "page"))
    return render("run_logs.html", **view)


routes = [Route("/runs/{run_id}/logs", logs_page, middleware=GZIPPED)]
