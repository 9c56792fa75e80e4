"""The runs page's grid names each run's column so that the runs shown can be told apart
(its last 6 characters named two nightly runs `13000Z` and `strict2` `trict2`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from seqline.orchestration.dashboard.app import create_app
from seqline.orchestration.dashboard.context import run_labels
from seqline.orchestration.store import RunStore

NIGHTLY = ["nightly-backfill-20261120T013000Z", "nightly-backfill-20261121T013000Z"]


@pytest.mark.parametrize(("ids", "labels"), [
    (NIGHTLY, ["20261120", "20261121"]),
    (["nightly-20261120T013000Z", "nightly-20261120T023000Z"], ["013000", "023000"]),
    (["strict", "strict2"], ["strict", "strict2"]),
    (["run-1", "run-2"], ["run-1", "run-2"]),  # "1" and "2" are too small to click
    (["r0001", "r0002", "r0020"], ["0001", "0002", "0020"]),
    # `seqline run`'s own ids: the time and a random suffix
    (["20261120T013000Z-ab12", "20261120T140512Z-cd34"], ["013000Z-ab12", "140512Z-cd34"]),
    (["demo-a", "demo-b", "broken"], ["demo-a", "demo-b", "broken"]),
    ([*NIGHTLY, "strict2"], [*NIGHTLY, "strict2"]),  # nothing shared by all: whole ids
    (["ab", "abab"], ["ab", "abab"]),  # a shared front and back never overlap
    (["strict2"], ["strict2"]),
    ([], []),
])
def test_run_labels_are_short_and_tell_the_runs_apart(ids, labels):
    found = run_labels(ids)
    assert [found[i] for i in ids] == labels
    assert len(set(found.values())) == len(ids)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """The dashboard over a store of two nightly runs and a manual one."""
    with RunStore.open(tmp_path) as store:
        for run_id in [*NIGHTLY, "strict2"]:
            store.create_run(run_id, "nightly", pipeline_file=None, fingerprint=None,
                             runner="local", options={},
                             trigger="schedule" if run_id in NIGHTLY else "manual")
            stage = store.start_stage(run_id, "read", "ingest", params={}, cache_key=None)
            store.finish_stage(stage, "succeeded", counts={"records_in": 10}, seconds=1.0,
                               waited_input=0.0, waited_output=0.0, max_in_flight=1)
            store.finish_run(run_id, "succeeded")
    # TestClient's default host ("testserver") is not one the dashboard answers.
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as opened:
        yield opened


def _heads(html: str) -> dict[str, str]:
    """The grid's column heads: {the run id in its link and tooltip: the label shown}."""
    found = re.findall(r'<th class="grid-run"><a href="/runs/([^"]+)" title="([^"]+)">'
                       r'([^<]+)</a></th>', html)
    assert all(link == title for link, title, _ in found), found
    return {title: label for _, title, label in found}


def test_runs_grid_heads_tell_the_runs_apart_and_keep_whole_ids(client):
    heads = _heads(client.get("/").text)
    assert sorted(heads) == sorted([*NIGHTLY, "strict2"])
    assert len(set(heads.values())) == 3, heads
    assert heads["strict2"] == "strict2"
    scheduled = _heads(client.get("/?trigger=schedule").text)  # the two nightly runs
    assert scheduled == dict(zip(NIGHTLY, ["20261120", "20261121"], strict=True))
