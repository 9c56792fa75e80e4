"""The run page's figures from stage rows and samples: the timeline's five states, waits that
add up to the table's, the slowest stage, rows/s to 3 digits, peaks kept when thinned."""

from __future__ import annotations

import pytest

from seqline.orchestration.dashboard import series
from seqline.orchestration.dashboard.pages import _significant
from seqline.orchestration.dashboard.timeline import (
    MIN_BAR_UNITS,
    NARROW,
    bottleneck,
    timeline,
    wait_spans,
)
from seqline.orchestration.dashboard.units import duration
from seqline.orchestration.plan import KEPT

T0 = 1_000.0


def _stage(name: str, status: str = "succeeded", t0: float | None = T0,
           t1: float | None = T0 + 10, seconds: float | None = 10.0,
           waited: tuple[float | None, float | None] = (0.0, 0.0), **extra) -> dict:
    return {"name": name, "status": status, "t0": t0, "t1": t1, "seconds": seconds,
            "waited_input": waited[0], "waited_output": waited[1], "cached_from": None,
            "reason": None, **extra}


def _columns(times: list[float], w_in: list[float], w_out: list[float] | None = None) -> dict:
    return {"t": times, "waited_input": w_in, "waited_output": w_out or [0.0] * len(times)}


def _total(spans: list[tuple[float, float, str]], side: str) -> float:
    return sum(b - a for a, b, s in spans if s == side)


def test_wait_spans_move_a_wait_counted_when_it_ended_back_to_when_it_began():
    # Evaluation in the demo: its counter stays 0 while it waits for the model, then the
    # stage row says 9.22 s of its 9.48 s were waiting on input.
    samples = _columns([T0 + i for i in range(1, 10)], [0.0] * 9)
    spans = wait_spans(T0, T0 + 9.48, samples, {"waited_input": 9.22, "waited_output": 0.0})
    assert _total(spans, "input") == pytest.approx(9.22)
    assert len(spans) == 1 and spans[0][1] == pytest.approx(T0 + 9.48)  # one stretch


@pytest.mark.parametrize(("w_in", "w_out", "totals", "expected"), [
    ([0.5, 1.5, 2.5], [0.0, 0.0, 0.0], (3.0, 0.0), [(T0 + 0.5, T0 + 3.5, "input")]),
    ([0.0, 0.0, 0.0], [0.0, 0.8, 1.8], (0.0, 2.8), [(T0 + 1.2, T0 + 4.0, "output")]),
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], (0.0, 0.0), []),
])
def test_wait_spans_follow_the_counters_interval_by_interval(w_in, w_out, totals, expected):
    samples = _columns([T0 + 1, T0 + 2, T0 + 3], w_in, w_out)
    spans = wait_spans(T0, T0 + 4, samples, {"waited_input": totals[0],
                                             "waited_output": totals[1]})
    assert [(round(a, 6), round(b, 6), s) for a, b, s in spans] == \
        [(round(a, 6), round(b, 6), s) for a, b, s in expected]


def test_wait_spans_of_a_running_stage_stop_at_its_last_sample():
    samples = _columns([T0 + 1, T0 + 2], [0.0, 1.0])
    spans = wait_spans(T0, T0 + 5, samples, {"waited_input": None, "waited_output": None})
    assert spans == [(T0 + 1, T0 + 2, "input")]


def test_wait_spans_of_an_hour_are_a_few_hundred_spans_with_the_same_total():
    times = [T0 + i for i in range(1, 3601)]
    w_in = [i / 2 for i in range(1, 3601)]  # half of every second waiting: a comb
    spans = wait_spans(T0, T0 + 3601, _columns(times, w_in),
                       {"waited_input": 1800.5, "waited_output": 0.0}, min_seconds=8.5)
    assert len(spans) <= 3600 / 8.5 + 1
    assert _total(spans, "input") == pytest.approx(1800.5)


def _run(stages: list[dict], status: str = "succeeded") -> dict:
    return {"t0": T0, "t1": T0 + 10, "status": status, "stages": stages}


def test_timeline_draws_its_states_and_notes_for_stages_that_did_not_run():
    stages = [
        _stage("read", "cached", t0=T0, t1=T0 + 0.001, seconds=0.001,
               cached_from="first", reason="reused from run first (took 3.21 s)"),
        _stage("work", "failed", waited=(0.0, 2.0)),
        _stage("batches", "skipped", reason="not run: upstream `work` failed"),
        _stage("model", "pending", t0=None, t1=None, seconds=None),
    ]
    drawn = timeline(_run(stages, "failed"), {})
    rows = {r["name"]: r for r in drawn["rows"]}
    assert rows["read"]["bar"]["state"] == "reused"
    assert rows["read"]["note"]["text"] == "reused from run first (took 3.21 s)"
    assert rows["work"]["bar"]["state"] == "working"
    assert [w["state"] for w in rows["work"]["waits"]] == ["output"]
    assert sum(w["seconds"] for w in rows["work"]["waits"]) == pytest.approx(2.0)
    # skipped: it did nothing (its thread may have started and waited): no bar, its reason
    assert rows["batches"]["bar"] is None and rows["batches"]["waits"] == []
    assert rows["batches"]["note"]["text"] == "not run: upstream `work` failed"
    assert rows["model"]["bar"] is None and rows["model"]["note"]["text"] == "not run"
    assert set(drawn["states"]) == {"working", "input", "output", "reused", "notrun"}


@pytest.mark.parametrize("layout", [None, NARROW])
def test_a_short_stage_late_in_its_run_has_a_bar_inside_the_timeline(layout):
    """A read failing on its first block: 5 ms, after 20 ms of the run's set-up."""
    stage = _stage("a_read_stage_with_a_long_name", "failed", t0=T0 + 0.020, t1=T0 + 0.025,
                   seconds=0.005)
    run = {**_run([stage], "failed"), "t0": T0, "t1": T0 + 0.030}
    drawn = timeline(run, {}, layout) if layout else timeline(run, {})
    row = drawn["rows"][0]
    assert row["bar"]["w"] >= MIN_BAR_UNITS
    assert drawn["label"] <= row["bar"]["x"] and row["bar"]["x"] + row["bar"]["w"] <= drawn["width"]
    if layout:
        assert drawn["width"] == 380 and row["label"] == "a_read_sta…" and len(drawn["ticks"]) <= 4


def test_a_stage_a_failure_stopped_is_marked_apart_from_one_a_cancel_stopped():
    because = {"because": "failure", "stage": "work", "verb": "not run",
               "short": "not run: work failed"}
    stages = [_stage("work", "failed"),
              _stage("batches", "skipped", reason="not run: upstream `work` failed",
                     not_run=because),
              _stage("model", "pending", t0=None, t1=None, seconds=None, not_run=because),
              _stage("late", "skipped", reason="not run to the end: the run was cancelled "
                     "(SIGINT)", not_run={**because, "because": "cancel", "stage": None})]
    rows = {r["name"]: r for r in timeline(_run(stages, "failed"), {})["rows"]}
    assert [rows[n]["because"] for n in ("work", "batches", "model", "late")] == [
        None, "failure", "failure", "cancel"]
    assert rows["batches"]["note"]["text"] == "not run: upstream `work` failed"  # the store's
    assert rows["model"]["note"]["text"] == "not run: work failed"  # no reason stored


def test_a_cancelled_stage_has_a_bar_for_the_time_it_ran_and_a_skipped_one_none():
    """A cancel 6 s into the run: `work` started at 1 s and had run 5 s (2 of them waiting
    on its input); `batches` never started."""
    stopped = {"because": "cancel", "stage": None, "verb": "stopped",
               "short": "stopped: the run was cancelled"}
    stages = [_stage("read"),
              _stage("work", "cancelled", t0=T0 + 1, t1=T0 + 6, seconds=5.0, waited=(2.0, 0.0),
                     reason="stopped after 5.00 s: the run was cancelled (SIGINT)",
                     not_run=stopped),
              _stage("batches", "skipped", t0=None, t1=T0 + 6, seconds=None,
                     waited=(None, None), reason="not run: the run was cancelled (SIGINT)",
                     not_run={**stopped, "verb": "not run",
                              "short": "not run: the run was cancelled"})]
    drawn = timeline(_run(stages, "cancelled"), {})
    rows = {r["name"]: r for r in drawn["rows"]}
    work = rows["work"]
    assert (work["status"], work["bar"]["state"], work["bar"]["seconds"]) == (
        "cancelled", "working", 5.0)
    assert sum(w["seconds"] for w in work["waits"]) == pytest.approx(2.0)
    assert work["note"]["text"] == "stopped after 5.00 s: the run was cancelled (SIGINT)"
    assert work["because"] == "cancel"
    batches = rows["batches"]
    assert batches["bar"] is None and batches["waits"] == []
    assert batches["note"]["text"] == "not run: the run was cancelled (SIGINT)"
    assert bottleneck(stages[1:]) == {"name": "work", "busy": 3.0, "seconds": 5.0}  # it ran


def test_a_cached_stage_without_a_reason_names_the_run_it_came_from():
    stages = [_stage("read", "cached", cached_from="first")]
    assert timeline(_run(stages), {})["rows"][0]["note"]["text"] == "reused from run first"


def test_the_slowest_stage_is_one_that_ran():
    stages = [_stage("read", "cached", seconds=12.0),
              _stage("work", "succeeded", seconds=5.0, waited=(1.0, 0.0)),
              _stage("later", "skipped", seconds=9.0),
              _stage("model", "pending", seconds=None)]
    assert bottleneck(stages) == {"name": "work", "busy": 4.0, "seconds": 5.0}


def test_no_slowest_stage_when_nothing_ran_or_nothing_took_time():
    assert bottleneck([_stage("read", "cached"), _stage("b", "skipped")]) is None
    assert bottleneck([_stage("features", "failed", seconds=0.0),
                       _stage("b", "skipped", seconds=0.0)]) is None
    # "slowest stage: read (busy 0.00 s of 0.00 s)" named nothing either
    assert bottleneck([_stage("read", "failed", seconds=0.003)]) is None


@pytest.mark.parametrize(("value", "shown"), [
    (2697.4, "2,700"), (93.96, "94.0"), (99.96, "100"), (115.2, "115"), (0.01234, "0.0123"),
    (0, "0"), (None, ""),
])
def test_rates_show_three_significant_digits(value, shown):
    assert _significant(value) == shown


def test_thinned_samples_keep_the_peaks(monkeypatch):
    monkeypatch.setattr(series, "MAX_POINTS", 10)
    head = len(series.COLUMNS) - 7  # the head of line's columns: their newest, as any counter
    rows = [(float(t), t, 1.0, 0.0, 0.0, 6 if t == 13 else 1, 4 if t == 2 else 0,
             10 * t, *[None] * (head - 1)) for t in range(40)]
    shown = series._thinned(rows)
    assert len(shown["t"]) == 10 and shown["t"][-1] == 39.0
    assert max(shown["in_flight"]) == 6 and max(shown["reorder_held"]) == 4
    assert shown["watermark"][-1] == 390 and shown["blocker_seq"] == [None] * 10


def test_a_resumed_runs_timeline_is_its_last_attempt_with_the_kept_stages_as_marks():
    """Failed at 10 s, resumed an hour later: the timeline shows the hour's last attempt,
    not 3,600 s of nothing; what the earlier attempt committed is a mark with its reason,
    and not the run's slowest stage."""
    resumed = T0 + 3_600
    stages = [_stage("read", reason=KEPT, seconds=8.0),
              _stage("work", t0=resumed, t1=resumed + 2, seconds=2.0)]
    run = _run(stages) | {"t0": resumed, "t1": resumed + 2, "resumed": "(an iso time)"}
    drawn = timeline(run, {})
    rows = {r["name"]: r for r in drawn["rows"]}
    assert drawn["span"] == pytest.approx(2.0)
    assert rows["read"]["bar"]["state"] == "reused" and rows["read"]["note"]["text"] == KEPT
    assert rows["work"]["bar"]["state"] == "working" and rows["work"]["bar"]["seconds"] == 2.0
    assert bottleneck(stages)["name"] == "work"  # (read's 8 s were the earlier attempt's)


def test_a_bars_seconds_are_its_tables_recorded_seconds_not_its_wall_clock():
    """features took 0.0347 s: its table and the terminal say 0.03 s; its start to its end,
    0.035 s rounded to the ms, said 0.04 s. A running stage (none recorded): start to now."""
    start = 1_763_600_000.0  # a Unix time, as the store's: its float's noise is in the ms
    stages = [_stage("features", t0=start, t1=start + 0.0347, seconds=0.0347),
              _stage("model", "running", t0=start + 0.0347, t1=None, seconds=None)]
    run = {**_run(stages, "running"), "t0": start, "t1": start + 2.0}
    rows = {r["name"]: r for r in timeline(run, {})["rows"]}
    assert rows["features"]["bar"]["seconds"] == 0.0347
    assert duration(rows["features"]["bar"]["seconds"]) == duration(0.0347) == "0.03 s"
    assert rows["model"]["bar"]["seconds"] == pytest.approx(2.0 - 0.0347, abs=1e-3)
