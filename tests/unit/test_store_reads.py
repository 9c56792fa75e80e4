"""The run store's reads (store/reads.py): what `seqline runs` and every dashboard page show,
against a real SQLite store (the integration module runs the class on PostgreSQL too)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from seqline.orchestration.store import RunNotFound, RunReader, RunStore
from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.liveness import STAGE_INTERRUPTED, STAGE_NOT_REACHED, interrupted
from seqline.orchestration.store.statements import SAMPLE_COLUMNS
from seqline.orchestration.store.statuses import RunStatus
from seqline.orchestration.store.tables import runs
from seqline.pipeline.errors import ConfigError

LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


def _run(store: RunStore, run_id: str, pipeline: str = "p", trigger: str = "manual") -> int:
    """A run with one stage that read 40 records, its samples every second from t=1000."""
    store.create_run(run_id, pipeline, pipeline_file=None, fingerprint=None, runner="local",
                     options={"workers": 2}, trigger=trigger)
    stage_run = store.start_stage(run_id, "read", "ingest", params={}, cache_key=None)
    store.add_samples([{"stage_run_id": stage_run, "t": 1000.0 + i, "records_done": 10 * i,
                        "rows_per_s": 10.0, "waited_input": 0.0, "waited_output": 0.0,
                        "in_flight": 2, "reorder_held": 1} for i in range(5)])
    return stage_run


def _orphan(store: RunStore, run_id: str) -> None:
    """Make a running run look as if its driver died long ago (on another host)."""
    with writing(store.engine) as conn:
        conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(
            heartbeat=LONG_AGO, started=LONG_AGO, host="elsewhere"))


def _stored_status(store: RunStore, run_id: str) -> str:
    with store.engine.connect() as conn:
        return conn.execute(sa.select(runs.c.status).where(runs.c.run_id == run_id)).scalar_one()


class TestReads:
    def test_reads_show_a_dead_drivers_run_interrupted_without_writing(self, store):
        _run(store, "live")
        _run(store, "dead")
        store.start_stage("dead", "write", "tfrecord_write", params={}, cache_key=None,
                          status="pending")
        _orphan(store, "dead")
        shown = {r["run_id"]: r for r in store.list_runs_shown()}
        assert shown["dead"]["status"] == RunStatus.interrupted
        assert shown["dead"]["error"] == interrupted("dead")
        assert "--resume --run-id dead`" in interrupted("dead")  # its id, not a placeholder
        assert shown["live"]["status"] == "running"
        page = store.run_page("dead")
        assert page["status"] == "interrupted"
        assert page["error"]["message"] == interrupted("dead")
        # no stage failed: the one at work was stopped, the one waiting never ran (as a cancel)
        assert [(s["status"], s["reason"], s["error"]) for s in page["stages"]] == [
            ("cancelled", STAGE_INTERRUPTED, None), ("skipped", STAGE_NOT_REACHED, None)]
        assert store.run_stamp("dead")[0] == "interrupted"
        assert _stored_status(store, "dead") == "running"  # nothing written
        assert sorted(r["run_id"] for r in store.list_runs(status="running")) == ["dead", "live"]
        assert [r["run_id"] for r in store.list_runs_shown(status="interrupted")] == ["dead"]
        assert [r["run_id"] for r in store.list_runs_shown(status="running")] == ["live"]

    def test_the_reaper_records_what_readers_showed(self, store):
        _run(store, "dead")
        _orphan(store, "dead")
        shown = store.run_page("dead")
        assert store.reap_interrupted() == ["dead"]
        stored = store.show_run("dead")
        assert (stored["status"], stored["error"]["message"]) == (shown["status"],
                                                                  shown["error"]["message"])
        assert stored["stages"][0]["status"] == shown["stages"][0]["status"]
        assert stored["stages"][0]["reason"] == shown["stages"][0]["reason"]
        # it ended at its last heartbeat, as its seconds count, not when it was noticed
        assert stored["finished"] == stored["started"]  # (_orphan: both long ago)

    def test_run_page_is_runs_show_plus_exact_times(self, store):
        _run(store, "a")
        page, shown = store.run_page("a"), store.show_run("a")
        assert {k: v for k, v in page.items() if k not in ("t0", "t1")} | {
            "stages": shown["stages"]} == shown
        assert page["t0"] > 0 and page["t1"] is None and page["stages"][0]["t1"] is None
        assert store.run_page("nope") is None
        with pytest.raises(RunNotFound, match="no run 'nope' in the run store at "):
            store.show_run("nope")

    def test_lookups_answer_none_for_what_is_not_there(self, store):
        stage_run = _run(store, "a")
        assert store.run_exists("a") is True and store.run_exists("b") is None
        found = store.stage_of("a", "read")
        assert found is not None and found["stage_run_id"] == stage_run
        assert found["name"] == "read" and found["t0"] == store.run_page("a")["stages"][0]["t0"]
        assert store.stage_of("a", "nope") is None and store.stage_of("b", "read") is None

    def test_previous_run_pipelines_and_grid(self, store):
        for run_id, pipeline in (("a1", "p"), ("b1", "q"), ("a2", "p")):
            _run(store, run_id, pipeline)
        assert store.previous_run("a2") == "a1" and store.previous_run("a1") is None
        assert store.pipelines() == ["p", "q"]
        grid = store.grid(["a2", "a1"])
        assert grid["runs"] == ["a1", "a2"] and grid["stages"] == ["read"]
        assert grid["cells"]["read"]["a2"] == {"status": "running", "seconds": None,
                                               "attempts": 1}

    def test_history_takes_each_runs_latest_attempt_and_its_headline_numbers(self, store):
        for run_id in ("a1", "a2"):
            stage_run = _run(store, run_id)
            store.finish_stage(stage_run, "succeeded", counts={"records_in": 40},
                               seconds=1.5, waited_input=0.0, waited_output=0.0,
                               max_in_flight=2)
            store.add_epochs(stage_run, [{"epoch": 0, "metrics": {"loss": 2.0}},
                                         {"epoch": 1, "metrics": {"loss": 1.0}}])
        found = store.history("p", "read")
        assert [h["run_id"] for h in found] == ["a2", "a1"]
        assert found[0]["records_in"] == 40 and found[0]["metrics"] == {"loss": 1.0}
        assert store.history("p", "read", limit=1)[0]["run_id"] == "a2"

    def test_sample_rows_read_only_what_is_newer(self, store):
        stage_run = _run(store, "a")
        every, newer = store.sample_rows([(stage_run, None), (stage_run, 1002.0)])
        assert [r[0] for r in every] == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]
        assert [r[0] for r in newer] == [1003.0, 1004.0]
        assert len(every[0]) == len(SAMPLE_COLUMNS) and every[-1][1] == 40
        assert store.samples_of(stage_run)[-1]["records_done"] == 40

    def test_run_stamp_moves_with_a_new_sample_not_with_a_heartbeat(self, store):
        stage_run = _run(store, "a")
        before = store.run_stamp("a")
        store.heartbeat("a")
        assert store.run_stamp("a") == before
        store.add_samples([{"stage_run_id": stage_run, "t": 2000.0, "records_done": 50}])
        assert store.run_stamp("a") != before
        assert store.run_stamp("nope") is None

    def test_totals_count_runs_as_shown_and_running_stages_by_their_newest_sample(self, store):
        _run(store, "live")
        _run(store, "dead")
        _orphan(store, "dead")
        totals = store.totals(("train", "evaluate"))
        assert sorted(r["status"] for r in totals.runs) == ["interrupted", "running"]
        assert {s["status"] for s in totals.stages} == {"running"}
        assert {s["records_done"] for s in totals.newest.values()} == {40}
        assert totals.models == [] and totals.model_metrics == [] and totals.model_epochs == []

    def test_a_read_only_reader_refuses_writes_at_the_database(self, store, store_url):
        _run(store, "a")
        reader = RunReader.read_only(store_url)
        try:
            assert reader.show_run("a") == store.show_run("a")
            with pytest.raises(sa.exc.DBAPIError), reader.engine.begin() as conn:
                conn.execute(sa.delete(runs))
        finally:
            reader.close()
        assert store.run_exists("a")

    def test_documents_are_plain_json(self, store):
        _run(store, "a")
        page = store.run_page("a")
        assert json.loads(json.dumps(page)) == page  # statuses are strings, times numbers
        assert type(json.loads(json.dumps(page))["status"]) is str


def test_list_runs_refuses_an_unknown_status_and_a_limit_below_1(tmp_path):
    with RunStore.open(tmp_path) as store:
        with pytest.raises(ConfigError, match="unknown run status 'exploded'"):
            store.list_runs(status="exploded")
        with pytest.raises(ConfigError, match="--limit must be at least 1"):
            store.list_runs(limit=0)


def test_list_runs_by_trigger_as_the_dashboards_api_filters_them(store):
    """`/api/runs?trigger=` is "as `seqline runs list --json`": the command filters so too."""
    _run(store, "by-hand")
    _run(store, "nightly-20261129T000000Z", trigger="schedule")
    assert [r["run_id"] for r in store.list_runs(trigger="schedule")] == [
        "nightly-20261129T000000Z"]
    assert [r["run_id"] for r in store.list_runs(trigger="manual")] == ["by-hand"]
    assert [r["run_id"] for r in store.list_runs_shown(trigger="schedule")] == [
        "nightly-20261129T000000Z"]


def test_stale_is_older_than_30_s(tmp_path):
    with RunStore.open(tmp_path) as store:
        _run(store, "a")
        with writing(store.engine) as conn:
            conn.execute(sa.update(runs).values(
                host="elsewhere", heartbeat=datetime.now(UTC) - timedelta(seconds=20)))
        assert store.run_page("a")["status"] == "running"
        with writing(store.engine) as conn:
            conn.execute(sa.update(runs).values(
                heartbeat=datetime.now(UTC) - timedelta(seconds=40)))
        assert store.run_page("a")["status"] == "interrupted"


def test_shown_status_is_the_reapers_rule_without_the_write():
    import os
    import subprocess
    import sys

    from seqline.orchestration.store.liveness import HOST, shown_status

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    fresh = datetime.now(UTC)
    cases = [  # (status, heartbeat, host, pid) -> shown
        (("running", fresh, HOST, os.getpid()), "running"),
        (("running", fresh, HOST, int(gone.stdout)), "interrupted"),  # its pid is gone
        (("running", fresh, "elsewhere", int(gone.stdout)), "running"),  # not ours to check
        (("running", LONG_AGO, "elsewhere", None), "interrupted"),  # stale
        (("succeeded", LONG_AGO, "elsewhere", None), "succeeded"),  # ended: as stored
    ]
    for (status, beat, host, pid), expected in cases:
        assert shown_status(status, beat, LONG_AGO, host, pid) == expected, (status, host)


def test_a_stage_counts_only_the_attempts_that_did_work(store):
    """A stage a failed attempt never reached (skipped) is on its first attempt when the
    resumed run runs it: `runs show`, the dashboard and the grid say 1, not 2."""
    _run(store, "r")
    never = store.start_stage("r", "late", "preprocess", params={}, cache_key=None,
                              status="pending")
    store.finish_stage(never, "skipped", counts={}, seconds=None, waited_input=0.0,
                       waited_output=0.0, max_in_flight=0)
    again = store.start_stage("r", "late", "preprocess", params={}, cache_key=None,
                              attempt=2)
    store.finish_stage(again, "succeeded", counts={"records_in": 1}, seconds=1.0,
                       waited_input=0.0, waited_output=0.0, max_in_flight=1)
    stage = {s["name"]: s for s in store.show_run("r")["stages"]}["late"]
    assert (stage["status"], stage["attempts"]) == ("succeeded", 1)
    assert [(h["attempt"], h["status"]) for h in stage["history"]] == [(None, "skipped")]
    assert store.grid(["r"])["cells"]["late"]["r"]["attempts"] == 1


def test_a_stage_that_has_not_run_has_no_attempts_and_a_resume_records_its_own_options(store):
    """`runs show` said a skipped stage was on attempt 1; and a run first tried --one-by-one
    and resumed as an assembly line still said `overlap: false` (and its rerun line
    `--one-by-one`)."""
    _run(store, "r")
    never = store.start_stage("r", "late", "preprocess", params={}, cache_key=None,
                              status="pending")
    store.finish_stage(never, "skipped", counts={}, seconds=None, waited_input=0.0,
                       waited_output=0.0, max_in_flight=0)
    assert {s["name"]: s["attempts"] for s in store.show_run("r")["stages"]}["late"] == 0
    assert store.grid(["r"])["cells"]["late"]["r"]["attempts"] == 0
    store.finish_run("r", "failed")
    store.resume_run("r", "ray", {"workers": 4, "overlap": True})
    shown = store.show_run("r")
    assert (shown["runner"], shown["options"]) == ("ray", {"workers": 4, "overlap": True})
