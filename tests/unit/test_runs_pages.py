"""The runs list a page at a time (store/keyset.py, RunReader.runs_page): every run once, in
the list's order, forward and back, filtered or not, statuses as shown; against a real SQLite
store (tests/integration/test_runs_pages_postgres.py runs the class on PostgreSQL too)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from seqline.orchestration.store import RunStore
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.liveness import interrupted
from seqline.orchestration.store.tables import runs
from tests.unit.test_store_reads import LONG_AGO

PIPELINES = ("weather", "clicks", "churn")
COUNT, LIMIT = 120, 25  # five pages, the last one short


def seed_runs(store: RunStore, count: int, *, samples_every: int = 0) -> list[str]:
    """`count` runs of two stages, written as the recorder writes them: three pipelines,
    every 4th scheduled, every 7th failed, the last two still going (driven by this
    process). Every `samples_every`-th run, and the newest, keep samples.

    Returns:
        Their ids, oldest first.
    """
    ids = []
    for i in range(count):
        run_id = f"r{i:04d}"
        store.create_run(run_id, PIPELINES[i % 3], pipeline_file=None, fingerprint=None,
                         runner="local", options={}, trigger="schedule" if i % 4 == 0
                         else "manual")
        failed, going = i % 7 == 0, i >= count - 2
        for stage, component in (("read", "ingest"), ("work", "preprocess")):
            stage_run = store.start_stage(run_id, stage, component, params={}, cache_key=None)
            if samples_every and (i % samples_every == 0 or i == count - 1):
                store.add_samples([{"stage_run_id": stage_run, "t": 1000.0 + t,
                                    "records_done": t} for t in range(5)])
            if not going:
                store.finish_stage(stage_run, "failed" if failed and stage == "work"
                                   else "succeeded", counts={"records_in": 10}, seconds=1.0,
                                   waited_input=0.0, waited_output=0.0, max_in_flight=1)
        if not going:
            store.finish_run(run_id, "failed" if failed else "succeeded",
                             error_message="ValueError: no humidity" if failed else None)
        ids.append(run_id)
    return ids


def orphan(store: RunStore, *run_ids: str) -> None:
    """Make running runs look as if their driver died long ago (on another host)."""
    with writing(store.engine) as conn:
        conn.execute(sa.update(runs).where(runs.c.run_id.in_(run_ids)).values(
            heartbeat=LONG_AGO, host="elsewhere", status="running", finished=None))


def walk(store: RunStore, **filters: Any) -> list[list[str]]:
    """Every page from the first, by the `older` links; then checks that the `newer` links
    lead back through the same pages."""
    pages, older = [], None
    while True:
        page = store.runs_page(**filters, older=older, limit=LIMIT)
        pages.append(page)
        older = page["older"]
        if older is None:
            break
    ids = [[r["run_id"] for r in page["runs"]] for page in pages]
    for k in range(len(pages) - 1, 0, -1):  # back from the last page to the first
        back = store.runs_page(**filters, newer=pages[k]["newer"], limit=LIMIT)
        assert [r["run_id"] for r in back["runs"]] == ids[k - 1]
        assert back["older"] == pages[k - 1]["older"]
        assert back["newer"] == pages[k - 1]["newer"]
    assert pages[0]["newer"] is None
    return ids


class TestRunsPages:
    def test_runs_page_walks_every_run_once_newest_first(self, store):
        oldest_first = seed_runs(store, COUNT)
        pages = walk(store)
        assert [len(p) for p in pages] == [25, 25, 25, 25, 20]
        assert sum(pages, []) == oldest_first[::-1]
        assert sum(pages, []) == [r["run_id"] for r in store.list_runs(limit=1000)]

    @pytest.mark.parametrize("filters", [{"pipeline": "clicks"}, {"status": "failed"},
                                         {"trigger": "schedule"},
                                         {"pipeline": "weather", "status": "succeeded"}])
    def test_runs_page_filters_keep_the_lists_order(self, store, filters):
        seed_runs(store, COUNT)
        every = store.list_runs(limit=1000)
        wanted = [r["run_id"] for r in every if all(r[k] == v for k, v in filters.items())]
        pages = walk(store, **filters)
        assert sum(pages, []) == wanted and len(pages) == -(-len(wanted) // LIMIT)

    def test_runs_page_filters_by_the_status_shown_past_stale_rows(self, store):
        ids = seed_runs(store, COUNT)
        dead = ids[10:40]  # more stale `running` rows than a page holds
        orphan(store, *dead)
        assert sum(walk(store, status="running"), []) == ids[-2:][::-1]
        assert sum(walk(store, status="interrupted"), []) == dead[::-1]
        shown = {r["run_id"]: r for r in store.runs_page(older=ids[45], limit=LIMIT)["runs"]}
        assert (shown[ids[39]]["status"], shown[ids[39]]["error"]) == ("interrupted",
                                                                      interrupted(ids[39]))
        assert store.runs_page(limit=LIMIT)["runs"][0]["status"] == "running"

    def test_runs_page_a_run_started_meanwhile_moves_no_run_between_pages(self, store):
        seed_runs(store, COUNT)
        first = store.runs_page(limit=LIMIT)
        store.create_run("late", "weather", pipeline_file=None, fingerprint=None,
                         runner="local", options={})
        second = store.runs_page(older=first["older"], limit=LIMIT)
        assert second["runs"][0]["run_id"] == "r0094"  # as before "late": no run shown twice
        assert [r["run_id"] for r in store.runs_page(limit=LIMIT)["runs"]][:2] == [
            "late", "r0119"]
        back = store.runs_page(newer=second["newer"], limit=LIMIT)
        assert back["newer"] == "r0119" and back["runs"][0]["run_id"] == "r0119"

    def test_runs_page_an_unknown_or_top_cursor_gives_the_first_page(self, store):
        seed_runs(store, COUNT)
        first = store.runs_page(limit=LIMIT)
        for cursor in ({"older": "gone"}, {"newer": "gone"}, {"newer": "r0110"}):
            assert store.runs_page(**cursor, limit=LIMIT) == first
        assert store.runs_page(status="queued")["runs"] == []
        assert store.list_runs_shown(limit=3) == first["runs"][:3]

    def test_pipelines_lists_names_with_runs(self, store):
        seed_runs(store, 6)
        assert store.pipelines() == sorted(PIPELINES)
