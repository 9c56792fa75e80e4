"""`seqline dashboard`: serve the live pages, the JSON and /metrics of a run store."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Annotated

import typer

from seqline.orchestration.cli.options import RootUrl, Store, fail, missing_store, say
from seqline.orchestration.environment import DEFAULT_ROOT

__all__ = ["dashboard"]

# uvicorn waits for open streams before it stops; a live page keeps one open for as long as
# its run goes, so Ctrl-C or SIGTERM would hang. 2 s lets answers in progress finish.
GRACEFUL_SECONDS = 2


def dashboard(
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    host: Annotated[str, typer.Option(help="Address to listen on. Anything but loopback "
                                           "needs --token-file.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8765,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="A file holding a secret token; then every request must carry "
                             "it (?token=… once in the browser, or Authorization: Bearer …).")
    ] = None,
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Another name the dashboard is reached by (its Host header); "
                             "repeatable. Other names get 400.")] = None,
) -> None:
    """Serve the dashboard: every run and stage, live; JSON under /api/; Prometheus /metrics.

    Read-only, loopback by default. Example: seqline dashboard --root .seqline (or
    --root s3://bucket/prefix), then open http://127.0.0.1:8765/.
    """
    from seqline.orchestration.dashboard.security import is_loopback
    from seqline.orchestration.store.errors import StoreFailed
    from seqline.pipeline.errors import SeqlineError
    from seqline.pipeline.storage import open_root

    token = _read_token(token_file) if token_file is not None else None
    if token is None and not is_loopback(host):
        fail(f"--host {host} would show every run to the network without a token; pass "
             "--token-file FILE (e.g. `openssl rand -hex 32 > FILE`), or keep --host 127.0.0.1")
    try:  # loaded here: the core CLI must not need the `dashboard` extra
        import uvicorn

        from seqline.orchestration.dashboard.app import allowed_hosts, create_app
    except ImportError as exc:
        fail(f"the dashboard needs its extra ({exc.name} is missing); "
             "pip install 'seqline[dashboard]'")
    try:  # a bad URL, credentials in it, a missing bucket, a bad store: before serving
        place = open_root(root)
        absent = missing_store(place, store)
        if absent is not None:  # read-only: it never makes a store of its own
            fail(f"no run store at {absent}; run `seqline run` with this --root first, or "
                 "pass the --root (or --store) of an existing one")
        app = create_app(place, store, token=token, hosts=allowed_hosts(host, allow_host))
    except StoreFailed as exc:  # its disk: nothing to fix in the command
        fail(str(exc), 1)
    except SeqlineError as exc:  # ConfigError from open_root, a store not reached or newer
        fail(str(exc))
    listening = _listen(host, port)
    port = listening.getsockname()[1]  # --port 0: the one the system chose
    shown = f"[{host}]" if ":" in host else host
    say(f"seqline dashboard on http://{shown}:{port}/ (read-only; Ctrl-C stops it)")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", http=_http_parser(),
                            timeout_graceful_shutdown=GRACEFUL_SECONDS, server_header=False)
    uvicorn.Server(config).run(sockets=[listening])


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound here, so a port in use is one line naming it (uvicorn would
    log its own `ERROR: [Errno 98]` and exit 3), and no other process can take it between a
    check and the server's start."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets
    # whose proto says TCP, and an accepted socket inherits the listener's. With Nagle on,
    # an answer written as headers then body waited for the client's delayed ACK: every
    # request after the first on a kept-alive connection took 40-50 ms more (0.5 ms now).
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # As uvicorn binds: a port whose last server just stopped (TIME_WAIT) can be bound again;
    # one with a server listening cannot.
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            fail(f"port {port} on {host} is in use (another dashboard?); pass another "
                 f"--port, e.g. --port {port + 1}, or stop what listens there")
        fail(f"cannot listen on {host}:{port} ({exc.strerror}); pass another --host or "
             "--port")
    # Listening from now on: a browser opened on the line printed next waits in the backlog
    # until the server accepts, instead of being refused while it starts.
    listening.listen()
    return listening


def _http_parser() -> str:
    """httptools (C) when installed: it parses a request in a fraction of h11's CPU, and with
    fifty pages open that CPU is taken from the run. h11 (pure Python) otherwise."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


def _read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        fail(f"cannot read --token-file {path} ({exc.strerror}); give a file this user can "
             "read")
    if len(token) < 16:  # a short token can be guessed over the network
        fail(f"the token in {path} is {len(token)} characters; use at least 16 "
             "(e.g. `openssl rand -hex 32 > FILE`)")
    return token
