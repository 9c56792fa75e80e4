"""The dashboard in headless Chromium: real runs, charts drawn, live updates, nothing unsafe."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from seqline.orchestration.store import RunStore
from tests.dashboard.conftest import (
    ALL_DRAWN,
    BAD_FEATURES,
    DEMO,
    EXE,
    SHOTS,
    XSS,
    Server,
    keep_screenshot,
    seqline,
    show,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# Every page at every width and theme, for people to look at; never written into the repo
# by a test run. `make screenshots` points DOCS_IMAGES at docs/img to renew the README's.
DOCS_IMAGES = Path(os.environ.get("SEQLINE_DOCS_IMAGES") or SHOTS / "docs")


def drawn(page, selector: str) -> int:
    """How many pixels of the chart's canvas are not blank: 0 means nothing was drawn."""
    page.wait_for_selector(f"{selector} canvas", timeout=10_000)
    return page.eval_on_selector(f"{selector} canvas", """c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i] !== 0) n++; } return n; }""")


def test_runs_page_lists_runs_and_the_grid(server, root, page):
    # the runs the store holds: the root's four, and any that tests sharing it added before
    runs = json.loads(seqline("runs", "list", "--root", str(root), "--json").stdout)
    failed = [r for r in runs if r["status"] == "failed"]
    assert len(runs) >= 4 and len(failed) >= 1
    page.goto(server.url + "/")
    expect(page.locator("table.runs tbody tr")).to_have_count(len(runs))
    expect(page.locator("table.grid td.cell.st-failed").first).to_be_visible()
    expect(page.locator("table.grid td.cell.st-cached").first).to_be_visible()
    page.select_option("select[name=status]", "failed")  # htmx swaps the table in place
    expect(page.locator("table.runs tbody tr")).to_have_count(len(failed))
    expect(page.locator("table.runs")).to_contain_text("broken")
    assert "status=failed" in page.url
    assert page.problems == []


def test_run_page_shows_the_line_charts_and_evaluation(server, page):
    page.goto(server.url + "/runs/demo-a")
    expect(page.locator("#live .summary .status")).to_have_text("succeeded")
    expect(page.locator("svg.timeline rect.tl-bar")).to_have_count(6)
    expect(page.locator(".bottleneck")).to_have_text("model")
    expect(page.locator("table.stages tbody tr.stage-row")).to_have_count(6)
    expect(page.locator(".blessing")).to_contain_text("blessed")
    assert drawn(page, "#chart-rate") > 1000
    assert drawn(page, "#chart-occupancy") > 1000
    page.check("#hide-finished")
    expect(page.locator("table.stages tr.stage-row").first).to_be_hidden()
    assert "hide=finished" in page.url  # kept in the address
    page.uncheck("#hide-finished")
    assert "hide=finished" not in page.url
    assert page.problems == []


def _seconds(text: str) -> float:
    """"12.30 s" -> 12.3; "1 min 7 s" -> 67.0 (a loaded machine's demo run takes minutes)."""
    minutes, _, rest = text.removesuffix(" s").rpartition(" min ")
    return 60 * float(minutes or 0) + float(rest)


def test_the_timeline_draws_the_waits_the_table_shows(server, page):
    page.goto(server.url + "/runs/demo-a")
    row = page.locator("tr.stage-row[data-stage=evaluation]")
    waited, seconds = (_seconds(row.locator(f"td.{c}").inner_text())
                       for c in ("waited-in", "seconds"))
    assert waited > seconds / 2  # evaluation waits for the model most of the run
    drawn = page.eval_on_selector_all(
        "g.tl-row[data-stage=evaluation] rect",
        "rects => rects.map(r => [r.dataset.state, r.getBBox().width])")
    bar = sum(w for state, w in drawn if state == "working")
    waits = sum(w for state, w in drawn if state == "input")
    # The share of its bar drawn waiting is the table's, within one sampling interval (1 s).
    assert waits / bar == pytest.approx(waited / seconds, abs=1.0 / seconds)
    assert page.problems == []


def test_the_blocks_chart_peaks_where_the_table_does(server, page):
    page.goto(server.url + "/runs/demo-a")
    page.wait_for_selector("#chart-occupancy canvas")
    peaks = page.evaluate("""() => { const u = document.querySelector('#chart-occupancy').uplot;
        return Object.fromEntries(u.series.slice(1).map((s, i) =>
            [s.label, Math.max(0, ...u.data[i + 1].filter(v => v !== null))])); }""")
    checked = 0
    for name in ("read", "examples", "features"):
        for cell, label in (("in-flight", "in flight"), ("reorder-held", "held")):
            shown = page.locator(f"tr.stage-row[data-stage={name}] td.{cell}").inner_text()
            if shown:  # "6 max"
                assert peaks[f"{name} {label}"] == int(shown.removesuffix(" max"))
                checked += 1
    assert checked >= 2  # examples and features keep blocks in flight
    assert page.problems == []


def _tick_labels(page, chart: str, axis: int) -> list[str]:
    """The labels uPlot drew on an axis (its `_values`: the canvas holds no text to read)."""
    page.wait_for_selector(f"{chart} canvas")
    return page.evaluate(f"document.querySelector('{chart}').uplot.axes[{axis}]._values")


def test_the_throughput_chart_draws_slow_stages_above_its_floor(server, page):
    """On a linear axis a trainer's records/s beside an ingest's, orders of magnitude apart,
    read as nothing done; such rates share a log-like axis (asinh: 0 stays at the floor),
    each stage's peak a visible height, the ticks powers of ten."""
    page.goto(server.url + "/runs/demo-a")
    page.wait_for_selector("#chart-rate canvas")
    drawn = page.evaluate("""() => { const u = document.querySelector('#chart-rate').uplot;
        const peaks = u.data.slice(1).map(c => Math.max(0, ...c.filter(v => v !== null)));
        const floor = u.valToPos(0, 'y'), top = u.valToPos(u.scales.y.max, 'y');
        return {distr: u.scales.y.distr, label: u.axes[1].label, peaks: peaks,
                heights: peaks.map(p => (floor - u.valToPos(p, 'y')) / (floor - top))}; }""")
    peaks = [p for p in drawn["peaks"] if p > 0]
    assert max(peaks) >= 20 * min(peaks), drawn  # the demo's stages are that far apart
    assert (drawn["distr"], drawn["label"]) == (4, "records/s (log scale)")
    heights = [h for h, p in zip(drawn["heights"], drawn["peaks"], strict=True) if p > 0]
    assert min(heights) > 0.25, drawn  # linear, the slowest was under a twentieth
    ticks = [t for t in _tick_labels(page, "#chart-rate", 1) if t]
    assert ticks[0] == "0", ticks
    assert all(re.fullmatch(r"0|10|100|1k|10k|100k|1M|10M", t) for t in ticks), ticks
    page.goto(server.url + "/runs/demo-a/stages/read")  # one stage: a linear axis, as ever
    page.wait_for_selector("#chart-stage-rate canvas")
    assert page.evaluate("document.querySelector('#chart-stage-rate').uplot.scales.y.distr") == 1
    assert page.problems == []


def test_chart_axes_read_as_seconds_and_whole_numbers(server, page):
    page.goto(server.url + "/runs/demo-a/stages/batches")
    waits = _tick_labels(page, "#chart-stage-waits", 1)
    assert len(set(waits)) > 1, waits  # not every tick "0"
    assert all(re.fullmatch(r"[0-9.]+ (s|ms|µs)", v) for v in waits), waits
    page.goto(server.url + "/runs/demo-a/stages/model")
    for chart in ("#chart-epochs", "#chart-history"):  # epochs, runs: whole numbers
        ticks = _tick_labels(page, chart, 0)
        assert ticks and all(v.isdigit() for v in ticks), (chart, ticks)
    assert page.problems == []


def test_train_stage_page_shows_epochs_and_the_audit(server, page):
    page.goto(server.url + "/runs/demo-a/stages/model")
    expect(page.locator("table.epochs tbody tr")).to_have_count(15)
    expect(page.locator("table.audit tbody tr")).to_have_count(15)
    expect(page.locator("#batches table tbody tr").first).to_contain_text("14")
    assert drawn(page, "#chart-epochs") > 1000
    assert drawn(page, "#chart-stage-rate") > 500
    page.evaluate("window.notReloaded = true")
    page.locator("table.audit a", has_text="3").first.click()  # htmx swaps epoch 3's batches in
    expect(page.locator("#batches h4")).to_contain_text("Epoch 3")
    assert page.url.endswith("?epoch=3")  # the selection is in the address
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("table.history tbody tr")).to_have_count(2)
    # demo-b reused the model: the table lists it, the chart of seconds only the run that ran
    expect(page.locator("table.history")).to_contain_text("cached")
    ran = page.evaluate("document.querySelector('#chart-history').uplot.data[1]")
    model = httpx.get(server.url + "/api/runs/demo-a/stages/model").json()["stage"]
    assert ran == [pytest.approx(model["seconds"])], ran
    assert page.problems == []


def test_evaluate_and_compare_pages(server, page):
    page.goto(server.url + "/runs/demo-b/stages/evaluation")
    expect(page.locator("table.metrics tr.threshold")).to_contain_text("≤ 4.0")
    expect(page.locator("table.metrics")).to_contain_text("weather=drizzle")
    expect(page.locator("table.metrics tr.baseline")).to_contain_text("demo-a")
    page.locator("table.history a", has_text="compare").click()
    expect(page.locator("h1")).to_contain_text("two runs")
    expect(page.locator("table.compare")).to_contain_text("demo-a")
    assert drawn(page, "#chart-compare") > 200
    assert page.problems == []


def test_run_page_links_to_the_whole_run_compare(server, page):
    page.goto(server.url + "/runs/demo-b")
    page.locator(".compare-link a").click()  # the previous run of the same pipeline
    expect(page.locator("h1")).to_contain_text("demo-a")
    expect(page.locator("table.compare-runs")).not_to_contain_text("pipeline")  # the same
    page.locator("#same-toggle").click()  # every row, kept in the address
    assert "same=shown" in page.url
    expect(page.locator("table.compare-runs")).to_contain_text("pipeline")
    expect(page.locator("table.compare-stages th.stage-name")).to_have_count(6)
    expect(page.locator("table.compare-metrics")).to_contain_text("blessed")
    page.locator("table.compare-stages th.stage-name a", has_text="model").click()
    expect(page.locator("h1")).to_contain_text("two runs")  # that stage's own comparison
    page.goto(server.url + "/runs/small/compare?with=demo-a")
    expect(page.locator("table.compare-stages th.stage-name").first).to_have_text(XSS)
    assert page.locator("script:not([src])").count() == 0
    assert page.problems == []


def test_markup_shows_as_text(server, page):
    page.goto(server.url + "/runs/small")
    expect(page.locator("table.stages tbody tr.stage-row td").first).to_have_text(XSS)
    page.goto(server.url + f"/runs/small/stages/{XSS}")
    expect(page.locator("h1 .stage-name")).to_have_text(XSS)
    expect(page.locator("table.dead code.raw")).to_have_text(XSS)
    assert page.locator("script:not([src])").count() == 0
    assert page.problems == []  # no alert() ran (a dialog would be recorded)


def test_failed_run_names_stage_file_line_and_seq(server, page):
    page.goto(server.url + "/runs/broken")
    box = page.locator(".error-box")
    expect(box).to_contain_text("stage read")
    expect(box).to_contain_text("line 4")
    expect(box).to_contain_text("seq 2")
    assert page.problems == []


def test_schedules_page_shows_next_fire_times_in_both_zones(server, root, page):
    for name, extra in (("nightly", []), ("weekly", ["--cron", "0 6 * * 1"])):
        added = seqline("schedule", "add", name, str(DEMO / "pipeline.yaml"), "--cron",
                        "30 2 * * *", "--tz", "America/New_York", "--root", str(root), *extra)
        assert added.returncode == 0, added.stderr
    paused = seqline("schedule", "pause", "weekly", "--root", str(root))
    assert paused.returncode == 0, paused.stderr
    page.goto(server.url + "/schedules")
    nightly = page.locator("section.schedule", has_text="nightly")
    expect(nightly.locator("table.next tbody tr")).to_have_count(5)
    # 02:30 in New York is 07:30 UTC in winter, 06:30 in summer: both columns shown.
    expect(nightly.locator("table.next tbody tr").first).to_contain_text(
        re.compile(r"T0[67]:30:00\+00:00.*T02:30:00-0[45]:00"))
    expect(page.locator("section.schedule", has_text="weekly").locator(".status")).to_have_text(
        "paused")
    listed = httpx.get(server.url + "/api/schedules").json()
    assert [s["name"] for s in listed["schedules"]] == ["nightly", "weekly"]
    assert page.problems == []


def test_a_running_run_page_updates_by_itself_and_stops(root, folder, page):
    running = Server(root)
    driver = subprocess.Popen([EXE, "run", str(folder / "slow.yaml"), "--root", str(root),
                               "--run-id", "live", "--no-cache"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while httpx.get(running.url + "/api/runs/live").status_code != 200:
            assert time.monotonic() < deadline, "the run never reached the store"
            time.sleep(0.2)
        page.goto(running.url + "/runs/live")
        expect(page.locator("#live")).to_have_attribute("data-status", "running")
        page.evaluate("window.notReloaded = true")
        work = page.locator("tr.stage-row[data-stage=work] td.records-in")
        before = work.inner_text()
        expect(work).not_to_have_text(before, timeout=15_000)
        expect(page.locator("#live")).to_have_attribute("data-status", "succeeded",
                                                        timeout=60_000)
        expect(page.locator("body")).to_have_attribute("data-live", "ended")
        assert page.evaluate("window.notReloaded") is True  # changed in place, no reload
        expect(work).to_have_text("200")
    finally:
        driver.wait(timeout=120)
        running.stop()
    assert page.problems == []


def test_a_store_change_is_visible_within_2_s(tmp_path, page):
    """The issue's bound, measured: a sample written to the store -> the number on the page."""
    with RunStore.open(tmp_path) as store:
        store.create_run("probe", "probe", pipeline_file=None, fingerprint=None,
                         runner="local", options={})
        stage_run = store.start_stage("probe", "work", "preprocess", params={}, cache_key=None)
        store.add_samples([{"stage_run_id": stage_run, "t": time.time(), "records_done": 1,
                            "rows_per_s": 1.0, "waited_input": 0.0, "waited_output": 0.0,
                            "in_flight": 1, "reorder_held": 0}])
        running = Server(Path(tmp_path))
        try:
            page.goto(running.url + "/runs/probe")
            cell = page.locator("tr.stage-row[data-stage=work] td.records-in")
            expect(cell).to_have_text("1")
            delays = []
            for n in (1_234, 5_678, 9_999):
                time.sleep(1.3)  # off the poll's beat, so delays spread over it
                written = time.monotonic()
                store.add_samples([{"stage_run_id": stage_run, "t": time.time(),
                                    "records_done": n, "rows_per_s": 10.0,
                                    "waited_input": 0.0, "waited_output": 0.0, "in_flight": 2,
                                    "reorder_held": 1}])
                store.heartbeat("probe")
                expect(cell).to_have_text(f"{n:,}", timeout=5_000)
                delays.append(time.monotonic() - written)
            print(f"live-update delay: {', '.join(f'{d:.2f}' for d in delays)} s")
            assert max(delays) < 2.0
            store.finish_run("probe", "succeeded")
            expect(page.locator("body")).to_have_attribute("data-live", "ended", timeout=5_000)
        finally:
            running.stop()
    assert page.problems == []


# Every page a user reaches from the demo: the runs, a run (good and failed), each kind of
# stage (records, training, evaluation), the two comparisons, schedules.
PAGES = {"runs": "/", "run": "/runs/demo-a", "run-failed": "/runs/broken",
         "stage": "/runs/demo-a/stages/features", "stage-train": "/runs/demo-a/stages/model",
         "stage-evaluation": "/runs/demo-b/stages/evaluation",
         "compare-stage": "/runs/demo-b/stages/model/compare?with=demo-a",
         "compare-runs": "/runs/demo-b/compare?with=demo-a", "schedules": "/schedules",
         "lookup": "/runs/demo-a/lookup?seq=100"}  # (the log page: test_logs_browser.py)
SCROLLS_SIDEWAYS = "document.documentElement.scrollWidth > innerWidth"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1400, 800, 400])
def test_screenshots_of_every_page_at_three_widths_light_and_dark(server, page, width, scheme):
    for name, path in PAGES.items():
        show(page, server.url + path, width, scheme)
        keep_screenshot(page, f"{name}-{width}-{scheme}")
        if name.startswith(("run", "lookup")):  # the on-call view: never sideways on a phone
            assert not page.evaluate(SCROLLS_SIDEWAYS), (name, width)
    assert page.problems == []


@pytest.mark.parametrize("width", [1400, 400])
@pytest.mark.parametrize("run_id", ["demo-a", "demo-b", "broken"])
def test_the_graph_names_every_stage_and_fits_the_page(server, page, run_id, width):
    """The graph shown (across on a wide screen, down on a phone) has a box per stage, its
    name readable in it, inside the page: nothing scrolls sideways at 400 px."""
    show(page, server.url + f"/runs/{run_id}", width, "light")
    stages = page.eval_on_selector_all("tr.stage-row", "rows => rows.map(r => r.dataset.stage)")
    shown = page.locator("svg.graph:visible")
    expect(shown).to_have_count(1)
    assert "graph-down" in shown.get_attribute("class") if width == 400 else \
        "graph-across" in shown.get_attribute("class")
    for stage in stages:
        box = shown.locator(f'g.gr-node[data-stage="{stage}"]')
        expect(box.locator("text.gr-name")).to_have_text(stage)  # the demo's names fit whole
        inside = box.evaluate("""g => { const r = g.getBoundingClientRect();
            return r.left >= 0 && r.right <= innerWidth && r.height >= 30; }""")
        assert inside, (stage, width)
    looks = page.eval_on_selector_all("svg.graph:visible g.gr-node",
                                      "gs => gs.map(g => g.dataset.look)")
    if run_id == "demo-b":  # the second run reused every data stage from the first
        assert "reused" in looks
    assert not page.evaluate(SCROLLS_SIDEWAYS)
    assert page.problems == []


def _drawn_rate(page, chart: str, series: int) -> float:
    """A rate chart's mean: its steps' area (records) over the time they span."""
    x, rate = page.evaluate(f"""() => {{ const d = document.querySelector('{chart}').uplot.data;
        return [d[0], d[{series}]]; }}""")
    steps = [(x[i] - x[i - 1], rate[i]) for i in range(1, len(x)) if rate[i] is not None]
    return sum(dt * r for dt, r in steps) / sum(dt for dt, _ in steps)


@pytest.mark.parametrize("stage", ["read", "examples", "features", "batches", "model",
                                   "evaluation"])
def test_a_stage_rate_chart_agrees_with_its_table(server, page, stage):
    """The train stage's chart drew every epoch's records (~1,000/s beside a table's 65/s),
    batching's and evaluation's drew 0, and a short read's chart spread its records over the
    1.73 s to its recorded commit (peak 875/s beside a table's 1,040 for 1.40 s): each now
    spans the stage's seconds and averages to its table's records/s, its bar as long."""
    show(page, server.url + f"/runs/demo-a/stages/{stage}", 1400, "light")
    table = float(page.locator("table.counts td.rows-per-s").inner_text().replace(",", ""))
    # The table's 3 significant digits, and the chart's steps placed to 1 ms (of 0.3 s).
    assert _drawn_rate(page, "#chart-stage-rate", 1) == pytest.approx(table, rel=0.015)
    # Its axis is "time since the stage started": it starts at 0, not at the run's start.
    first = page.evaluate("document.querySelector('#chart-stage-rate').uplot.data[0][0]")
    assert first == pytest.approx(0, abs=0.001)
    page.goto(server.url + "/runs/demo-a")
    cell = page.locator(f"tr.stage-row[data-stage={stage}] td.seconds").inner_text()
    drawn = page.locator(f"svg.timeline g.tl-row[data-stage={stage}] rect.tl-bar")
    assert float(drawn.get_attribute("data-seconds")) == pytest.approx(_seconds(cell), abs=0.006)
    # its tooltip says the table's seconds, not its start to its end (0.04 s beside 0.03 s)
    assert drawn.locator("title").text_content().endswith(f", {cell.strip()}")
    assert page.problems == []


def test_training_curves_are_the_tables_values_and_smooth_from_the_address(server, page):
    page.goto(server.url + "/runs/demo-a/stages/model?smoothing=0.6")
    page.wait_for_function(ALL_DRAWN)
    chart = page.evaluate("""() => { const u = document.querySelector('#chart-epochs').uplot;
        return {labels: u.series.map(s => s.label), data: u.data}; }""")
    column = page.locator("table.epochs tbody tr td:nth-child(2)")  # loss
    losses = [float(t) for t in column.all_inner_texts()]
    loss = chart["labels"].index("loss")
    assert chart["data"][loss] == pytest.approx(losses, rel=1e-3)  # drawn as the table says
    assert "loss smoothed" in chart["labels"]
    assert chart["data"][0] == list(range(15))  # whole epochs
    expect(page.locator("#smoothing")).to_have_value("0.6")
    page.locator("#smoothing").fill("0")
    assert "smoothing" not in page.url
    assert page.problems == []


# The README's and the docs' pictures: a run, its train stage (curves, epochs, the audit and the
# batch order), a stage's lower part (verify, profile, shards), a cascade failure, its log, a
# seq lookup, and the on-call view on a phone. Names -> (server, address, width, what to shoot):
# "page" the whole page, "first" the screen at 900 px high, or a CSS selector whose bottom ends
# the picture (top of the page to there), or "from:SELECTOR" (there to the end of the page).
IMAGES = {
    "dashboard-run": ("demo", "/runs/demo-a", 1400, "page"),
    "dashboard-train": ("demo", "/runs/demo-a/stages/model", 1280, ".batch-order-says"),
    "dashboard-stage-lower": ("demo", "/runs/demo-a/stages/features", 1280, "from:#verified"),
    "dashboard-cascade": ("cascade", "/runs/cascade", 1400, "table.stages"),
    "dashboard-logs": ("cascade", "/runs/cascade/logs", 1280, "first"),
    "dashboard-lookup": ("demo", "/runs/demo-a/lookup?seq=100", 1000, "first"),
    "dashboard-phone": ("demo", "/runs/broken", 400, "first"),
}
DARK = ("dashboard-run", "dashboard-train")  # also in the dark theme: "-dark.png"


@pytest.fixture(scope="module")
def cascade(tmp_path_factory):
    """The demo whose features function fails on one day: read and examples ran, features
    failed, batches, model and evaluation did not run because of it; served on its own."""
    folder = tmp_path_factory.mktemp("cascade")
    shutil.copytree(DEMO, folder / "demo")
    (folder / "demo" / "bad_features.py").write_text(BAD_FEATURES)
    bad = folder / "demo" / "bad.yaml"
    bad.write_text((DEMO / "pipeline.yaml").read_text().replace("features:add_columns",
                                                                "bad_features:add_columns"))
    done = seqline("run", str(bad), "--root", str(folder / "root"), "--run-id", "cascade")
    assert done.returncode == 1, done.stderr
    running = Server(folder / "root")
    yield running
    running.stop()


def _shoot(page, path: Path, shot: str) -> None:
    if shot in ("page", "first"):
        page.screenshot(path=str(path), full_page=shot == "page")
        return
    top, height = 0.0, page.evaluate("document.documentElement.scrollHeight")
    box = page.locator(shot.removeprefix("from:")).first.bounding_box()
    assert box is not None, shot
    if shot.startswith("from:"):
        top = box["y"] - 8
    else:
        height = box["y"] + box["height"] + 12
    page.screenshot(path=str(path), full_page=True, clip={
        "x": 0, "y": top, "width": page.viewport_size["width"], "height": height - top})


def test_images_for_the_readme_and_the_docs(server, cascade, page):
    """The README's and the docs' pictures (docs/img with `make screenshots`); open them."""
    DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
    servers = {"demo": server, "cascade": cascade}
    for name, (which, address, width, shot) in IMAGES.items():
        for scheme in ("light", "dark") if name in DARK else ("light",):
            show(page, servers[which].url + address, width, scheme)
            suffix = "-dark" if scheme == "dark" else ""
            _shoot(page, DOCS_IMAGES / f"{name}{suffix}.png", shot)
    assert page.problems == []
