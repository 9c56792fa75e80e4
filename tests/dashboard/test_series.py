"""Chart samples read incrementally (series.SampleCache) against a real SQLite run store."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from seqline.orchestration.dashboard import series
from seqline.orchestration.dashboard.series import COLUMNS, SampleCache
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.tables import samples


@pytest.fixture
def store(tmp_path):
    opened = RunStore.open(tmp_path)
    opened.create_run("r", "p", pipeline_file=None, fingerprint=None, runner="local",
                      options={})
    yield opened
    opened.close()


def _write(store: RunStore, stage_run: int, times: list[float]) -> None:
    store.add_samples([{"stage_run_id": stage_run, "t": t, "records_done": int(t * 10),
                        "rows_per_s": t / 2, "waited_input": 0.0, "waited_output": 0.0,
                        "in_flight": 1, "reorder_held": 0} for t in times])


def _everything(store: RunStore, stage_run: int) -> dict[str, list]:
    """Every sample, read whole the plain way: what the incremental reads must add up to."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(*(samples.c[c] for c in COLUMNS))
                            .where(samples.c.stage_run_id == stage_run)
                            .order_by(samples.c.t)).all()
    return {c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)}


def test_reads_in_random_batches_add_up_to_one_whole_read(store):
    a = store.start_stage("r", "a", "ingest", params={}, cache_key=None)
    b = store.start_stage("r", "b", "preprocess", params={}, cache_key=None)
    cache, pace, t = SampleCache(), random.Random(7), 1000.0
    for _ in range(20):  # flushes of random size, a read (by a page) after each
        for stage_run in (a, b):
            batch = [t + i for i in range(pace.randint(0, 5))]
            _write(store, stage_run, batch)
        t += 6
        got = cache.series(store, [(a, 1.0, "a", None, None), (b, 1.0, "b", None, None)])
        assert got == {"a": series.from_start(_everything(store, a), 1.0),
                       "b": series.from_start(_everything(store, b), 1.0)}


def test_a_long_stage_is_thinned_and_still_ends_at_its_newest_sample(store, monkeypatch):
    monkeypatch.setattr(series, "MAX_POINTS", 10)
    stage_run = store.start_stage("r", "a", "ingest", params={}, cache_key=None)
    cache = SampleCache()
    _write(store, stage_run, [float(i) for i in range(15)])
    first = cache.series(store, [(stage_run, 1.0, "a", None, None)])["a"]
    assert first["t"] == [float(i) for i in range(1, 15, 2)] + [14.0]  # each pair's last
    _write(store, stage_run, [float(i) for i in range(15, 31)])
    later = cache.series(store, [(stage_run, 1.0, "a", None, None)])["a"]
    assert later["t"] == [1.0] + [float(i) for i in range(3, 31, 4)] + [30.0]  # each 4's last
    assert later["records_done"][-1] == 300


def test_a_reused_stage_run_id_with_another_start_is_read_afresh(store):
    stage_run = store.start_stage("r", "a", "ingest", params={}, cache_key=None)
    cache = SampleCache()
    _write(store, stage_run, [10.0, 11.0])
    assert cache.series(store, [(stage_run, 1.0, "a", None, None)])["a"]["t"] == [1.0, 10.0, 11.0]
    with store.engine.begin() as conn:  # the run deleted, its id taken by a later stage run
        conn.execute(samples.delete().where(samples.c.stage_run_id == stage_run))
    _write(store, stage_run, [3.0, 4.0])  # written by a process whose clock is behind
    fresh = cache.series(store, [(stage_run, 2.0, "a", None, None)])["a"]  # its own start time
    assert fresh == series.from_start(_everything(store, stage_run), 2.0)
    assert fresh["t"] == [2.0, 3.0, 4.0]


def _columns(t: list[float], done: list[int]) -> dict[str, list]:
    return {"t": t, "records_done": done, "rows_per_s": [1.0] * len(t)}


def _mean_rate(columns: dict[str, list], start: float) -> float:
    """The rate a chart draws, averaged over the stage: records over seconds."""
    return columns["records_done"][-1] / (columns["t"][-1] - start)


def test_every_epoch_counted_is_drawn_as_the_tables_records_in_over_seconds():
    epochs = _columns([1.0, 9.0, 18.0], [0, 8000, 17325])  # 15 epochs of 1,155 windows
    counted = series.counted_once(epochs, 1155, 0.0)
    assert counted["records_done"] == pytest.approx([0, 8000 / 15, 1155])
    assert _mean_rate(counted, 0.0) == pytest.approx(1155 / 18)  # the table's rate


def test_a_stage_that_counts_at_commit_is_drawn_at_its_average():
    batching = _columns([0.5, 1.0, 2.0], [0, 0, 0])
    counted = series.counted_once(batching, 1461, 0.0)
    assert counted["records_done"] == pytest.approx([1461 / 4, 1461 / 2, 1461])
    assert counted["rows_per_s"] == pytest.approx([1461 / 2] * 3)


def test_a_running_stage_or_one_already_counted_once_is_drawn_as_sampled():
    running = _columns([1.0, 2.0], [10, 30])
    assert series.counted_once(running, None, 0.0) is running
    assert series.counted_once(running, 30, 0.0) is running


def test_the_cache_hands_out_the_counted_columns(store):
    stage_run = store.start_stage("r", "a", "train", params={}, cache_key=None)
    _write(store, stage_run, [10.0, 20.0])  # records_done 100, 200
    got = SampleCache().series(store, [(stage_run, 0.0, "a", 50, None)])["a"]
    assert got["t"] == [0.0, 10.0, 20.0]  # drawn from the stage's start
    assert got["records_done"] == [0.0, 25.0, 50.0]


def test_a_chart_starts_at_its_stage_so_the_first_samples_records_are_drawn():
    """Each rate covers the interval before its point; the first sample's, the stage's first
    seconds. Without a point at the start a two-sample stage charted half its rate."""
    t, rate = [10.5, 11.5], [600 / 0.5, 570 / 1.0]  # the sampler's rates (since the last one)
    shown = series.from_start({"t": t, "records_done": [600, 1170], "rows_per_s": rate,
                               "in_flight": [2, 0]}, 10.0)
    assert shown == {"t": [10.0, 10.5, 11.5], "records_done": [0, 600, 1170],
                     "rows_per_s": [None, *rate], "in_flight": [None, 2, 0]}
    x, r = shown["t"], shown["rows_per_s"]
    drawn = sum((x[i] - x[i - 1]) * r[i] for i in range(1, len(x))) / (x[-1] - x[0])
    assert drawn == pytest.approx(1170 / 1.5)  # the table's records/s
    assert series.from_start(shown, 10.0) is shown  # already there
    assert series.from_start(shown, None) is shown  # start unknown: as sampled


def test_a_finished_stage_ends_at_its_start_plus_its_seconds():
    """The store's finish time also holds the commit and the recorder's turn at the database:
    a read of 1.40 s by its table was 1.73 s from start to finish."""
    read = {"t0": 100.0, "t1": 101.73, "seconds": 1.40}
    assert series.ended_at(read) == pytest.approx(101.40)
    assert series.ended_at({"t0": None, "t1": 50.0, "seconds": 0.0}) == 50.0  # reused
    assert series.ended_at({"t0": 100.0, "t1": None, "seconds": None}) is None  # running


def test_a_finished_stage_is_drawn_up_to_its_end_and_so_at_its_tables_rate():
    columns = {"t": [100.0, 101.0, 101.73], "records_done": [0, 1000, 1456],
               "rows_per_s": [None, 1000.0, 624.7], "in_flight": [None, 6, 2]}
    shown = series.until(columns, 101.40)
    assert shown["t"] == [100.0, 101.0, 101.40]
    assert shown["records_done"] == [0, 1000, 1456]  # the newest counters, at the end
    assert shown["in_flight"] == [None, 6, 2]
    assert _mean_rate(shown, 100.0) == pytest.approx(1456 / 1.40)  # the table's 1,040
    assert series.until(columns, None) is columns  # running: as sampled
    assert series.until(columns, 102.0) is columns  # nothing after its end


def test_the_cache_draws_a_finished_stage_up_to_its_end(store):
    stage_run = store.start_stage("r", "a", "ingest", params={}, cache_key=None)
    _write(store, stage_run, [10.0, 11.0, 11.7])  # records_done 100, 110, 117
    got = SampleCache().series(store, [(stage_run, 9.6, "a", 117, 11.4)])["a"]
    assert got["t"] == [9.6, 10.0, 11.0, 11.4]
    assert got["records_done"][-1] == 117
