"""Schedules in the run store on SQLite and a real PostgreSQL server: the migration from
revision 2, the lease raced by two processes, and every clock-driven scheduler test."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from seqline.orchestration.store import LeaseHeld, RunStore, ScheduleStore, current_revision
from seqline.orchestration.store import upgrade as upgrade_to
from seqline.orchestration.store.engine import HEAD_REVISION, make_engine
from seqline.orchestration.store.tables import metadata, ticks
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.unit import test_schedule_daemon as daemon_tests
from tests.unit.test_schedule_daemon import pipeline, store  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 20, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """Each test once per database: a fresh SQLite file, a fresh PostgreSQL database."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'seqline.db'}"


# Every semantic test of the scheduler, again on both databases (same names, this module's
# store_url).
for _name in dir(daemon_tests):
    if _name.startswith(("test_scheduler_", "test_backfill_")):
        globals()[_name] = getattr(daemon_tests, _name)


def test_schedules_migration_from_revision_2_keeps_runs_and_matches_the_tables(store_url):
    engine = make_engine(store_url)
    upgrade_to(engine, "0002")
    with engine.begin() as conn:
        pipeline_id = conn.execute(sa.text(
            "INSERT INTO pipelines (name, file, fingerprint, created) VALUES "
            "('p', '', '', :t) RETURNING id"), {"t": T0}).scalar_one()
        conn.execute(sa.text(
            "INSERT INTO runs (run_id, pipeline_id, pipeline, status, runner, options, "
            "\"trigger\", started) VALUES ('old', :p, 'p', 'succeeded', 'local', '{}', "
            "'manual', :t)"), {"p": pipeline_id, "t": T0})
    upgrade_to(engine, HEAD_REVISION)  # through 0003 (schedules) and every later one
    assert current_revision(engine) == HEAD_REVISION
    with engine.connect() as conn:  # the migration and tables.py describe one schema
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    engine.dispose()
    opened = RunStore(store_url)
    assert [r["run_id"] for r in opened.list_runs()] == ["old"]
    opened.close()


def test_schedules_tick_is_unique_per_schedule_fire_time_and_trigger(store, pipeline):  # noqa: F811
    clock = daemon_tests.Clock(T0)
    daemon_tests._add(store, pipeline, clock)
    row = {"schedule": "job", "fire_time": T0, "trigger": "schedule", "status": "skipped",
           "reason": "first", "run_id": None}
    store.schedules.record_ticks([row])
    store.schedules.record_ticks([{**row, "reason": "second"}])  # ignored, not an error
    store.schedules.record_ticks([{**row, "trigger": "backfill"}])
    found = store.schedules.ticks_of("job")
    assert sorted((t.trigger, t.reason) for t in found) == [("backfill", "first"),
                                                           ("schedule", "first")]
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
        conn.execute(sa.insert(ticks).values(**row, recorded=T0))


def _acquire_after_barrier(url: str, token: str, results, barrier) -> None:
    engine = make_engine(url)
    barrier.wait()
    try:
        ScheduleStore(engine).acquire_lease("h", 1, token, datetime.now(UTC),
                                            timedelta(seconds=30), lambda host, pid: False)
        results.put("won")
    except LeaseHeld as exc:
        results.put(f"refused by {exc.host}")
    engine.dispose()


def test_schedules_lease_raced_by_two_processes_has_one_winner(store):  # noqa: F811
    context = multiprocessing.get_context("spawn")  # not a fork of a worker that ran TF
    barrier, results = context.Barrier(2), context.Queue()
    url = store.engine.url.render_as_string(hide_password=False)
    processes = [context.Process(target=_acquire_after_barrier, args=(url, t, results, barrier))
                 for t in ("a", "b")]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(results.get(timeout=10) for _ in processes) == ["refused by h", "won"]
