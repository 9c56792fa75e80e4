"""A stage page's accounting: in, out, filtered, dead-lettered and in flight, and whether
records_in + exploded = records_out + filtered + dead_lettered, said visibly when it does not."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from seqline.orchestration.dashboard.accounting import accounting
from seqline.orchestration.events import RunEnded, StageCommitted, StageStarted
from seqline.pipeline.tasks import Counts
from tests.dashboard.conftest import Server
from tests.recorded import recording

# What each stage's commit tells the recorder: read and write add up (a dead letter, an
# explode), pre says it took in 23 and accounts for 21.
COUNTS = {"read": Counts(records_in=24, records_out=23, dead_lettered=1),
          "write": Counts(records_in=23, records_out=25, exploded=2),
          "pre": Counts(records_in=23, records_out=20, filtered=1)}


def _stage(status: str, **counts: int | None) -> dict[str, object]:
    return {"status": status, "live": {}, **counts}


@pytest.mark.parametrize(("stage", "state", "in_flight", "words"), [
    (_stage("succeeded", records_in=1_461, records_out=1_461, filtered=0, exploded=0,
            dead_lettered=0), "balanced", 0,
     "adds up: in 1,461 + exploded 0 = out 1,461 + filtered 0 + dead-lettered 0"),
    (_stage("succeeded", records_in=10, records_out=12, filtered=1, exploded=3,
            dead_lettered=0), "balanced", 0, None),
    (_stage("succeeded", records_in=1_461, records_out=1_400, filtered=0, exploded=0,
            dead_lettered=0), "unbalanced", 61, "61 records unaccounted for"),
    (_stage("cached", records_in=5, records_out=7, filtered=0, exploded=0, dead_lettered=0),
     "unbalanced", -2, "2 more records out than came in"),
    (_stage("failed", records_in=1_024), "uncommitted", 1_024, "1,024 records taken in"),
    (_stage("skipped", records_in=0), None, None, None),  # took in nothing: nothing to count
    (_stage("pending", records_in=None), None, None, None),
])
def test_accounting_of_a_stage(stage, state, in_flight, words):
    found = accounting(stage)
    assert (found or {}).get("state") == state
    if found:
        assert found["in_flight"] == in_flight
        assert words is None or words in found["words"]


def test_a_running_stage_has_blocks_in_flight_and_counts_to_come():
    found = accounting({"status": "running", "records_in": None,
                        "live": {"records_done": 512, "in_flight": 6}})
    assert found is not None and found["state"] == "running"
    assert found["in_flight_blocks"] == 6
    assert "512 records in so far, 6 blocks in flight" in found["words"]


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """A run recorded from its events by the real recorder: three stages committed with the
    counts of COUNTS; a dashboard on it."""
    folder = tmp_path_factory.mktemp("counted")
    with recording(folder) as (_store, bus):
        for name, counts in COUNTS.items():
            bus.publish(StageStarted(stage=name))
            bus.publish(StageCommitted(stage=name, counts=counts, blocks=1, seq_min=0,
                                       seq_max=22, seconds=0.1, waited_input=0.0,
                                       waited_output=0.0, max_in_flight=1, block_retries=0,
                                       path=folder / name, manifest={}))
        bus.publish(RunEnded(status="succeeded", ran=3, reused=0))
    server = Server(folder / "root")
    yield server
    server.stop()


@pytest.mark.browser
@pytest.mark.parametrize(("name", "state", "in_flight", "words"), [
    ("read", "balanced", "0", "adds up: in 24 + exploded 0 = out 23 + filtered 0 + "
                              "dead-lettered 1"),
    ("write", "balanced", "0", "adds up: in 23 + exploded 2 = out 25 + filtered 0 + "
                               "dead-lettered 0"),
    ("pre", "unbalanced", "2", "does not add up: in 23 + exploded 0 ≠ out 20 + filtered 1 + "
                               "dead-lettered 0: 2 records unaccounted for"),
])
def test_the_stage_page_says_whether_its_counts_add_up(counted, page, name, state, in_flight,
                                                       words):
    page.goto(f"{counted.url}/runs/r/stages/{name}")
    line = page.locator("#live p.accounting")
    expect(line).to_be_visible()
    expect(line).to_have_attribute("data-state", state)
    expect(line).to_contain_text(words)
    expect(page.locator("table.counts td.in-flight")).to_have_text(in_flight)
    if state == "unbalanced":  # in the failure's colours, not the muted line of a good stage
        colours = line.evaluate("p => [getComputedStyle(p).backgroundColor, "
                                "getComputedStyle(document.body).backgroundColor]")
        assert colours[0] != colours[1]
        expect(line).to_contain_text("Records lost or made up")
    assert page.problems == []
