"""The runs page and the run page make a fixed number of SQL statements, however many runs the
store holds, and the runs page's links page through every run in order with its filters.

Counted, not timed (speed is benchmarks/dashboard_scale.py's): a read that grew with the
store (an N+1 per run, a page that read every run) shows as more statements at depth or on
an old run. The real app over a real SQLite store of 300 runs, in-process (Starlette's
TestClient), statements counted at the engine (`before_cursor_execute`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from starlette.testclient import TestClient

from seqline.orchestration.dashboard.app import create_app
from seqline.orchestration.dashboard.context import Dashboard, runs_view
from seqline.orchestration.dashboard.pages import env
from seqline.orchestration.store import RunStore
from tests.unit.test_runs_pages import seed_runs

COUNT = 300
# Statements a runs page makes: where it starts (a run id's key), the page, the grid, the
# pipelines for the filter; each connection's BEGIN counted too.
RUNS_PAGE_STATEMENTS = 7


class Counted:
    """Every statement the dashboard's engine sends, while `counting`."""

    def __init__(self, dash: Dashboard) -> None:
        self.statements: list[str] = []
        event.listen(dash.reader.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def counting(self, call: Any) -> tuple[Any, int]:
        """`call()`'s result and how many statements it sent."""
        self.statements.clear()
        result = call()
        return result, len(self.statements)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Iterator[tuple[TestClient, Dashboard, list[str]]]:
    root: Path = tmp_path_factory.mktemp("runs")
    with RunStore.open(root) as store:
        ids = seed_runs(store, COUNT, samples_every=50)
    app = create_app(root)
    # TestClient's default host ("testserver") is not one the dashboard answers.
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, app.state.dashboard, ids


def _ids(html: str) -> list[str]:
    return re.findall(r'<td><a href="/runs/(r\d+)">', html)


def _link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def _page(dash: Dashboard, query: dict[str, str]) -> str:
    """The runs page's HTML for an address's query, as its route renders it."""
    return env.get_template("runs.html").render(**runs_view(dash, query))


def test_runs_page_statements_do_not_grow_with_depth_or_filter(seeded):
    client, dash, ids = seeded
    counted = Counted(dash)
    first, n_first = counted.counting(lambda: runs_view(dash, {}))
    deep, n_deep = counted.counting(lambda: runs_view(dash, {"older": ids[60]}))
    failed, n_failed = counted.counting(lambda: runs_view(dash, {"status": "failed",
                                                                 "older": ids[100]}))
    assert [r["run_id"] for r in deep["runs"]] == ids[10:60][::-1]
    assert n_first <= n_deep == n_failed == RUNS_PAGE_STATEMENTS, counted.statements
    assert len(first["runs"]) == 50 and first["newer"] is None
    # 15 failed runs below r0100: one page, the last; its link back keeps the filter
    assert failed["older"] is None and failed["newer"] == "/?status=failed&newer=r0098"


def test_runs_page_links_walk_every_run_in_order_and_back(seeded):
    client, dash, ids = seeded
    shown, query, pages = [], {"pipeline": "clicks"}, []
    while True:
        html = _page(dash, query)
        pages.append(html)
        shown += _ids(html)
        older = _link(html, "next")
        if older is None:
            break
        assert "pipeline=clicks" in older
        query = dict(p.split("=") for p in older.removeprefix("/?").split("&"))
    assert shown == [i for i in ids[::-1] if int(i[1:]) % 3 == 1]  # clicks: every 3rd from 1
    assert len(pages) == 2 and _link(pages[0], "prev") is None
    newer = _link(pages[1], "prev")
    assert newer is not None
    back = _page(dash, dict(p.split("=") for p in newer.removeprefix("/?").split("&")))
    assert _ids(back) == _ids(pages[0])


def test_api_runs_pages_by_link_header_with_fixed_statements(seeded):
    client, dash, ids = seeded
    counted = Counted(dash)
    walked, path, counts = [], "/api/runs?limit=100&status=succeeded", []
    while path:
        answer, n = counted.counting(lambda p=path: client.get(p))
        assert answer.status_code == 200
        walked += [r["run_id"] for r in answer.json()]
        counts.append(n)
        path = answer.links.get("next", {}).get("url")
    succeeded = [i for i in ids[::-1][2:] if int(i[1:]) % 7]  # the newest two still go
    assert walked == succeeded and len(counts) == 3
    assert max(counts) <= RUNS_PAGE_STATEMENTS - 4  # no grid, no pipelines: the page alone


def test_run_page_statements_are_the_same_for_the_oldest_and_newest_run(seeded):
    client, dash, ids = seeded
    counted = Counted(dash)
    found = {}
    for run_id in (ids[0], ids[-1]):  # both kept their samples; each read for the first time
        answer, n = counted.counting(lambda r=run_id: client.get(f"/runs/{r}"))
        assert answer.status_code == 200 and run_id in answer.text
        api, n_api = counted.counting(lambda r=run_id: client.get(f"/api/runs/{r}"))
        assert api.json()["run_id"] == run_id
        found[run_id] = (n, n_api)
    assert found[ids[0]] == found[ids[-1]], counted.statements


def test_the_runs_route_reads_a_fixed_number_of_statements(seeded):
    client, dash, ids = seeded
    counted = Counted(dash)
    counts = [counted.counting(lambda p=p: client.get(p))[1]
              for p in ("/", "/?status=failed", "/?pipeline=churn", "/?trigger=schedule")]
    assert max(counts) <= RUNS_PAGE_STATEMENTS and len(set(counts)) == 1, counts
