"""The run store on real SQLite files: the contract (also run on PostgreSQL), races, the CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from seqline.orchestration.cli.runs import runs_app
from seqline.orchestration.cli.store import store_app
from seqline.orchestration.store import (
    Conflict,
    RunIdTaken,
    RunNotFound,
    RunStore,
    alembic_config,
    current_revision,
)
from seqline.orchestration.store import upgrade as upgrade_to
from seqline.orchestration.store.engine import HEAD_REVISION, make_engine
from seqline.orchestration.store.tables import metadata, runs
from seqline.pipeline.errors import ConfigError
from tests.store_schema import alembic_command, schema

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
LIST_KEYS = {"run_id", "pipeline", "status", "runner", "trigger", "started", "finished"}
SHOW_KEYS = {"run_id", "pipeline", "status", "trigger", "stages", "error", "host", "options"}
STAGE_KEYS = {"name", "component", "status", "attempts", "records_in", "records_out",
              "seconds", "cache_key", "cached_from", "filtered", "exploded", "dead_lettered",
              "waited_input", "waited_output", "artifacts", "epochs", "evaluation"}
COUNTS = {"records_in": 10, "records_out": 8, "filtered": 2, "exploded": 0, "dead_lettered": 0}
FIRST_REVISION = "0001"
TINY_PIPELINE = """\
name: tiny
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 4}}
  - {name: write, component: tfrecord_write, params: {shard_records: 4}}
"""
# A driver that records its run with its own pid, says so, and waits to be killed.
DRIVER = """\
import sys, time
from seqline.orchestration.store import RunStore
store = RunStore(sys.argv[1])
store.create_run(sys.argv[2], "p", pipeline_file=None, fingerprint=None, runner="local",
                 options={})
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """A real two-stage run made by `seqline run` (ingest + tfrecord_write on 10 rows)."""
    folder = tmp_path_factory.mktemp("real")
    (folder / "in.csv").write_text("x,y\n" + "".join(f"{i},{i * i}\n" for i in range(10)))
    (folder / "p.yaml").write_text(TINY_PIPELINE)
    seqline = Path(sys.executable).parent / "seqline"  # the installed entry point
    done = subprocess.run([str(seqline), "run", "p.yaml", "--root", "root", "--run-id", "real1",
                           "--no-verify"], cwd=folder, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder / "root" / "runs" / "real1"


def _new_run(store: RunStore, run_id: str, **overrides) -> None:
    fields = {"pipeline_file": "p.yaml", "fingerprint": "f1", "runner": "local",
              "options": {"workers": 2}} | overrides
    store.create_run(run_id, overrides.pop("pipeline", "p"), **{
        k: v for k, v in fields.items() if k != "pipeline"})


def _create_after_barrier(url: str, run_id: str, results, barrier) -> None:
    """One of two racing drivers: open the store, wait for the other, create the same id."""
    store = RunStore(url)
    barrier.wait()
    try:
        _new_run(store, run_id)
        results.put("won")
    except RunIdTaken:
        results.put("taken")
    finally:
        store.close()


def _write_one_run(url: str, run_id: str, barrier) -> None:
    """A whole small run, written while another process writes its own."""
    store = RunStore(url)
    barrier.wait()
    _new_run(store, run_id)
    for name in ("read", "write", "train"):
        stage_run = store.start_stage(run_id, name, name, params={}, cache_key=f"{run_id}-{name}")
        store.add_samples([{"stage_run_id": stage_run, "t": float(t), "records_done": t}
                           for t in range(50)])
        store.finish_stage(stage_run, "succeeded", counts=COUNTS, seconds=1.0,
                           waited_input=0.0, waited_output=0.0, max_in_flight=4)
    store.finish_run(run_id, "succeeded")
    store.close()


# Fresh processes, not forks: a fork of a pytest worker that has run TensorFlow can abort in
# TF's garbage collection (seen under pytest-xdist). The barrier makes them start together.
RACE = multiprocessing.get_context("spawn")


def _race(target, args_per_process: list[tuple]) -> None:
    context = RACE
    barrier = context.Barrier(len(args_per_process))
    processes = [context.Process(target=target, args=(*args, barrier))
                 for args in args_per_process]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0


def _full_stage(store: RunStore, run_id: str) -> int:
    """A train-like stage with every kind of detail recorded."""
    stage_run = store.start_stage(run_id, "train", "train", params={"epochs": 2},
                                  cache_key="k-train")
    store.record_artifact(stage_run, "input", "/r/x/batches", "batch_plan", 10, None, None)
    store.record_artifact(stage_run, "output", "/r/x/model", "model", 10, 2048, "sha256:ab")
    store.add_samples([{"stage_run_id": stage_run, "t": 1.0 + i, "records_done": i,
                        "rows_per_s": 1.0, "waited_input": 0.0, "waited_output": 0.0,
                        "in_flight": 2, "reorder_held": 0} for i in range(5)])
    store.add_epochs(stage_run, [{"epoch": e, "metrics": {"loss": 1.0 / (e + 1)},
                                  "input_wait_seconds": 0.1, "seconds": 2.0} for e in range(2)])
    store.add_eval_metrics(stage_run, {"mae": 2.5}, {"weather": {"sun": {"mae": 3.0}}},
                           blessed=True)
    store.finish_stage(stage_run, "succeeded", counts=COUNTS, seconds=4.0, waited_input=0.5,
                       waited_output=0.25, max_in_flight=8)
    return stage_run


class TestStoreContract:
    """What the executor, the CLI and the dashboard rely on, whatever the database."""

    def test_store_run_round_trip_has_the_json_contract(self, store):
        _new_run(store, "r1")
        _full_stage(store, "r1")
        store.finish_run("r1", "succeeded")
        listed = store.list_runs()
        assert [r["run_id"] for r in listed] == ["r1"] and set(listed[0]) >= LIST_KEYS
        shown = store.show_run("r1")
        assert set(shown) >= SHOW_KEYS and shown["status"] == "succeeded"
        assert ISO_UTC.match(shown["started"]) and ISO_UTC.match(shown["finished"])
        (stage,) = shown["stages"]
        assert set(stage) >= STAGE_KEYS and ISO_UTC.match(stage["started"])
        assert {k: stage[k] for k in COUNTS} == COUNTS and stage["attempts"] == 1
        assert [a["role"] for a in stage["artifacts"]] == ["input", "output"]
        assert [e["epoch"] for e in stage["epochs"]] == [0, 1] and stage["samples"] == 5
        assert stage["evaluation"] == {"metrics": {"mae": 2.5}, "blessed": True,
                                       "slices": {"weather": {"sun": {"mae": 3.0}}}}
        json.dumps(shown)  # the whole object is JSON as it is

    def test_store_list_filters_and_limit(self, store):
        for i in range(5):
            _new_run(store, f"a{i}", pipeline="a" if i % 2 else "b")
        store.finish_run("a1", "failed", error_stage="train", error_seq=7, error_message="boom")
        assert {r["run_id"] for r in store.list_runs(pipeline="a")} == {"a1", "a3"}
        assert [r["run_id"] for r in store.list_runs(status="failed")] == ["a1"]
        assert len(store.list_runs(limit=2)) == 2
        assert store.show_run("a1")["error"] == {"stage": "train", "seq": 7, "message": "boom",
                                            "traceback": None}
        with pytest.raises(ConfigError, match="expected one of"):
            store.list_runs(status="exploded")

    def test_store_refuses_a_taken_run_id(self, store):
        _new_run(store, "same")
        with pytest.raises(RunIdTaken, match="already used.*--resume"):
            _new_run(store, "same")
        assert isinstance(RunIdTaken("x"), Conflict)  # not a ConfigError: nothing to fix

    def test_store_show_unknown_run_raises_run_not_found(self, store):
        with pytest.raises(RunNotFound, match="no run 'nope'"):
            store.show_run("nope")
        with pytest.raises(RunNotFound, match="no run 'nope' to resume"):
            store.resume_run("nope")

    def test_store_retries_show_the_last_attempt_and_history(self, store):
        _new_run(store, "r")
        first = store.start_stage("r", "s", "preprocess", params={}, cache_key=None)
        store.finish_stage(first, "failed", counts={}, seconds=1.0, waited_input=0.0,
                           waited_output=0.0, max_in_flight=1, error="ValueError: x")
        second = store.start_stage("r", "s", "preprocess", params={}, cache_key=None, attempt=2)
        store.finish_stage(second, "succeeded", counts=COUNTS, seconds=1.0, waited_input=0.0,
                           waited_output=0.0, max_in_flight=1)
        (stage,) = store.show_run("r")["stages"]
        assert (stage["status"], stage["attempts"]) == ("succeeded", 2)
        assert stage["history"][0]["error"] == "ValueError: x"
        assert store.grid(["r"])["cells"]["s"]["r"]["attempts"] == 2

    def test_store_find_cached_returns_the_newest_hit(self, store):
        for run_id in ("old", "new"):
            _new_run(store, run_id)
            _full_stage(store, run_id)
        hit = store.find_cached("k-train")
        assert (hit["run_id"], hit["stage"]) == ("new", "train")
        assert [a["uri"] for a in hit["artifacts"]] == ["/r/x/model"]
        assert store.find_cached("missing") is None

    def test_store_resume_makes_the_run_running_again(self, store):
        _new_run(store, "r")
        store.finish_run("r", "interrupted")
        store.resume_run("r")
        shown = store.show_run("r")
        assert (shown["status"], shown["trigger"], shown["finished"]) == ("running", "resume",
                                                                          None)

    def test_store_one_run_id_raced_from_two_processes(self, store, store_url):
        results = RACE.Queue()
        _race(_create_after_barrier, [(store_url, "raced", results)] * 2)
        outcomes = sorted(results.get(timeout=10) for _ in range(2))
        assert outcomes == ["taken", "won"]
        assert [r["run_id"] for r in store.list_runs()] == ["raced"]

    def test_store_two_runs_written_at_once_are_both_recorded(self, store, store_url):
        _race(_write_one_run, [(store_url, "left"), (store_url, "right")])
        for run_id in ("left", "right"):
            shown = store.show_run(run_id)
            assert shown["status"] == "succeeded"
            assert [(s["name"], s["records_out"], s["samples"]) for s in shown["stages"]] == [
                ("read", 8, 50), ("write", 8, 50), ("train", 8, 50)]

    def test_store_marks_a_sigkilled_driver_interrupted(self, store, store_url):
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, store_url, "killed"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert driver.stdout.readline().strip() == "ready"
            assert store.reap_interrupted() == []  # alive: left alone
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        assert store.reap_interrupted() == ["killed"]
        shown = store.show_run("killed")
        assert shown["status"] == "interrupted" and "--resume" in shown["error"]["message"]

    def test_store_marks_a_stale_heartbeat_interrupted(self, store):
        _new_run(store, "stale")  # this process: its pid is alive
        stage_run = store.start_stage("stale", "s", "ingest", params={}, cache_key=None)
        old = datetime.now(UTC) - timedelta(minutes=5)
        with store.engine.begin() as conn:
            conn.execute(sa.update(runs).values(heartbeat=old))
        assert store.reap_interrupted() == ["stale"]
        stage = store.show_run("stale")["stages"][0]
        assert (stage["stage_run_id"], stage["status"]) == (stage_run, "cancelled")
        store.heartbeat("stale")  # a late beat does not resurrect it
        assert store.reap_interrupted() == []

    def test_store_migrations_bring_an_empty_database_to_the_tables(self, store_url):
        engine = make_engine(store_url)
        upgrade_to(engine, HEAD_REVISION)  # by its id: through every migration
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert current_revision(engine) == head == HEAD_REVISION
        with engine.connect() as conn:  # the migrations and tables.py describe one schema
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        engine.dispose()

    def test_store_made_at_head_in_one_step_is_the_migrated_store(self, store_url):
        """A new store is made from tables.py and stamped, in one step: the same tables,
        columns, keys, indexes and checks as the migrations make, and Alembic takes it up
        from its stamp (down a revision and up again)."""
        engine = make_engine(store_url)
        upgrade_to(engine)  # "head", on an empty database: one step
        assert current_revision(engine) == HEAD_REVISION
        made = schema(engine)
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        alembic_command(engine, "downgrade", "0007")
        upgrade_to(engine, HEAD_REVISION)
        assert schema(engine) == made
        with engine.begin() as conn:  # empty again, then through every migration
            metadata.drop_all(conn)
            conn.execute(sa.text("DROP TABLE alembic_version"))
        upgrade_to(engine, HEAD_REVISION)
        assert schema(engine) == made
        engine.dispose()

    def test_store_upgrade_from_first_revision_loses_nothing(self, store_url):
        engine = make_engine(store_url)
        upgrade_to(engine, FIRST_REVISION)
        _seed_first_revision(engine)
        engine.dispose()
        store = RunStore(store_url)  # opening upgrades to head
        shown = store.show_run("old")
        store.close()
        (stage,) = shown["stages"]
        assert (shown["status"], stage["records_out"], stage["samples"]) == ("succeeded", 7, 3)
        assert stage["epochs"][0]["metrics"] == {"loss": 0.5}
        assert stage["evaluation"]["metrics"] == {"mae": 1.5}
        assert stage["artifacts"][0]["uri"] == "/old/model" and stage["error"] is None

    def test_store_upgrade_from_revision_7_keeps_a_skipped_stage_and_allows_cancelled(
            self, store_url):
        """Revision 8 lets a stage be `cancelled`: a store made at revision 7 upgrades in
        place (on SQLite by copying stage_runs, whose old table's drop must not cascade to
        the samples, epochs, metrics and lineage of its rows), its skipped stage unchanged."""
        engine = make_engine(store_url)
        upgrade_to(engine, "0007")
        _seed_first_revision(engine)
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO stage_runs (id, run_id, stage, component, status, attempt, "
                "params, reason) VALUES (2, 'old', 'evaluate', 'evaluate', 'skipped', 1, "
                "'{}', 'not run to the end: the run was cancelled (SIGINT)')"))
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # not yet allowed
            conn.execute(sa.text("UPDATE stage_runs SET status = 'cancelled' WHERE id = 2"))
        engine.dispose()
        store = RunStore(store_url)  # opening upgrades to head
        shown = store.show_run("old")
        train, evaluate = shown["stages"]
        assert (evaluate["status"], evaluate["reason"]) == (
            "skipped", "not run to the end: the run was cancelled (SIGINT)")
        assert (train["status"], train["samples"], train["records_out"]) == ("succeeded", 3, 7)
        assert train["epochs"][0]["metrics"] == {"loss": 0.5}
        assert train["evaluation"]["metrics"] == {"mae": 1.5}
        assert train["artifacts"][0]["uri"] == "/old/model"
        store.finish_stage(evaluate["stage_run_id"], "cancelled", counts={"records_in": 40},
                           seconds=1.2, waited_input=0.1, waited_output=0.0, max_in_flight=2,
                           reason="stopped after 1.20 s: the run was cancelled (SIGINT)")
        now = store.show_run("old")["stages"][1]
        store.close()
        assert (now["status"], now["seconds"], now["records_in"]) == ("cancelled", 1.2, 40)
        engine = make_engine(store_url)
        assert current_revision(engine) == HEAD_REVISION == "0009"
        with engine.connect() as conn:  # the migration and tables.py still describe one schema
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            if conn.dialect.name == "sqlite":  # its foreign keys on again, none dangling
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # still checked
            conn.execute(sa.text("UPDATE stage_runs SET status = 'stopped' WHERE id = 2"))
        engine.dispose()

    def test_store_opened_by_two_processes_at_once_migrates_once(self, store_url):
        results = RACE.Queue()
        _race(_create_after_barrier_unopened, [(store_url, "a", results),
                                                (store_url, "b", results)])
        assert sorted(results.get(timeout=10) for _ in range(2)) == ["won", "won"]

    def test_store_rebuild_matches_the_manifests(self, real_run, tmp_path, store_url):
        root = tmp_path / "copy"
        shutil.copytree(real_run, root / "runs" / real_run.name)
        store = RunStore(store_url)
        assert (store.rebuild(root), store.rebuild(root)) == (1, 0)
        shown = store.show_run("real1")
        store.close()
        for stage in shown["stages"]:
            manifest = json.loads((root / "runs" / "real1" / stage["name"] / "manifest.json")
                                  .read_text())
            assert {k: stage[k] for k in COUNTS} == {k: manifest[k] for k in COUNTS}
            assert stage["seconds"] == manifest["seconds"]
        assert [s["name"] for s in shown["stages"]] == ["read", "write"]
        write = shown["stages"][1]
        assert {a["role"] for a in write["artifacts"]} == {"input", "output"}
        assert shown["status"] == "succeeded" and shown["options"]["workers"] >= 1


def _create_after_barrier_unopened(url: str, run_id: str, results, barrier) -> None:
    """Both processes open a fresh (unmigrated) store at the same instant."""
    barrier.wait()
    store = RunStore(url)
    _new_run(store, run_id)
    results.put("won")
    store.close()


def _seed_first_revision(engine: sa.Engine) -> None:
    """Rows written by a seqline whose store was at revision 1 (tables as they were then)."""
    old = sa.MetaData()
    old.reflect(engine)
    t = old.tables
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(t["pipelines"].insert().values(id=1, name="p", file="", fingerprint="",
                                                    created=when))
        conn.execute(t["runs"].insert().values(
            run_id="old", pipeline_id=1, pipeline="p", status="succeeded", runner="local",
            options={}, trigger="manual", started=when, finished=when + timedelta(seconds=9)))
        conn.execute(t["stage_runs"].insert().values(
            id=1, run_id="old", stage="train", component="train", status="succeeded",
            attempt=1, records_in=7, records_out=7, params={}))
        conn.execute(t["artifacts"].insert().values(id=1, uri="/old/model", kind="model"))
        conn.execute(t["lineage"].insert().values(stage_run_id=1, artifact_id=1, role="output"))
        conn.execute(t["samples"].insert(), [{"stage_run_id": 1, "t": float(i),
                                              "records_done": i} for i in range(3)])
        conn.execute(t["epochs"].insert().values(stage_run_id=1, epoch=0,
                                                 metrics={"loss": 0.5}))
        conn.execute(t["eval_metrics"].insert().values(stage_run_id=1, metric="mae", value=1.5))


# -- the CLI sub-apps (SQLite) --------------------------------------------------------------


def _invoke(app, *args: str):
    result = CliRunner().invoke(app, list(args))
    return result


def test_runs_cli_list_and_show_json(tmp_path):
    store = RunStore.open(tmp_path)
    _new_run(store, "c1")
    _full_stage(store, "c1")
    store.finish_run("c1", "succeeded")
    store.close()
    listed = _invoke(runs_app, "list", "--root", str(tmp_path), "--json")
    assert listed.exit_code == 0, listed.output
    assert set(json.loads(listed.output)[0]) >= LIST_KEYS
    shown = _invoke(runs_app, "show", "c1", "--root", str(tmp_path), "--json")
    assert shown.exit_code == 0 and json.loads(shown.output)["stages"][0]["name"] == "train"


def test_runs_cli_tables_are_whole_and_plain_when_piped(tmp_path):
    store = RunStore.open(tmp_path)
    long_id = "run-" + "x" * 150  # far wider than any terminal: must not be cut
    _new_run(store, long_id)
    _full_stage(store, long_id)
    store.close()
    listed = _invoke(runs_app, "list", "--root", str(tmp_path))
    shown = _invoke(runs_app, "show", long_id, "--root", str(tmp_path))
    for result in (listed, shown):
        assert result.exit_code == 0 and long_id in result.output
        assert "\x1b[" not in result.output  # no colour codes in a pipe
    assert "/r/x/model" in shown.output and "weather=sun" in shown.output


def test_runs_cli_errors_exit_2_with_one_line(tmp_path):
    unknown = _invoke(runs_app, "show", "nope", "--root", str(tmp_path))
    bad_url = _invoke(runs_app, "list", "--store", "nosuchdb://x")
    for result in (unknown, bad_url):
        assert result.exit_code == 2
        assert result.output.startswith("error: ") and result.output.count("\n") == 1


def test_store_cli_rebuild_indexes_a_real_run(real_run, tmp_path):
    shutil.copytree(real_run, tmp_path / "runs" / real_run.name)
    result = _invoke(store_app, "rebuild", "--root", str(tmp_path))
    assert result.exit_code == 0 and "indexed 1 run(s)" in result.output
    listed = json.loads(_invoke(runs_app, "list", "--root", str(tmp_path), "--json").output)
    assert [(r["run_id"], r["status"]) for r in listed] == [("real1", "succeeded")]
    again = _invoke(store_app, "rebuild", "--root", str(tmp_path))  # nothing missing: said so
    assert again.exit_code == 0 and "indexed 0 run(s): sqlite:///" in again.output
    assert "already holds every run under" in again.output


def test_store_open_creates_root_and_uses_wal(tmp_path):
    store = RunStore.open(tmp_path / "new")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    store.close()
    assert (tmp_path / "new" / "seqline.db").exists()


def test_pid_alive_sees_live_dead_and_zombie_processes():
    from seqline.orchestration.store.liveness import pid_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert pid_alive(os.getpid())
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    while pid_alive(child.pid) and datetime.now(UTC) < deadline:
        pass  # exited but unreaped: a zombie, which counts as dead
    assert not pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)


def test_a_new_store_and_an_existing_one_open_without_alembic(tmp_path):
    """Alembic (0.15 CPU-s to import) runs only to migrate an older store."""
    code = ("import sys; from pathlib import Path; from seqline.orchestration.store import "
            "RunStore; RunStore.open(Path(sys.argv[1])).close(); print('alembic' in sys.modules)")
    for _ in ("new", "existing"):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                              text=True, timeout=60)
        assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
    assert current_revision(make_engine(f"sqlite:///{tmp_path / 'seqline.db'}")) == HEAD_REVISION
