"""The dashboard with 10,000 runs in its store: latency of the runs page and the run page.

Usage: .venv/bin/python benchmarks/dashboard_scale.py [--runs 10000] [--requests 200]
           [--postgres URL] [--root DIR] [--out benchmarks/DASHBOARD_SCALE.md]
           [--json FILE] [--baseline FILE] [--against LABEL=PYTHONPATH ...] [--smoke]

Seeds a run store (SQLite under a temporary root, or `--postgres URL`, an empty database)
with `--runs` runs of four pipelines (benchmarks/scale_seed.py: written call by call through
RunWriter, as the recorder writes a run), then serves it with a real `seqline dashboard`
process on loopback and times, from this process over HTTP, `--requests` requests of each
page in turn (round-robin, so that a burst of load elsewhere on the machine falls on every
page alike): the runs page (first page, a deep page, filtered), the run page (old runs, the
newest runs, each request a run not read before, so that no cache answers it; and the newest
run again and again, as people reload it), the JSON under /api/ and, for reference, a stage
page. `--root DIR` keeps the store there and reuses it when it already holds the runs.

`--against LABEL=PYTHONPATH` serves the same store with another seqline source tree as well (a
folder holding a `seqline` package laid out as the Makefile's typecheck lays it out), and each
request goes to every server in turn: versions compared under the same load, which on a
shared machine moves more than any change does. On a kept store seeded by the older version,
its server starts first, before this checkout migrates the store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_report import machine, report  # noqa: E402 - benchmarks/ is not a package
from scale_seed import seed  # noqa: E402

from seqline.orchestration.store import RunStore  # noqa: E402
from seqline.orchestration.store.tables import metadata  # noqa: E402

SEQLINE = Path(sys.executable).parent / "seqline"
DEEP_PAGE = 100  # the deep page: the runs page's "older" link followed this many times
BEAT_SECONDS = 5.0  # the going runs' heartbeat (a recorder's flush is every 2 s; stale at 30)
# An <a rel="next"> (older runs) on the runs page; a Link header's rel="next" on /api/runs.
NEXT_LINK = re.compile(r'<a [^>]*rel="next"[^>]*href="([^"]+)"|<a [^>]*href="([^"]+)"[^>]*'
                       r'rel="next"')
RUN_IN_PATH = re.compile(r"(?<=runs/)[^/?]+")  # the run id in /runs/ID..., /api/runs/ID...


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dashboard(root: Path, url: str | None, log: Path,
              source: str | None = None) -> Iterator[str]:
    """`seqline dashboard` in a process of its own (as people run it), on a free port; with
    `source`, the seqline of another source tree (its PYTHONPATH: a `seqline` package)."""
    port = free_port()
    env = {**os.environ, **({"PYTHONPATH": source} if source else {})}
    with open(log, "w") as out:
        process = subprocess.Popen([str(SEQLINE), "dashboard", "--root", str(root), "--port",
                                    str(port), *(["--store", url] if url else [])],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the dashboard did not start: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.TransportError):
                httpx.get(base + "/static/VENDORED.txt", timeout=1)
                break
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def heartbeats(store: RunStore, run_ids: list[str]) -> Iterator[None]:
    """Keep the going runs alive while the pages are read, as their recorder would."""
    stop = threading.Event()

    def beat() -> None:
        while True:
            for run_id in run_ids:
                store.heartbeat(run_id)
            if stop.wait(BEAT_SECONDS):
                return

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def deep_link(http: httpx.Client, start: str, pages: int, api: bool) -> str | None:
    """The address reached by following the "older runs" link `pages` times from `start`;
    None when a page has no such link (a runs page that is not paged)."""
    path = start
    for _ in range(pages):
        answer = http.get(path)
        if api:
            found = answer.links.get("next", {}).get("url")
        else:
            match = NEXT_LINK.search(answer.text)
            found = (match.group(1) or match.group(2)).replace("&amp;", "&") if match else None
        if not found:
            return None
        path = found if found.startswith("/") else "/" + found.split("/", 3)[-1]
    return path


def cases(http: httpx.Client, ids: list[str], n: int) -> dict[str, list[str]]:
    """Each page measured, as the `n` addresses requested in turn ([] when the dashboard
    has no such page); `ids`: every run, newest first."""
    oldest, newest = ids[::-1][:n], ids[:n]
    deep = deep_link(http, "/", DEEP_PAGE, api=False)
    deep_api = deep_link(http, "/api/runs", DEEP_PAGE, api=True)
    return {
        "runs page, first": ["/"] * n,
        f"runs page, deep (older link x{DEEP_PAGE})": [deep] * n if deep else [],
        "runs page, status=failed": ["/?status=failed"] * n,
        "runs page, pipeline=churn": ["/?pipeline=churn"] * n,
        "runs page, status=running": ["/?status=running"] * n,
        "run page, old runs (each once)": [f"/runs/{r}" for r in oldest],
        "run page, newest runs (each once)": [f"/runs/{r}" for r in newest],
        "run page, the newest run, reloaded": [f"/runs/{ids[0]}"] * n,
        "/api/runs": ["/api/runs"] * n,
        f"/api/runs, deep (next link x{DEEP_PAGE})": [deep_api] * n if deep_api else [],
        "/api/runs?status=failed": ["/api/runs?status=failed"] * n,
        "/api/runs/ID, old runs": [f"/api/runs/{r}" for r in oldest],
        "/api/runs/ID, newest runs": [f"/api/runs/{r}" for r in newest],
        # every pipeline's first stage is `read`
        "stage page, old runs (reference)": [f"/runs/{r}/stages/read" for r in oldest],
    }


def measure(bases: dict[str, str], ids: list[str], n: int) -> dict[str, dict[str, Any]]:
    """Time every case's requests on each server ({label: base URL}), round-robin over cases
    and servers alike (so a burst of load elsewhere falls on all), after a warm-up: 10
    requests of each case, a run's pages on runs from the middle of the store (the measured
    ones stay unread). Returns {label: {case: figures}}."""
    headers = {"Accept-Encoding": "gzip"}  # as a browser asks
    middle = ids[len(ids) // 2:][:10]
    clients = {label: httpx.Client(base_url=base, timeout=60, headers=headers)
               for label, base in bases.items()}
    plans = {label: cases(http, ids, n) for label, http in clients.items()}
    for label, plan in plans.items():
        for paths in plan.values():
            for k, path in enumerate(paths[:10]):
                clients[label].get(path if len(set(paths)) == 1 else RUN_IN_PATH.sub(
                    middle[k % len(middle)], path, count=1))
    found: dict[str, dict[str, Any]] = {
        label: {name: {"path": paths[0] if paths else None, "seconds": [], "bytes": None,
                       "errors": []} for name, paths in plan.items()}
        for label, plan in plans.items()}
    for i in range(n):
        for name in plans[next(iter(plans))]:
            for label, plan in plans.items():
                paths, figures = plan[name], found[label][name]
                if i >= len(paths):
                    continue
                t0 = time.perf_counter()
                answer = clients[label].get(paths[i])
                figures["seconds"].append(time.perf_counter() - t0)
                figures["bytes"] = len(answer.content)
                if answer.status_code != 200:
                    figures["errors"].append(f"{paths[i]}: {answer.status_code}")
    for http in clients.values():
        http.close()
    return found


def store_size(store: RunStore, root: Path) -> tuple[dict[str, int], int]:
    """Rows per table, and the database's bytes (SQLite: the file and its WAL)."""
    with store.engine.connect() as conn:
        rows = {name: conn.execute(select(func.count()).select_from(table)).scalar_one()
                for name, table in metadata.tables.items()}
        if conn.dialect.name == "postgresql":
            size = conn.exec_driver_sql("SELECT pg_database_size(current_database())")
            return rows, int(size.scalar_one())
    return rows, sum(p.stat().st_size for p in root.glob("seqline.db*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200, help="per page measured")
    parser.add_argument("--postgres", help="an empty PostgreSQL database's URL")
    parser.add_argument("--root", type=Path, help="keep (and reuse) the store here")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "DASHBOARD_SCALE.md")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--baseline", type=Path, help="figures (--json) to show beside")
    parser.add_argument("--against", action="append", default=[], metavar="LABEL=PYTHONPATH",
                        help="also serve the store with another seqline source tree, "
                             "measured in turn with this one (a kept --root: started before "
                             "this checkout migrates the store, so an older one opens it)")
    parser.add_argument("--smoke", action="store_true", help="300 runs, 20 requests")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.requests = 300, 20
    with tempfile.TemporaryDirectory(prefix="seqline-scale-") as tmp, \
            contextlib.ExitStack() as servers:
        root = args.root or Path(tmp)
        others = dict(side.split("=", 1) for side in args.against)
        bases = {label: servers.enter_context(dashboard(root, args.postgres,
                                                        root / f"dashboard-{label}.log", path))
                 for label, path in others.items()} \
            if args.root and (args.root / "seqline.db").exists() else {}
        facts = run(args, root, bases, servers)
        if args.json:
            args.json.write_text(json.dumps(facts, indent=1, default=str))
        baseline = json.loads(args.baseline.read_text()) if args.baseline else None
        text = report(facts, baseline, root if args.root else None)
        args.out.write_text(text)
        print(text)


def run(args: argparse.Namespace, root: Path, bases: dict[str, str],
        servers: contextlib.ExitStack) -> dict[str, Any]:
    """Open (or seed) the store, serve it, measure: the figures for the report."""
    facts: dict[str, Any] = {"runs": args.runs, "requests": args.requests,
                             "database": "postgresql" if args.postgres else "sqlite"}
    t0 = time.perf_counter()
    store = RunStore.open(root, args.postgres)  # migrates a kept store to head
    facts["open_seconds"] = time.perf_counter() - t0
    held = len(store.list_runs(limit=args.runs))
    live: list[str] = []
    if held == 0:
        t0 = time.perf_counter()
        seeded = seed(store, args.runs)
        facts["seed_seconds"] = time.perf_counter() - t0
        facts["seeded"] = {k: dict(v) if isinstance(v, dict) else v
                           for k, v in vars(seeded).items()}
        live = seeded.live
    elif held < args.runs:
        raise SystemExit(f"{root} holds {held} runs, not {args.runs}: choose another root")
    else:  # a kept store's going runs were driven by a process now gone: interrupted
        facts["seed_seconds"] = None
    for label, path in dict(side.split("=", 1) for side in args.against).items():
        if label not in bases:  # a fresh store: seeded (and migrated) by this checkout
            bases[label] = servers.enter_context(dashboard(
                root, args.postgres, root / f"dashboard-{label}.log", path))
    facts["rows"], facts["store_bytes"] = store_size(store, root)
    facts["machine"], load = machine(), os.getloadavg()[0]
    with heartbeats(store, live), dashboard(root, args.postgres,
                                            root / "dashboard.log") as base:
        ids = [r["run_id"] for r in store.list_runs(limit=args.runs)]  # newest first
        sides = measure({**bases, "this": base}, ids, args.requests)
    facts["load"] = [load, os.getloadavg()[0]]
    facts["cases"] = sides.pop("this")
    facts["others"] = sides
    store.close()
    return facts


if __name__ == "__main__":
    main()
