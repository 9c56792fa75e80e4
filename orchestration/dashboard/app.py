"""The dashboard's Starlette app: routes, the safety middleware, /metrics and static files."""

from __future__ import annotations

import socket
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from seqline.orchestration.dashboard import json_routes, pages, run_logs, seq_lookup
from seqline.orchestration.dashboard.context import GZIPPED, Dashboard
from seqline.orchestration.dashboard.live import Watchers
from seqline.orchestration.dashboard.memo import LiveCache
from seqline.orchestration.dashboard.metrics import StoreCollector
from seqline.orchestration.dashboard.security import SafetyMiddleware, is_loopback
from seqline.orchestration.store import RunReader, RunStore, ScheduleStore, sqlite_url
from seqline.orchestration.store.engine import store_url
from seqline.pipeline.storage import Folder, open_root

__all__ = ["allowed_hosts", "create_app", "store_of"]

STATIC = Path(__file__).parent / "static"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def store_of(root: Folder, url: str | None) -> str:
    """The store's URL: `url`, else the store `seqline run` uses for this root: SQLite at
    ROOT/seqline.db, or for an object-store root a local file named after it
    (store.engine.store_url).
    The store is opened (created, migrated) there first, as every seqline command does.
    """
    base, found = store_url(root, url)  # the run's rule, one place
    RunStore.open(base, found).close()
    return found or sqlite_url(base)


def allowed_hosts(host: str, extra: list[str] | None = None) -> list[str]:
    """The Host header values the dashboard answers (any other gets 400: DNS rebinding).

    Args:
        host: the address it binds.
        extra: more names users reach it by (`--allow-host`).

    Returns:
        Loopback names for a loopback bind; else also the bound address, this machine's
        name and fully qualified name, and `extra`.
    """
    names = list(LOOPBACK_NAMES)
    if not is_loopback(host):
        names += [host, socket.gethostname(), socket.getfqdn()]
    return sorted({*names, *(extra or [])} - {"0.0.0.0", "::", ""})


def create_app(root: Folder | str, url: str | None = None, *, token: str | None = None,
               hosts: list[str] | None = None) -> Starlette:
    """The dashboard over the run store of `root` (or `url`).

    The store is opened (and migrated to head) once here, as every seqline command does;
    after that the app reads it through a RunReader whose connections refuse writes.

    Args:
        root: the artifact root, a folder or an fsspec URL (manifests and dead letters are
            read under ROOT/runs/).
        url: the run store's URL; default SQLite under the root.
        token: if set, every request must carry it (see SafetyMiddleware).
        hosts: the Host header values to answer; default loopback names.

    Returns:
        The ASGI app.

    Raises:
        ConfigError: a root URL that is malformed, carries credentials or names a bucket
            that cannot be reached (storage.open_root).
    """
    root = open_root(root)
    pages.compile_templates()
    reader = RunReader.read_only(store_of(root, url))
    watchers = Watchers(reader.run_stamp,
                        lambda run_id, view, version: pages.snapshot(dashboard, run_id, view,
                                                                     version))
    dashboard = Dashboard(root=root, reader=reader, schedules=ScheduleStore(reader.engine),
                          watchers=watchers, cache=LiveCache())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(reader))

    def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST,
                        headers={"Cache-Control": "no-store"})

    app = Starlette(
        routes=[*pages.routes, *run_logs.routes, *seq_lookup.routes, *json_routes.routes,
                Route("/metrics", metrics, middleware=GZIPPED),
                Mount("/static", StaticFiles(directory=STATIC), name="static",
                      middleware=GZIPPED)],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts or LOOPBACK_NAMES),
                    Middleware(SafetyMiddleware, token=token)],
        exception_handlers={HTTPException: pages.http_error})
    app.state.dashboard = dashboard
    app.state.store = url  # the store asked for, if any: the rerun commands name it
    return app

