"""Fixtures: real runs made with the `seqline` CLI, a real dashboard server, Debian's Chromium."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from tests import commands
from tests.commands import EXE
from tests.conftest import REPO, USERFNS

CHROMIUM = os.environ.get("SEQLINE_CHROMIUM", "/usr/lib/chromium/chromium")
DEMO = REPO / "data" / "seattle_weather"

# A stage name and a bad CSV row that are markup: both must show as text on every page.
XSS = "<script>alert(1)</script>"
SMALL = f"""\
name: small
errors: {{max_fraction: 0.5}}
stages:
  - {{name: "{XSS}", component: ingest,
     params: {{format: csv, paths: [bad.csv], schema: {{x: int64}}}}}}
"""
FAILING = """\
name: failing
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [bad.csv], schema: {x: int64}}}
"""
# About 6 s of preprocessing: 20 blocks of 10 rows, each sleeping ~0.6 s on 2 workers.
SLOW = """\
name: slow
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 10}}
  - {name: work, component: preprocess,
     params: {fn: "latency:skewed", fn_kwargs: {base_ms: 600, slow_every: 1000}}}
"""


# The demo's features function, failing on one day (seq 700): its run fails in features,
# and the stages after it do not run because of that (a cascade).
BAD_FEATURES = '''\
import pyarrow.compute as pc

from features import add_columns as good


def add_columns(batch):
    if pc.any(pc.equal(batch.column("__seq__"), 700)).as_py():
        raise ValueError("a day the feature code cannot take")
    return good(batch)
'''
# A page is shown once every chart on it has drawn.
ALL_DRAWN = "() => [...document.querySelectorAll('.chart')].every(c => c.dataset.drawn)"


# Full-page pictures of every page, for people to look at (never the repo): `make screenshots`
# asks for them. Without, the suite renders and checks the same pages: encoding the pictures
# was ~12 of Chromium's CPU-seconds in the suite, for files nobody opened there.
SHOTS = REPO / "build" / "screenshots"


def keep_screenshot(page, name: str) -> None:
    """The page as it is shown now, full length, into build/screenshots/NAME.png, when
    SEQLINE_SCREENSHOTS is set (`make screenshots` sets it)."""
    if os.environ.get("SEQLINE_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def show(page, url: str, width: int, scheme: str) -> None:
    """`url` in Chromium at `width` px in the `scheme` theme, its charts drawn."""
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    page.goto(url)
    page.wait_for_function(ALL_DRAWN, timeout=10_000)


def seqline(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real CLI; fail the test with its stderr if it fails."""
    return commands.seqline(*args, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def folder(tmp_path_factory) -> Path:
    """Pipelines and their inputs: the small one (markup in names and rows), a failing one,
    a slow one."""
    path = tmp_path_factory.mktemp("pipelines")
    (path / "bad.csv").write_text(f"x\n1\n2\n{XSS}\n4\n")
    (path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(200)))
    (path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (path / "small.yaml").write_text(SMALL)
    (path / "failing.yaml").write_text(FAILING)
    (path / "slow.yaml").write_text(SLOW)
    return path


@pytest.fixture(scope="session")
def root(tmp_path_factory, folder) -> Path:
    """An artifact root with real runs: the demo twice (the second from the cache), the small
    pipeline (a dead letter) and a failed run."""
    path = tmp_path_factory.mktemp("root")
    for run_id in ("demo-a", "demo-b"):
        done = seqline("run", str(DEMO / "pipeline.yaml"), "--root", str(path), "--run-id",
                       run_id)
        assert done.returncode == 0, done.stderr
    done = seqline("run", str(folder / "small.yaml"), "--root", str(path), "--run-id", "small")
    assert done.returncode == 0, done.stderr
    done = seqline("run", str(folder / "failing.yaml"), "--root", str(path), "--run-id", "broken")
    assert done.returncode == 1, done.stderr
    return path


class Server:
    """`seqline dashboard` in a process of its own, on a free loopback port."""

    def __init__(self, root: Path | str, *extra: str, logs: Path | None = None) -> None:
        """`root`: a folder or a URL; `logs`: where its log goes (default: beside a local
        root; a URL root needs one)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # read when a test fails
        self.log = (logs or Path(root).parent) / f"dashboard-{self.port}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [EXE, "dashboard", "--root", str(root), "--port", str(self.port), *extra],
                stdout=log, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"dashboard exited: {self.log.read_text()}")
            try:
                httpx.get(self.url + "/static/VENDORED.txt", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("dashboard did not answer within 30 s")

    def stop(self) -> float:
        """SIGTERM, as a service manager would; returns how long it took to exit."""
        start = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return time.monotonic() - start


@pytest.fixture(scope="session")
def server(root) -> Iterator[Server]:
    running = Server(root)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium through Playwright (never `playwright install`: its CDN is offline)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium is not at {CHROMIUM}: `make chromium` installs Debian's, or set "
                    "SEQLINE_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A fresh page that records console errors, script errors, dialogs (an injected
    `alert`) and any request to a host other than 127.0.0.1 (which it also blocks)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
              if m.type == "error" else None)
    opened.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    opened.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))

    def guard(route) -> None:
        url = route.request.url
        if url.startswith("data:") or urlparse(url).hostname == "127.0.0.1":
            route.continue_()
        else:
            problems.append(f"request left 127.0.0.1: {url}")
            route.abort()

    opened.route("**/*", guard)
    opened.problems = problems
    yield opened
    context.close()
