"""The JSON under /api/ says what the CLI says: an unknown filter is refused naming the valid
values (`runs list --status` exits 2), and a schedule has `schedule show --json`'s fields."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from seqline.orchestration.dashboard.app import create_app
from seqline.orchestration.store import RunStore
from tests.dashboard.conftest import DEMO, seqline

STATUSES = "'queued', 'running', 'succeeded', 'failed', 'interrupted', 'cancelled'"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root whose store has no runs yet."""
    with RunStore.open(tmp_path):
        pass
    return tmp_path


def _served(root: Path) -> TestClient:
    # TestClient's default host ("testserver") is not one the dashboard answers.
    return TestClient(create_app(root), base_url="http://127.0.0.1")


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    with _served(root) as opened:
        yield opened


@pytest.mark.parametrize(("query", "message"), [
    ("status=bogus", f"invalid status: 'bogus' is not one of {STATUSES}"),
    ("trigger=cron", "invalid trigger: 'cron' is not one of 'manual', 'schedule', 'backfill', "
                     "'resume'"),
    ("limit=abc", "invalid limit: 'abc' is not a whole number of at least 1"),
    ("limit=0", "invalid limit: '0' is not a whole number of at least 1"),
])
def test_api_runs_refuses_an_unknown_filter_naming_the_valid_values(client, query, message):
    answer = client.get(f"/api/runs?{query}")
    assert answer.status_code == 400
    assert answer.json() == {"error": message}
    assert "\n" not in answer.text  # one line, as every /api/ error
    assert client.get("/api/runs?status=failed").json() == []  # a known one: no runs yet


def test_api_runs_names_the_statuses_the_cli_names(root, client):
    printed = seqline("runs", "list", "--status", "bogus", "--root", str(root))
    assert printed.returncode == 2
    assert STATUSES in printed.stderr
    assert STATUSES in client.get("/api/runs?status=bogus").json()["error"]
    page = client.get("/?status=bogus")  # the runs page says the same (it said 404)
    assert page.status_code == 400 and STATUSES in html.unescape(page.text)


@pytest.mark.e2e
def test_api_schedules_has_schedule_show_json_fields(root):
    # Fire times from a start years ahead: the same in both answers, whenever the test runs.
    added = seqline("schedule", "add", "nightly", str(DEMO / "pipeline.yaml"), "--cron",
                    "30 2 * * *", "--tz", "America/New_York", "--start", "2030-01-01T00:00:00",
                    "--root", str(root))
    assert added.returncode == 0, added.stderr
    shown = seqline("schedule", "show", "nightly", "--next", "5", "--json", "--root", str(root))
    assert shown.returncode == 0, shown.stderr
    printed = json.loads(shown.stdout)
    with _served(root) as opened:
        served = opened.get("/api/schedules").json()["schedules"][0]
        assert served.keys() == printed.keys()
        for key in served:  # one key at a time: a failure names what differs
            assert (key, served[key]) == (key, printed[key])
        assert served["next"][0] == "2030-01-01T07:30:00+00:00"
        # the page says each fire time in UTC and in the schedule's zone
        page = opened.get("/schedules").text
        assert "<td>2030-01-01T07:30:00+00:00</td><td>2030-01-01T02:30:00-05:00</td>" in page
        assert served["explanation"] in page
