"""Made for people, in Chromium: on a phone a failed run's error comes first and every stage
has a bar; times read as local times and how long ago; a run's options read as words; the
theme follows the system; keys move between runs and stages."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect

from seqline.orchestration.dashboard.run_facts import options_in_words
from seqline.orchestration.dashboard.timeline import MIN_BAR_UNITS
from tests.dashboard.conftest import EXE, Server, show

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# What sits above the run's live part on its page; the failure must come before all of it.
ABOVE = {"the log links": "#log-links", "the seq lookup": "form.lookup-form",
         "the hide toggle": "label.toggle"}


def _top(page, selector: str) -> float:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box["y"]


@pytest.mark.parametrize("width", [400, 1400])
def test_a_failed_runs_error_comes_first_and_its_stage_has_a_bar(server, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(server.url + "/runs/broken")
    error = _top(page, ".error-box.failure")
    for name, selector in ABOVE.items():
        assert error < _top(page, selector), f"the error is below {name} at {width} px"
    shown = page.locator("svg:visible", has=page.locator("g.tl-row"))
    expect(shown).to_have_count(1)  # the narrow timeline on a phone, the wide one else
    assert shown.get_attribute("class") == ("timeline-narrow" if width == 400 else "timeline")
    bar = shown.locator("g.tl-row[data-stage=read] rect.tl-bar")
    expect(bar).to_be_visible()
    assert float(bar.get_attribute("width")) >= MIN_BAR_UNITS
    drawn = bar.bounding_box()
    assert drawn is not None and drawn["width"] >= 4, drawn
    # on the screen, not past its edge in a box that scrolls (the run's 20 ms of set-up
    # before its one stage put a 640 px timeline's bar at 450 px)
    assert drawn["x"] + drawn["width"] <= width, drawn
    assert not page.evaluate("document.documentElement.scrollWidth > innerWidth")
    assert page.problems == []


# About 8 s of blocks on 2 workers (19 of 0.8 s), then a failure at seq 190: watched while
# it runs, on a machine loaded enough that a page takes seconds to open.
FAILS_LATER = """\
name: fails_later
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 10}}
  - {name: work, component: preprocess,
     params: {fn: "latency:boom_at", fn_kwargs: {seq: 190, base_ms: 800, slow_every: 1000}}}
"""


def test_a_run_failing_while_watched_shows_its_error_first_without_a_reload(folder, tmp_path,
                                                                             page):
    (folder / "fails_later.yaml").write_text(FAILS_LATER)
    driver = subprocess.Popen([EXE, "run", str(folder / "fails_later.yaml"), "--root",
                               str(tmp_path / "root"), "--run-id", "watched"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = None
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "root" / "seqline.db").exists():  # the dashboard needs it
            assert time.monotonic() < deadline, "the run never made its store"
            time.sleep(0.1)
        running = Server(tmp_path / "root")
        while httpx.get(running.url + "/api/runs/watched").status_code != 200:
            assert time.monotonic() < deadline, "the run never reached the store"
            time.sleep(0.2)
        page.set_viewport_size({"width": 400, "height": 900})
        page.goto(running.url + "/runs/watched")
        expect(page.locator("#live")).to_have_attribute("data-status", "running")
        page.evaluate("window.notReloaded = true")
        error = page.locator("#live-failure .error-box")
        expect(error).to_contain_text("seq 190", timeout=60_000)  # the stream's update
        assert page.evaluate("window.notReloaded") is True
        assert _top(page, "#live-failure") < _top(page, "#log-links")
    finally:
        driver.wait(timeout=120)
        if running is not None:
            running.stop()
    assert page.problems == []


def test_times_read_as_local_times_and_how_long_ago(server, page):
    page.goto(server.url + "/")
    started = page.locator("table.runs td.started time").first
    expect(started).to_have_text(re.compile(r"^(just now|\d+ (s|min|h|days) ago)$"))
    tooltip = started.get_attribute("title") or ""
    # The local time, in full ("yesterday" for a run of the root made before midnight).
    assert re.search(r"(today|yesterday) \d\d:\d\d:\d\d", tooltip), tooltip
    assert "UTC" in tooltip  # and the stored stamp
    page.goto(server.url + "/runs/demo-a")
    summary = page.locator("#live .summary time").first
    expect(summary).to_have_text(
        re.compile(r"^(today|yesterday) \d\d:\d\d:\d\d, (just now|.+ ago)$"))
    stamp = datetime.fromisoformat(summary.get_attribute("datetime"))
    day, hour, minute = page.evaluate(
        "iso => { const d = new Date(iso), now = new Date(); return [d.toDateString() === "
        "now.toDateString() ? 'today' : 'yesterday', d.getHours(), d.getMinutes()]; }",
        stamp.astimezone(UTC).isoformat())
    assert summary.inner_text().startswith(f"{day} {hour:02d}:{minute:02d}")
    assert "T" not in page.locator("#live .summary").inner_text()  # no ISO stamp left
    assert page.problems == []


def test_a_runs_options_read_as_words(server, page):
    page.goto(server.url + "/runs/demo-a")
    runner = page.locator("table.facts tr", has_text="runner").last
    expect(runner).to_contain_text("local: 2 workers · 8 blocks in flight per stage (4 per "
                                   "worker), up to 64 behind a slow block · 4 blocks queued "
                                   "between stages · stages overlap · cache on")
    assert "=" not in runner.inner_text()
    assert page.problems == []


@pytest.mark.parametrize(("options", "runner", "words"), [
    ({"workers": 1, "window": 3, "cache": False, "overlap": False}, "local",
     ["1 worker", "up to 3 blocks in flight per stage", "one stage after another",
      "cache off (--no-cache)"]),
    ({"workers": 2, "mode": "in_memory", "options": ["--direct_num_workers=2"]}, "beam",
     ["2 workers", "Beam in in memory mode", "Beam option --direct_num_workers=2"]),
    ({"workers": 4, "address": "ray://head:10001", "working_dir": "/p"}, "ray",
     ["4 workers", "Ray cluster at ray://head:10001"]),
    ({"workers": 2, "something_new": 7}, "local", ["2 workers", "something new: 7"]),
    (None, "local", []),
])
def test_options_in_words(options, runner, words):
    assert options_in_words(options, runner) == words


def test_dark_theme_follows_the_system_and_colours_the_charts(server, page):
    colours = {}
    for scheme in ("light", "dark"):
        show(page, server.url + "/runs/demo-a", 1400, scheme)
        colours[scheme] = page.evaluate("""() => [getComputedStyle(document.body).backgroundColor,
            document.querySelector('#chart-rate').uplot.series[1].stroke()]""")
    assert colours["light"][0] == "rgb(255, 255, 255)"
    assert colours["dark"][0] != colours["light"][0]
    assert colours["dark"][1] != colours["light"][1]  # read from the theme's CSS variables
    assert page.problems == []




def _press(page, key: str) -> None:
    """A key, once the page's scripts listen (a key pressed while it loads is lost)."""
    page.wait_for_load_state("load")
    page.keyboard.press(key)


def test_keys_move_between_runs_and_stages(server, page):
    page.goto(server.url + "/")
    _press(page, "j")
    expect(page.locator("table.runs tbody tr.selected")).to_have_count(1)
    newest = page.locator("table.runs tbody tr.selected td a").first.inner_text()
    _press(page, "Enter")
    expect(page.locator("h1")).to_have_text(f"Run {newest}")
    page.goto(server.url + "/runs/demo-a")
    _press(page, "j")
    _press(page, "j")  # the second stage
    _press(page, "Enter")
    stage = page.locator("h1 .stage-name")
    for key, name in (("", "examples"), ("]", "features"), ("[", "examples"), ("[", "read")):
        if key:
            _press(page, key)
        expect(stage).to_have_text(name)
    _press(page, "u")
    expect(page.locator("h1")).to_have_text("Run demo-a")
    assert page.problems == []
