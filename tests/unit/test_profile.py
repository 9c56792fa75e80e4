"""A stage's data profile: pandas' describe() on the demo's columns, merging, drift, windows."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from pyarrow import csv

from seqline.components import COMPONENTS
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.config import parse_pipeline
from seqline.pipeline.drift import THRESHOLD, WINDOWS, ProfileWindows, compare
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.profile import ColumnProfile, Profile
from tests.conftest import REPO

DEMO = REPO / "data" / "seattle_weather" / "seattle-weather.csv"
NUMBERS = ["precipitation", "temp_max", "temp_min", "wind"]


@pytest.fixture(scope="module")
def weather() -> pa.Table:
    table = csv.read_csv(DEMO)
    return table.append_column(SEQ, pa.array(np.arange(table.num_rows), pa.int64()))


def blocks_of(table: pa.Table, size: int) -> list[pa.RecordBatch]:
    return table.combine_chunks().to_batches(max_chunksize=size)


def merged(batches: list[pa.RecordBatch]) -> Profile:
    whole = Profile()
    for batch in batches:
        whole.merge(Profile.of(batch))
    return whole


# The rank error this suite holds the sketch to on the demo's columns: a t-digest states no
# bound of its own, and at compression 400 the worst quartile here is 1.1 % off (decision 52).
RANK_ERROR = 0.015


def _rank_holds(values: np.ndarray, found: float, q: float, error: float) -> bool:
    """`found`'s true rank in sorted `values` (an interval over ties) is within `error` of q."""
    near = 1e-9 * max(1.0, abs(found))  # a centroid's mean of 12.2s may read 12.199999…
    below = np.searchsorted(values, found - near, "left") / len(values)
    up_to = np.searchsorted(values, found + near, "right") / len(values)
    return bool(below - error <= q <= up_to + error)


def test_profile_equals_pandas_describe_on_the_demo(weather):
    described = weather.drop_columns([SEQ]).to_pandas().describe(include="all")
    profile = merged(blocks_of(weather, 128))  # the demo's block size
    assert SEQ not in profile.columns
    assert (profile.rows, profile.seq_min, profile.seq_max) == (1461, 0, 1460)
    for name in NUMBERS:
        column, expected = profile.columns[name], described[name]
        assert column.count == expected["count"] and column.nulls == 0
        assert (column.min, column.max) == (expected["min"], expected["max"])
        assert column.mean == pytest.approx(expected["mean"], rel=1e-12)
        assert column.std == pytest.approx(expected["std"], rel=1e-12)
        values = np.sort(weather.column(name).to_numpy())
        for q in (0.25, 0.5, 0.75):  # each quartile's true rank within RANK_ERROR
            found = column.sketch.get_quantile(q)
            assert _rank_holds(values, found, q, RANK_ERROR), (name, q, found,
                                                               expected[f"{q:.0%}"])
    weather_column = profile.columns["weather"]
    top_value, top_count = max(weather_column.top.items(), key=lambda kv: kv[1])
    assert weather_column.count == described["weather"]["count"]
    assert len(weather_column.top) == described["weather"]["unique"]
    assert (top_value, top_count) == (described["weather"]["top"], described["weather"]["freq"])


def test_merging_block_profiles_equals_profiling_the_whole(weather):
    whole = Profile.of(weather.combine_chunks().to_batches()[0])
    blocks = merged(blocks_of(weather, 100))
    assert (blocks.rows, blocks.seq_min, blocks.seq_max) == (whole.rows, whole.seq_min,
                                                             whole.seq_max)
    for name, column in whole.columns.items():
        other = blocks.columns[name]
        assert (other.kind, other.count, other.nulls, other.min, other.max) == (
            column.kind, column.count, column.nulls, column.min, column.max), name
        assert other.mean == pytest.approx(column.mean, rel=1e-12, abs=1e-12)
        assert other.m2 == pytest.approx(column.m2, rel=1e-9, abs=1e-9)
        if column.kind == "number":  # merged block sketches: true ranks within RANK_ERROR
            values = np.sort(weather.column(name).to_numpy())
            for q in (0.1, 0.5, 0.9):
                found = other.sketch.get_quantile(q)
                assert _rank_holds(values, found, q, RANK_ERROR), (name, q, found)
        if name == "weather":
            assert other.top == column.top


def test_nulls_and_nans_count_as_missing_as_in_pandas():
    batch = pa.record_batch({"x": [1.0, None, float("nan"), 3.0], "s": ["a", None, "b", "a"],
                             "d": pa.array([1, None, 3, 4], pa.date32()),
                             "b": [True, False, None, True]})
    profile = Profile.of(batch).columns
    assert (profile["x"].count, profile["x"].nulls, profile["x"].mean) == (2, 2, 2.0)
    assert (profile["s"].count, profile["s"].nulls, profile["s"].top) == (3, 1, {"a": 2, "b": 1})
    assert (profile["d"].kind, profile["d"].count, profile["d"].nulls) == ("other", 3, 1)
    assert (profile["b"].kind, profile["b"].mean) == ("number", pytest.approx(2 / 3))


def test_dictionary_columns_are_profiled_as_their_values():
    column = pa.array(["sun", "rain", "sun", None]).dictionary_encode()
    profile = ColumnProfile.of(column)
    assert (profile.kind, profile.count, profile.nulls, profile.top) == (
        "string", 3, 1, {"sun": 2, "rain": 1})


def test_profile_round_trips_through_json(weather):
    profile = merged(blocks_of(weather, 500))
    again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
    for name in NUMBERS:
        a, b = profile.columns[name], again.columns[name]
        assert (b.count, b.min, b.max, b.mean, b.std) == (a.count, a.min, a.max, a.mean, a.std)
        assert b.quantiles() == a.quantiles()
        assert sum(b.histogram()["counts"]) == pytest.approx(a.count, abs=1)
    assert again.columns["weather"].top == profile.columns["weather"].top


def test_drift_flags_only_the_shifted_column(weather):
    before = merged(blocks_of(weather, 128))
    shifted = weather.set_column(weather.schema.get_field_index("temp_max"), "temp_max",
                                 pa.compute.add(weather.column("temp_max"), 20.0))
    after = merged(blocks_of(shifted, 128))
    found = compare(after, before)
    assert [name for name, d in found.items() if d["drifted"]] == ["temp_max"]
    assert found["temp_max"]["distance"] > 0.8 and found["temp_max"]["measure"] == "ks"
    assert found["weather"]["measure"] == "tv" and found["weather"]["distance"] == 0
    assert all(d["distance"] < THRESHOLD for n, d in found.items()
               if n not in ("temp_max", "date"))
    assert found["date"]["distance"] is None  # unique values: not compared


def test_top_values_drift_by_total_variation():
    a = ColumnProfile.of(pa.array(["sun"] * 80 + ["rain"] * 20))
    b = ColumnProfile.of(pa.array(["sun"] * 50 + ["rain"] * 50))
    assert compare(Profile(columns={"w": b}), Profile(columns={"w": a}))["w"] == {
        "measure": "tv", "distance": 0.3, "threshold": THRESHOLD, "drifted": True}


def test_mostly_distinct_strings_are_not_compared(weather):
    # dates are unique: two windows of them share no value, which says nothing about drift
    profile = merged(blocks_of(weather, 128))
    again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
    assert compare(again, profile)["date"] == {"measure": None, "distance": None,
                                               "threshold": THRESHOLD, "drifted": False}
    assert compare(again, profile)["weather"]["distance"] == 0


def test_windows_follow_seq_and_cover_the_stage(weather):
    windows = ProfileWindows()
    for batch in blocks_of(weather, 16):  # 92 blocks
        windows.add(batch)
    stored = windows.finish()
    assert WINDOWS <= len(stored["windows"]) <= 2 * WINDOWS
    ranges = [(w["seq_min"], w["seq_max"]) for w in stored["windows"]]
    assert ranges[0][0] == 0 and ranges[-1][1] == 1460
    assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:], strict=False))
    assert sum(w["rows"] for w in stored["windows"]) == stored["rows"] == 1461
    # Seattle's seasons: a window of summer days is far from the whole year's temperatures
    assert max(w["distance"]["temp_max"] for w in stored["windows"]) > THRESHOLD
    assert stored["columns"]["temp_max"]["count"] == 1461
    assert {w["distance"]["date"] for w in stored["windows"]} == {None}


def test_small_blocks_are_profiled_in_groups_into_the_same_windows(monkeypatch):
    """Blocks of 100 records are profiled a group at a time (GROUP_ROWS), not one by one:
    the windows (seq ranges, rows) are those block-by-block windowing gives, the exact
    figures (count, nulls, min, max, mean) those of all the records, for far fewer profiles."""
    from seqline.pipeline import drift

    rng = np.random.default_rng(5)
    n = 100_000
    table = pa.table({"x": rng.normal(size=n), "k": pa.array(rng.integers(0, 9, n)).cast(
        pa.string()), SEQ: np.arange(n)})
    profiles, profile_of = [], Profile.of.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(drift.Profile, "of", classmethod(
        lambda cls, batch: profiles.append(batch.num_rows) or profile_of(cls, batch)))
    windows = ProfileWindows()
    for batch in blocks_of(table, 100):
        windows.add(batch)
    stored = windows.finish()
    monkeypatch.undo()
    target, expected = 1, []  # the windowing rule, block by block: seq ranges of its windows
    for start in range(0, n, 100):
        if expected and expected[-1][1] - expected[-1][0] + 1 < target:
            expected[-1][1] = start + 99
        else:
            expected.append([start, start + 99])
        if len(expected) > 2 * WINDOWS:
            expected = [[a[0], (b or a)[1]] for a, b in zip(
                expected[::2], expected[1::2] + [None], strict=True)]
            target = max(b - a + 1 for a, b in expected)
    assert [[w["seq_min"], w["seq_max"]] for w in stored["windows"]] == expected
    assert len(profiles) < 100 and max(profiles) <= drift.GROUP_ROWS  # not 1,000
    whole = Profile.of(table)
    x = stored["columns"]["x"]
    assert (x["count"], x["min"], x["max"]) == (whole.columns["x"].count,
                                               whole.columns["x"].min, whole.columns["x"].max)
    assert x["mean"] == pytest.approx(whole.columns["x"].mean)
    assert stored["columns"]["k"]["count"] == n


@pytest.mark.parametrize(("value", "message"), [
    ("maybe", r"profile"),
    ("[1]", r"profile"),
])
def test_stage_option_profile_validates(value, message):
    text = ("name: p\nstages:\n  - {name: read, component: ingest, params: {format: csv, "
            f"paths: [seattle-weather.csv]}}, profile: {value}}}\n")
    with pytest.raises(ConfigError, match=message):
        parse_pipeline(text, DEMO.parent, COMPONENTS)


def test_stage_option_profile_false_is_kept():
    text = ("name: p\nstages:\n  - {name: read, component: ingest, params: {format: csv, "
            "paths: [seattle-weather.csv]}, profile: false}\n"
            "  - {name: w, component: tfrecord_write}\n")
    spec = parse_pipeline(text, DEMO.parent, COMPONENTS)
    assert [s.profile for s in spec.stages] == [False, True]


def test_stage_option_profile_in_the_python_api():
    from seqline.components.ingest import IngestParams
    from seqline.orchestration.api import Stage

    params = IngestParams(format="csv", paths=[str(DEMO)])
    assert Stage("read", params, profile=False).spec().profile is False
    assert Stage("read", params).spec().profile is True
