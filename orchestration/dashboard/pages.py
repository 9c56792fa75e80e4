"""The HTML pages: runs, a run, a stage, two runs compared, schedules (`?part=` for fragments)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from seqline.orchestration.dashboard.compare import compare_view, run_compare_view
from seqline.orchestration.dashboard.context import (
    GZIPPED,
    Dashboard,
    dashboard_of,
    page_number,
    runs_view,
)
from seqline.orchestration.dashboard.live import Snapshot
from seqline.orchestration.dashboard.page_data import run_view, stage_view
from seqline.orchestration.dashboard.run_facts import options_in_words
from seqline.orchestration.dashboard.schedules import in_zone, schedules_view
from seqline.orchestration.dashboard.units import FILTERS, significant
from seqline.orchestration.reruns import RerunCommand, rerun_commands
from seqline.orchestration.schedule.launch import root_text

__all__ = ["commands_of", "compile_templates", "http_error", "render", "routes", "snapshot"]

TEMPLATES = Path(__file__).parent / "templates"
# Every value a page shows passes through autoescape: stage names, dead-letter text and error
# messages are user data and must render as text, never as markup.
# auto_reload off: the templates ship in the package and do not change while it serves, so
# a render need not stat its file (and the files it includes) every time.
env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(
    enabled_extensions=("html",), default=True), trim_blocks=True, lstrip_blocks=True,
    auto_reload=False)


# The numbers' formats live in units.py (tests import _significant from here).
_significant = significant
env.filters.update(FILTERS)
env.filters["in_zone"] = in_zone  # the schedules page's fire times in each schedule's zone


def compile_templates() -> None:
    """Compile every template now (~20-40 ms each), at start-up rather than in the first
    requests, which would otherwise pay for it while a run is watched."""
    for name in env.list_templates(extensions=["html"]):
        env.get_template(name)


def snapshot(dash: Dashboard, run_id: str, view: str, version: int) -> Snapshot:
    """A live view's HTML and samples at `version`: "run" (the run page) or "stage/NAME" (a
    stage page's first pages); its data is shared with pages loaded at the same version."""
    shown = _view(dash, run_id, view, version)
    name = "run_update.html" if view == "run" else "stage_live.html"
    return env.get_template(name).render(**shown), shown["samples"]


def _view(dash: Dashboard, run_id: str, view: str, version: int) -> dict[str, Any]:
    if view == "run":
        return dash.view(run_id, view, version, lambda: run_view(dash, run_id, version))
    return dash.view(run_id, view, version,
                     lambda: stage_view(dash, run_id, view.removeprefix("stage/"),
                                        version=version))


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A template as a page that browsers and proxies do not cache (it is live data)."""
    return HTMLResponse(env.get_template(name).render(**context), status_code=status,
                        headers={"Cache-Control": "no-store"})


def runs_page(request: Request) -> Response:
    """`/`: the runs, filterable, 50 a page (`?older=`/`?newer=` a run id), and the grid of
    the page's runs × stages (context.runs_view)."""
    return render("runs.html", **runs_view(dashboard_of(request), request.query_params))


async def run_page(request: Request) -> Response:
    """`/runs/{run_id}` (`?part=live`: only what changes while it runs)."""
    dash, run_id = dashboard_of(request), request.path_params["run_id"]
    live = request.query_params.get("part") == "live"

    def page() -> Response:
        view = _view(dash, run_id, "run", dash.version(run_id))
        if live:
            return render("run_update.html", **view)
        return render("run.html", **view, commands=commands_of(request, view["run"]),
                      options_words=options_in_words(view["run"]["options"],
                                                     view["run"]["runner"]))

    return await dash.live(request, run_id, page)


def commands_of(request: Request, run: dict[str, Any]) -> list[RerunCommand]:
    """The rerun, resume and backfill commands for `run` (run_page's), as `seqline runs
    show` prints them: the root as this dashboard reads it, the store only if one was given
    (its password hidden)."""
    dash = dashboard_of(request)
    tick = dash.schedules.tick_of_run(run["run_id"])
    return rerun_commands(run, root_text(dash.root), getattr(request.app.state, "store", None),
                          tick.schedule if tick else None, tick.fire_time if tick else None)


async def stage_page(request: Request) -> Response:
    """`/runs/{run_id}/stages/{stage}` (`?part=live|shards|dead|batches` for fragments)."""
    dash, run_id = dashboard_of(request), request.path_params["run_id"]
    part = request.query_params.get("part")
    name = {"live": "stage_live.html", "shards": "stage_shards.html",
            "dead": "stage_dead.html", "batches": "stage_batches.html"}.get(part or "",
                                                                            "stage.html")

    def page() -> Response:
        pages = {k: page_number(request, k) for k in ("shards", "dead", "epoch", "batches")}
        if not any(pages.values()):  # the first pages: what the live stream renders too
            return render(name, **_view(dash, run_id, f"stage/{request.path_params['stage']}",
                                        dash.version(run_id)))
        return render(name, **stage_view(dash, run_id, request.path_params["stage"], **pages,
                                         version=dash.version(run_id)))

    return await dash.live(request, run_id, page)


def compare_page(request: Request) -> Response:
    """`/runs/{run_id}/stages/{stage}/compare?with=OTHER[&same=shown]`: the same stage of two
    runs, what differs (and what does not, when asked)."""
    other = request.query_params.get("with") or ""
    view = compare_view(dashboard_of(request), request.path_params["run_id"],
                        request.path_params["stage"], other, request.query_params)
    return render("compare.html", **view)


def run_compare_page(request: Request) -> Response:
    """`/runs/{run_id}/compare?with=OTHER[&same=shown]`: two whole runs (default: the one
    before), what differs (and what does not, when asked)."""
    view = run_compare_view(dashboard_of(request), request.path_params["run_id"],
                            request.query_params.get("with") or None, request.query_params)
    return render("compare_runs.html", **view)


def schedules_page(request: Request) -> Response:
    """`/schedules`: next fire times, paused or not, recent ticks with runs or reasons."""
    return render("schedules.html", **schedules_view(dashboard_of(request).schedules))


async def events(request: Request) -> Response:
    """`/runs/{run_id}/events` and `/runs/{run_id}/stages/{stage}/events`: a page's live
    stream (see live.Watchers)."""
    dash = dashboard_of(request)
    run_id, stage = request.path_params["run_id"], request.path_params.get("stage")
    if not dash.knows(run_id, stage):  # an unknown run or stage is a 404, not a stream
        await run_in_threadpool(dash.found, dash.reader.stage_of if stage
                                else dash.reader.run_exists, run_id, *([stage] if stage else []))
    return dash.watchers.stream(run_id, "run" if stage is None else f"stage/{stage}")


def http_error(request: Request, exc: Exception) -> Response:
    """A 404 (or other refusal) as a small page, or as JSON under /api/."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": detail}, status_code=status)
    return render("error.html", status=status, message=detail)


routes = [
    Route("/", runs_page, middleware=GZIPPED),
    Route("/runs/{run_id}", run_page),  # gzipped by the LiveCache, as the stage page
    Route("/runs/{run_id}/events", events),
    Route("/runs/{run_id}/compare", run_compare_page, middleware=GZIPPED),
    # {stage:path}: a stage name may hold a "/" (seqline writes it as nested folders).
    Route("/runs/{run_id}/stages/{stage:path}/compare", compare_page, middleware=GZIPPED),
    Route("/runs/{run_id}/stages/{stage:path}/events", events),
    Route("/runs/{run_id}/stages/{stage:path}", stage_page),
    Route("/schedules", schedules_page, middleware=GZIPPED),
]
