"""The seq lookup page (`/runs/{run_id}/lookup?seq=N`): `seqline lookup` in the browser."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqline.orchestration.dashboard.context import GZIPPED, dashboard_of
from seqline.orchestration.dashboard.pages import render
from seqline.orchestration.lookup import lookup_seq
from seqline.pipeline.errors import ConfigError, RunNotFound

__all__ = ["lookup_page", "routes"]


def lookup_page(request: Request) -> Response:
    """The form, and with `?seq=N` the seq's place in every stage (the same answer as the
    CLI's, from the same function). A seq that is not a whole number is a 400 with the form.

    Raises:
        HTTPException: 404 for an unknown run.
    """
    run_id = request.path_params["run_id"]
    typed = (request.query_params.get("seq") or "").strip()
    if not typed:
        return render("lookup.html", run_id=run_id, typed="", place=None, problem=None)
    seq = _seq(typed)
    if seq is None:
        return render("lookup.html", status=400, run_id=run_id, typed=typed, place=None,
                      problem=f"{typed!r} is not a seq; type a whole number such as 100")
    try:
        place = lookup_seq(dashboard_of(request).root, run_id, seq)
    except (RunNotFound, ConfigError):
        raise HTTPException(404, f"no run {run_id!r}") from None
    return render("lookup.html", run_id=run_id, typed=typed, place=place, problem=None)


def _seq(typed: str) -> int | None:
    try:
        value = int(typed.replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


routes = [Route("/runs/{run_id}/lookup", lookup_page, middleware=GZIPPED)]
