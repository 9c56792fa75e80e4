"""The pure decision over due fire times: catch-up first, then overlap, each with its reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from seqline.orchestration.schedule.ticks import decide, due_fire_times, first_after
from seqline.orchestration.store import Schedule

T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)


def _schedule(**changes) -> Schedule:
    fields = {"name": "hourly", "pipeline": "/p.yaml", "cron": "0 * * * *", "tz": "UTC",
              "runner": "local", "workers": 1, "overlap": "skip", "catchup": "latest",
              "max_catchup": 5, "start": None, "end": None, "paused": False, "since": T0,
              "created": T0}
    return Schedule(**{**fields, **changes})


def _hours(*hours: int) -> list[datetime]:
    return [T0 + timedelta(hours=h) for h in hours]


def _statuses(decisions) -> list[str]:
    return [d.status for d in decisions]


def test_ticks_one_on_time_fire_time_launches_under_every_policy():
    for catchup in ("none", "latest", "all"):
        for overlap in ("skip", "queue", "allow"):
            s = _schedule(catchup=catchup, overlap=overlap)
            [d] = decide(s, _hours(1), T0 + timedelta(hours=1, seconds=2), None)
            assert (d.status, d.reason) == ("launching", None)


@pytest.mark.parametrize(("overlap", "status", "reason"), [
    ("skip", "skipped", "overlap skip: the previous run hourly-x was still going"),
    ("queue", "queued", "overlap queue: waits for hourly-x"),
    ("allow", "launching", None),
])
def test_ticks_overlap_while_the_previous_run_goes(overlap, status, reason):
    [d] = decide(_schedule(overlap=overlap), _hours(1), T0 + timedelta(hours=1), "hourly-x")
    assert d.status == status
    assert d.reason == reason


def test_ticks_catch_up_after_three_days():
    due = _hours(*range(1, 73))  # 72 hourly fire times missed
    at = T0 + timedelta(hours=72, minutes=30)  # found 30 min after the last
    none = decide(_schedule(catchup="none"), due, at, None)
    assert set(_statuses(none)) == {"skipped"}
    assert "missed (found 3.0 days after its fire time): catch-up none" in none[0].reason
    latest = decide(_schedule(catchup="latest"), due, at, None)
    assert _statuses(latest) == ["skipped"] * 71 + ["launching"]
    every = decide(_schedule(catchup="all", max_catchup=5), due, at, None)
    assert _statuses(every) == ["skipped"] * 67 + ["launching"] + ["queued"] * 4
    assert "catch-up all runs only the most recent 5 (--max-catchup)" in every[0].reason
    # Each queued catch-up waits for the one launched (its run id derives from its fire time).
    assert every[-1].reason == ("catch-up all runs missed ticks in order: waits for "
                                "hourly-20261122T200000Z")


def test_ticks_catch_up_none_still_runs_the_on_time_tick():
    due = _hours(1, 2, 3)
    at = T0 + timedelta(hours=3, seconds=5)
    assert _statuses(decide(_schedule(catchup="none"), due, at, None)) == [
        "skipped", "skipped", "launching"]


def test_ticks_catch_up_all_with_allow_launches_them_at_once():
    due = _hours(1, 2, 3)
    at = T0 + timedelta(hours=5)
    decisions = decide(_schedule(catchup="all", overlap="allow"), due, at, "hourly-x")
    assert _statuses(decisions) == ["launching"] * 3


def test_ticks_a_single_late_tick_is_a_missed_one():
    due = _hours(1)
    at = T0 + timedelta(hours=1, minutes=5)
    assert _statuses(decide(_schedule(catchup="none"), due, at, None)) == ["skipped"]
    assert _statuses(decide(_schedule(catchup="latest"), due, at, None)) == ["launching"]


def test_ticks_cursor_and_due_fire_times_respect_start_and_end():
    s = _schedule(start=T0 + timedelta(hours=2), end=T0 + timedelta(hours=4))
    after = first_after(s, None)
    assert due_fire_times(s, after, T0 + timedelta(days=1)) == _hours(2, 3, 4)
    assert first_after(s, T0 + timedelta(hours=3)) == T0 + timedelta(hours=3)
