"""The dashboard under load: 50 clients (page loads and live streams) while a 1M-row run goes.

Usage: .venv/bin/python benchmarks/dashboard.py [--smoke] [--rows 1000000] [--clients 50]
                                               [--repeats 2]

Each repeat runs the 1M-row data job (benchmarks/data_stages.py's data: ingest ->
tfrecord_write -> preprocess) twice through `seqline.Pipeline.run`, alternately with no page
open and with `--clients` simulated browsers on its run page, served by a real `seqline
dashboard` process. A simulated browser does what dashboard.js does: it loads a page (the run
page or one of its stage pages) and follows its event stream for 5-15 s, decoding each pushed
update (HTML and new samples), then opens the next page; once the run ended it loads the page
and its chart data. Figures: p50/p95 latency of page loads and chart data; the live-update delay
(a sample written to the store -> the new number in a pushed update, probed every 2.5 s
on a run of its own while the load goes); the run's slowdown (median wall with clients ÷
without); the run page's weight in bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_stages import _generate  # noqa: E402 - the same generated data as the data bench

import seqline  # noqa: E402
from seqline.orchestration.store import RunStore  # noqa: E402

SEQLINE = Path(sys.executable).parent / "seqline"
# How long a simulated browser stays on a page before opening another: 5-15 s, seeded per
# browser, so that fifty people do not all click at the same instant.
FOLLOW_SECONDS = (5.0, 15.0)
PROBE_SECONDS = 2.5  # how often the live-update probe writes a sample


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _timed(http: httpx.AsyncClient, path: str, kind: str,
                 latencies: dict[str, list[float]], errors: list[str]) -> str:
    start = time.perf_counter()
    try:
        answer = await http.get(path)
    except httpx.HTTPError as exc:
        errors.append(f"{path}: {type(exc).__name__}")
        return ""
    latencies[kind].append(time.perf_counter() - start)
    if answer.status_code != 200:
        errors.append(f"{path}: {answer.status_code}")
    return answer.text


async def _browser(http: httpx.AsyncClient, run_id: str, stages: list[str], k: int,
                   latencies: dict[str, list[float]], errors: list[str]) -> None:
    """One simulated browser, until the run ends: open a page, then follow its stream."""
    visit, pace = k, random.Random(k)
    await asyncio.sleep(pace.uniform(0, 2))  # people open the page over a couple of seconds
    while True:
        stage = stages[visit % (len(stages) + 1) - 1] if visit % (len(stages) + 1) else None
        visit += 1
        page = f"/runs/{run_id}" + (f"/stages/{stage}" if stage else "")
        html = await _timed(http, page, "page", latencies, errors)
        if 'data-live="on"' not in html:  # an ended run's page fetches its chart data
            data = f"/api/runs/{run_id}" + (f"/stages/{stage}/samples" if stage else "/samples")
            await _timed(http, data, "data", latencies, errors)
            return
        if await _follow(http, page + "/events" if stage else f"/runs/{run_id}/events",
                         pace.uniform(*FOLLOW_SECONDS), latencies, errors):
            return


async def _follow(http: httpx.AsyncClient, events: str, seconds: float,
                  latencies: dict[str, list[float]], errors: list[str]) -> bool:
    """Follow a page's stream for `seconds`, decoding each update as the page does; True
    when the run ended."""
    deadline = time.monotonic() + seconds
    try:
        async with http.stream("GET", events) as stream:
            event = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "update":
                    latencies["update bytes"].append(len(line))
                    json.loads(line[6:])
                elif line.startswith("data: ") and event == "end":
                    return True
                if time.monotonic() > deadline:
                    return False
    except httpx.HTTPError as exc:
        errors.append(f"stream: {type(exc).__name__}")
    return False


async def _probe(http: httpx.AsyncClient, root: Path, stop: asyncio.Event,
                 delays: list[float]) -> None:
    """Write samples to a run of its own; time until the fetched fragment shows each one."""
    with RunStore.open(root) as store:
        run_id = f"probe-{os.getpid()}"
        store.create_run(run_id, "probe", pipeline_file=None, fingerprint=None, runner="local",
                         options={})
        stage_run = store.start_stage(run_id, "work", "preprocess", params={}, cache_key=None)
        n = 0
        async with http.stream("GET", f"/runs/{run_id}/events") as stream:
            lines = stream.aiter_lines()
            while not stop.is_set():
                await asyncio.sleep(PROBE_SECONDS)
                n += 1
                written = time.perf_counter()
                store.add_samples([{"stage_run_id": stage_run, "t": time.time(),
                                    "records_done": 1_000_000 + n, "rows_per_s": 1.0,
                                    "waited_input": 0.0, "waited_output": 0.0, "in_flight": 1,
                                    "reorder_held": 0}])
                store.heartbeat(run_id)
                shown = f"{1_000_000 + n:,}"
                while True:  # until an update's HTML shows the number
                    line = await asyncio.wait_for(anext(lines), timeout=10)
                    if line.startswith("data: ") and shown in json.loads(line[6:]).get(
                            "html", ""):
                        delays.append(time.perf_counter() - written)
                        break
        store.finish_run(run_id, "succeeded")


async def _load(url: str, run_id: str, clients: int, root: Path) -> dict[str, Any]:
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    delays: list[float] = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    limits = httpx.Limits(max_connections=clients * 3 + 10)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        while True:  # the run's row appears when its driver starts
            found = await http.get(f"/api/runs/{run_id}")
            if found.status_code == 200 and len(found.json()["stages"]) >= 3:
                break
            await asyncio.sleep(0.05)
        stages = [s["name"] for s in found.json()["stages"]]
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(http, root, stop, delays))
        await asyncio.gather(*(_browser(http, run_id, stages, k, latencies, errors)
                               for k in range(clients)))
        stop.set()
        await probe
    used = resource.getrusage(resource.RUSAGE_SELF)
    return {"latencies": latencies, "errors": errors, "delays": delays,
            "load_cpu_s": used.ru_utime + used.ru_stime - before.ru_utime - before.ru_stime}


async def _idle_pages(url: str, run_id: str, clients: int) -> list[float]:
    """`clients` people at once, each opening 5 pages of a finished run in turn: the
    baseline with no run going."""
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    pages = [f"/runs/{run_id}", f"/runs/{run_id}/stages/features", "/"]
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 limits=httpx.Limits(max_connections=clients)) as http:
        async def person(k: int) -> None:
            for i in range(5):
                await _timed(http, pages[(k + i) % 3], "page", latencies, errors)

        await asyncio.gather(*(person(k) for k in range(clients)))
    assert not errors, errors
    return latencies["page"]


def page_weight(url: str, run_id: str) -> dict[str, int]:
    """Bytes a first visit to the run page downloads: the page, its assets, its chart data."""
    page = httpx.get(f"{url}/runs/{run_id}", headers={"Accept-Encoding": "identity"}).text
    assets = ["/static/" + name for name in ("uPlot.min.css", "dashboard.css", "htmx.min.js",
                                             "uPlot.iife.min.js", "dashboard.js")]
    paths = [f"/runs/{run_id}", *assets, f"/api/runs/{run_id}/samples"]
    assert all(a in page for a in assets), "the page's assets changed: update page_weight"
    sizes = {}
    for encoding in ("identity", "gzip"):
        total = 0
        for path in paths:
            with httpx.stream("GET", url + path, headers={"Accept-Encoding": encoding}) as r:
                r.read()
                total += r.num_bytes_downloaded
        sizes[encoding] = total
    sizes["html"] = len(page.encode())
    return sizes


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to keep this working")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--nice-browsers", action="store_true",
                        help="run the simulated browsers at nice 19, so that they take only the "
                             "CPU the run leaves (as browsers on other machines would)")
    parser.add_argument("--load", nargs=4, metavar=("URL", "RUN_ID", "CLIENTS", "ROOT"),
                        help=argparse.SUPPRESS)  # the load generator's own process
    args = parser.parse_args()
    if args.load:
        url, run_id, clients, root = args.load
        print("ready", flush=True)  # imports done: people open their browsers before a run
        print(json.dumps(asyncio.run(_load(url, run_id, int(clients), Path(root)))))
        return
    rows, clients, repeats = (20_000, 5, 1) if args.smoke else (args.rows, args.clients,
                                                                 args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        folder, root = Path(tmp), Path(tmp) / "root"
        pipeline = seqline.Pipeline.from_yaml(_generate(folder / "data", rows))
        pipeline.run(root=root, run_id="warm", cache=False, verify=False)  # page cache, imports
        port = free_port()
        server = subprocess.Popen([str(SEQLINE), "dashboard", "--root", str(root), "--port",
                                   str(port)], stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                httpx.get(url + "/api/runs", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        try:
            quiet, loaded, reports = _alternate(pipeline, root, url, clients, repeats,
                                                psutil.Process(server.pid), args.nice_browsers)
            weight = page_weight(url, "r1")
            idle = asyncio.run(_idle_pages(url, "r1", clients))
        finally:
            server.terminate()
            server.wait(timeout=10)
    _print(rows, clients, quiet, loaded, reports, weight)
    print(f"page loads with no run going: {clients} clients at once, p50 "
          f"{_pct(idle, 0.5):.1f} ms, p95 {_pct(idle, 0.95):.1f} ms ({len(idle)} requests)")


def _alternate(pipeline: Any, root: Path, url: str, clients: int, repeats: int,
               server: psutil.Process, nice: bool
               ) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    quiet: list[float] = []
    loaded: list[float] = []
    reports = []
    for i in range(repeats * 2):
        run_id = f"r{i}"
        load = None
        if i % 2:
            # --nice-browsers: the simulated browsers take only the CPU the run leaves, as
            # browsers on other machines would (nice execs python: the pid is the load's)
            niced = ["nice", "-n", "19"] if nice else []
            load = subprocess.Popen([*niced, sys.executable, __file__, "--load", url, run_id,
                                     str(clients), str(root)], stdout=subprocess.PIPE, text=True)
            # The load process's start-up (1 CPU-s of imports) is not the dashboard's cost:
            # the run starts once it is ready, as a run starts with the browsers already open.
            assert load.stdout is not None and load.stdout.readline() == "ready\n"
        cpu = sum(server.cpu_times()[:2])
        meter = _RunCpu(exclude={server.pid, load.pid if load else -1})
        start = time.perf_counter()
        pipeline.run(root=root, run_id=run_id, cache=False, verify=False)
        (loaded if load else quiet).append(time.perf_counter() - start)
        run_cpu = meter.stop()
        if load is not None:
            out, _ = load.communicate(timeout=120)
            reports.append({**json.loads(out), "run_cpu_s": run_cpu,
                            "server_cpu_s": sum(server.cpu_times()[:2]) - cpu})
    return quiet, loaded, reports


class _RunCpu:
    """CPU seconds of this process and its descendants (the run's forkserver workers) while
    a run goes, read every 0.2 s so workers that exit are still counted."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.seen: dict[int, float] = {}
        self.before = self._read()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _read(self) -> dict[int, float]:
        me = psutil.Process()
        found = {}
        for p in [me, *me.children(recursive=True)]:
            if p.pid not in self.exclude:
                with contextlib.suppress(psutil.Error):  # it exited meanwhile
                    found[p.pid] = sum(p.cpu_times()[:2])
        return found

    def _loop(self) -> None:
        while not self.done.wait(0.2):
            self.seen.update(self._read())

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        self.seen.update(self._read())
        return sum(t - self.before.get(pid, 0.0) for pid, t in self.seen.items())


def _print(rows: int, clients: int, quiet: list[float], loaded: list[float],
           reports: list[dict[str, Any]], weight: dict[str, int]) -> None:
    latencies: dict[str, list[float]] = defaultdict(list)
    for report in reports:
        for kind, values in report["latencies"].items():
            latencies[kind].extend(values)
    errors = [e for r in reports for e in r["errors"]]
    delays = [d for r in reports for d in r["delays"]]
    print(f"{rows:,}-row data job, {len(quiet)} run(s) each way; {clients} simulated browsers")
    print(f"run wall (median s): no page open {statistics.median(quiet):.2f}, with "
          f"{clients} clients {statistics.median(loaded):.2f}, slowdown "
          f"{statistics.median(loaded) / statistics.median(quiet) - 1:+.1%} (target <= 5 %)"
          f"  [each: {', '.join(f'{w:.2f}' for w in quiet)} / "
          f"{', '.join(f'{w:.2f}' for w in loaded)}]")
    for kind in ("page", "data"):
        values = latencies[kind]
        print(f"{kind:9s} {len(values):6d} requests  p50 {_pct(values, 0.5):7.1f} ms  "
              f"p95 {_pct(values, 0.95):7.1f} ms  max {_pct(values, 1.0):7.1f} ms")
    pushed = latencies["update bytes"]
    print(f"updates pushed: {len(pushed)}, median {statistics.median(pushed or [0]):,.0f} "
          "bytes each (HTML + new samples)")
    print(f"errors: {len(errors)} {errors[:5] if errors else ''}")
    if delays:
        print(f"live-update delay (store write -> the number in a pushed update), "
              f"{len(delays)} probes: "
              f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s (bound 2 s)")
    cpu = ", ".join(f"{r['load_cpu_s']:.1f}" for r in reports)
    served = ", ".join(f"{r['server_cpu_s']:.1f}" for r in reports)
    runs = ", ".join(f"{r['run_cpu_s']:.1f}" for r in reports)
    share = statistics.median(r["server_cpu_s"] / r["run_cpu_s"] for r in reports)
    print(f"CPU seconds during the loaded runs: the run {runs}; dashboard server {served}; "
          f"load generator {cpu} (all on the same 2 cores)")
    print(f"the dashboard's CPU / the run's CPU: {share:.1%} (median) = the slowdown of a run "
          "that keeps every core busy, with the browsers on other machines")
    # The server's work goes with the time pages are open (polls, pushes, page loads), the
    # run's with its rows: when other jobs stretch a run, the share above grows with them.
    # Per second of loaded run it does not (compare batches by this one).
    per_s = sum(r["server_cpu_s"] for r in reports) / sum(loaded)
    print(f"the dashboard's CPU per second of a loaded run: {per_s * 1000:.0f} ms "
          f"({len(latencies['page'])} page loads, {len(pushed)} pushed updates)")
    print(f"run page weight (first visit: HTML, CSS, JS, chart data): {weight['identity']:,} "
          f"bytes, {weight['gzip']:,} gzipped; the HTML alone {weight['html']:,}")


if __name__ == "__main__":
    main()
