"""The run and stage pages tell what the store holds, once: rows/s is records over seconds,
the timeline's waits are the table's, a reused stage says where from, a failure is one line
with its traceback on its stage's page, and the stage it stopped says it did not run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from markupsafe import escape

from seqline.orchestration.dashboard.pages import _significant
from tests.dashboard.conftest import Server, seqline

pytestmark = pytest.mark.e2e

# Four stages on 200 rows; `bad` fails in features on its first block (seq 0), so batches,
# started with the run, never gets a record (skipped), and reuses read and examples from
# `good`.
PIPELINE = """\
name: breaks
stages:
  - {{name: read, component: ingest, params: {{format: csv, paths: [in.csv], block_records: 20}}}}
  - {{name: examples, component: tfrecord_write}}
  - {{name: features, component: preprocess, params: {{fn: "{fn}"{kwargs}}}}}
  - {{name: batches, component: batching, params: {{batch_size: 8, label: x}}}}
"""
TRACEBACK = "Traceback (most recent call last)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, folder) -> Path:
    """A root with `good` (every stage ran) and `bad` (reused two, failed one, skipped one)."""
    root = tmp_path_factory.mktemp("agree")
    (folder / "good.yaml").write_text(PIPELINE.format(fn="latency:double", kwargs=""))
    (folder / "bad.yaml").write_text(PIPELINE.format(fn="latency:boom_at",
                                                     kwargs=", fn_kwargs: {seq: 0}"))
    done = seqline("run", str(folder / "good.yaml"), "--root", str(root), "--run-id", "good",
                   "--no-verify")
    assert done.returncode == 0, done.stderr
    done = seqline("run", str(folder / "bad.yaml"), "--root", str(root), "--run-id", "bad",
                   "--no-verify")
    assert done.returncode == 1, done.stderr
    return root


@pytest.fixture(scope="module")
def site(runs) -> Iterator[Server]:
    running = Server(runs)
    yield running
    running.stop()


def _get(site: Server, path: str) -> str:
    answer = httpx.get(site.url + path)
    assert answer.status_code == 200, answer.text
    return answer.text


def _stages(site: Server, run_id: str) -> dict[str, dict]:
    detail = httpx.get(f"{site.url}/api/runs/{run_id}").json()
    return {s["name"]: s for s in detail["stages"]}


def _row(page: str, stage: str) -> str:
    found = re.search(rf'<tr class="stage-row[^"]*" data-stage="{stage}">(.*?)</tr>', page, re.S)
    assert found, f"no row for {stage}"
    return found.group(1)


def _cell(row: str, name: str) -> str:
    found = re.search(rf'<td class="[^"]*\b{name}\b[^"]*">(.*?)</td>', row, re.S)
    assert found, f"no {name} cell"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def _drawn(page: str, stage: str) -> str:
    found = re.search(rf'<g class="tl-row[^"]*" data-stage="{stage}">(.*?)</g>', page, re.S)
    assert found, f"no timeline row for {stage}"
    return found.group(1)


def _waited(drawn: str, side: str) -> float:
    return sum(float(s) for s in re.findall(
        rf'data-state="{side}" data-seconds="([0-9.e-]+)"', drawn))


def test_rows_per_s_of_a_finished_stage_is_its_records_over_its_seconds(site):
    page, stages = _get(site, "/runs/good"), _stages(site, "good")
    for name, stage in stages.items():
        assert stage["status"] == "succeeded"
        expected = _significant(stage["records_in"] / stage["seconds"])
        assert (name, _cell(_row(page, name), "rows-per-s")) == (name, expected)


def test_the_timeline_draws_the_waits_the_table_shows(site):
    page, stages = _get(site, "/runs/good"), _stages(site, "good")
    for name, stage in stages.items():
        drawn = _drawn(page, name)
        assert 'data-state="working"' in drawn  # its bar
        for side, key in (("input", "waited_input"), ("output", "waited_output")):
            # Within one sampling interval: a wait longer than its stage cannot be drawn.
            assert _waited(drawn, side) == pytest.approx(stage[key] or 0.0, abs=1.0), \
                (name, side)
            shown = _cell(_row(page, name), {"input": "waited-in", "output": "waited-out"}[side])
            assert shown == f"{stage[key] or 0.0:.2f} s"


def test_a_failure_is_one_line_on_the_run_page_and_its_traceback_is_on_its_stage(site):
    detail = httpx.get(site.url + "/api/runs/bad").json()
    line = detail["error"]["message"].splitlines()[0]
    assert detail["error"]["stage"] == "features"
    run_page = _get(site, "/runs/bad")
    assert run_page.count(str(escape(line))) == 1
    assert TRACEBACK not in run_page
    stage_page = _get(site, "/runs/bad/stages/features")
    assert stage_page.count(str(escape(line))) == 1
    traceback = str(escape(detail["error"]["traceback"]))
    assert stage_page.count(traceback) == 1  # folded: open it to read it
    assert re.search(r'<details class="traceback"><summary>Traceback</summary><pre>' +
                     re.escape(traceback), stage_page)


def test_the_stages_a_failure_stopped_say_not_run_and_copy_no_error(site):
    """batches had started (waiting on features' blocks) and got none: skipped, no seconds,
    no bar, its reason beside it; the failure is not repeated on it."""
    stages, run_page = _stages(site, "bad"), _get(site, "/runs/bad")
    batches = stages["batches"]
    assert batches["status"] == "skipped" and not batches["error"]
    assert batches["reason"] == "not run: upstream `features` failed"
    assert batches["seconds"] is None and batches["waited_input"] is None
    row = _row(run_page, "batches")
    assert _cell(row, "why") == str(escape(batches["reason"]))
    assert _cell(row, "stage-status") == "skipped"
    assert _cell(row, "seconds") == _cell(row, "waited-in") == ""
    assert 'class="stage-error"' not in run_page  # no stage repeats the failure
    drawn = _drawn(run_page, "batches")
    assert 'data-state="working"' not in drawn and 'data-state="input"' not in drawn
    assert str(escape(batches["reason"])) in drawn  # its note
    stage_page = _get(site, "/runs/bad/stages/batches")
    assert "error-box" not in stage_page and TRACEBACK not in stage_page


def test_the_slowest_stage_is_one_that_ran(site):
    page, stages = _get(site, "/runs/bad"), _stages(site, "bad")
    named = re.search(r'<strong class="bottleneck">(.*?)</strong>', page)
    ran = {n for n, s in stages.items()
           if s["status"] in ("succeeded", "failed", "cancelled", "running")}
    assert named is None or named.group(1) in ran
    assert "ran 1 of 4 stages on local; 2 reused from run good; 1 not run" in \
        re.sub(r"<[^>]+>", "", page)


def test_a_reused_stage_says_so_with_its_seconds_now(site):
    page, stages = _get(site, "/runs/bad"), _stages(site, "bad")
    for name in ("read", "examples"):
        stage, row = stages[name], _row(page, name)
        assert (stage["status"], stage["cached_from"]) == ("cached", "good")
        assert _cell(row, "stage-status") == "cached"
        assert _cell(row, "why").startswith("reused from run good")
        assert '<a href="/runs/good">good</a>' in row
        assert _cell(row, "seconds") == f"{stage['seconds']:.2f} s"
        assert stage["seconds"] < 0.5  # now-seconds, not the seconds of the run it reused
        assert _cell(row, "rows-per-s") == ""  # nothing ran now
        drawn = _drawn(page, name)
        assert 'data-state="reused"' in drawn and "reused from run good" in drawn
