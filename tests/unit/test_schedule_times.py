"""Fire times: cron in a time zone (DST days included), validation, ISO times, run ids."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from seqline.orchestration.schedule.times import (
    check_cron,
    fire_times,
    next_fire_times,
    parse_time,
    run_id_for,
    zone,
)
from seqline.pipeline.errors import ConfigError

# (zone, a DST change day, the local time of a daily job): spring forward and fall back, in
# both directions of the Atlantic. 02:30 does not exist on spring days; 01:30 (New York) and
# 02:30 (Berlin) happen twice on fall days.
DST_DAYS = [
    ("America/New_York", "2026-03-08", "30 2 * * *"),
    ("America/New_York", "2026-11-01", "30 1 * * *"),
    ("Europe/Berlin", "2026-03-29", "30 2 * * *"),
    ("Europe/Berlin", "2026-10-25", "30 2 * * *"),
]


def _local_days(cron: str, tz: str, first: str, days: int) -> Counter:
    start = datetime.fromisoformat(first).replace(tzinfo=ZoneInfo(tz)) - timedelta(days=2)
    end = start + timedelta(days=days + 4)
    fires = []
    for fire in fire_times(cron, tz, start):
        if fire >= end:
            break
        fires.append(fire)
    return Counter(f.astimezone(ZoneInfo(tz)).date().isoformat() for f in fires)


@pytest.mark.parametrize(("tz", "day", "cron"), DST_DAYS)
def test_times_daily_job_fires_once_per_local_day_across_dst(tz, day, cron):
    per_day = _local_days(cron, tz, day, 1)
    assert set(per_day.values()) == {1}, per_day
    assert len(per_day) == 5 and day in per_day


def test_times_spring_forward_fires_at_three_and_fall_back_at_the_first_pass():
    ny = "America/New_York"
    spring = next(fire_times("30 2 * * *", ny, datetime(2026, 3, 8, 5, tzinfo=UTC)))
    assert spring == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT: 02:30 never was
    fall = next(fire_times("30 1 * * *", ny, datetime(2026, 11, 1, 4, tzinfo=UTC)))
    assert fall == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT, the first pass


def test_times_hourly_job_fires_in_both_passes_of_the_repeated_hour():
    fires = next_fire_times("30 * * * *", "America/New_York",
                            datetime(2026, 11, 1, 4, tzinfo=UTC), 3)
    local = [f.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M %Z") for f in fires]
    assert local == ["00:30 EDT", "01:30 EDT", "01:30 EST"]


def test_times_counting_from_the_second_pass_never_goes_back():
    # 01:10 EST is after 01:30 EDT: the daily 01:30 already fired, next is the next day.
    second_pass = datetime(2026, 11, 1, 6, 10, tzinfo=UTC)
    assert next_fire_times("30 1 * * *", "America/New_York", second_pass, 1) == [
        datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]


def test_times_fire_times_are_strictly_after_and_stop_at_the_end():
    after = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
    fires = next_fire_times("0 * * * *", "UTC", after, 10, end=after + timedelta(hours=3))
    assert fires == [after + timedelta(hours=h) for h in (1, 2, 3)]


@pytest.mark.parametrize(("cron", "message"), [
    ("61 * * * *", r"'61 \* \* \* \*': bad minute"),
    ("* * *", r"has 3 field\(s\); give 5 \(minute hour"),
    ("0 0 * * * *", r"has 6 field\(s\)"),
    ("0 0 30 2 *", r"'0 0 30 2 \*' never fires: day 30 never occurs in month 2; pick days"),
    ("0 0 31 4,6 *", r"never fires: day 31 never occurs in month 4,6"),
    ("0 0 32 * *", r"'0 0 32 \* \*': bad day-of-month; the fields are minute hour"),
    ("every day", r"has 2 field\(s\)"),
    ("@daly", r"'@daly': unknown nickname; did you mean @daily\? The nicknames are @yearly, "),
    ("@whenever", r"'@whenever': unknown nickname\. The nicknames are"),
])
def test_times_bad_cron_is_refused_saying_what_is_wrong(cron, message):
    with pytest.raises(ConfigError, match=message):
        check_cron(cron, "UTC")


def test_times_good_cron_is_explained():
    assert check_cron("30 2 * * 1-5", "Europe/Berlin") == "At 02:30 on Monday through Friday"
    assert check_cron("@daily", "UTC").startswith("At 00:00")


@pytest.mark.parametrize(("tz", "message"), [
    ("Europe/Berlinn", r"unknown time zone 'Europe/Berlinn' \(--tz\); did you mean "
                       r"'Europe/Berlin'"),
    ("Mars/Olympus", r"unknown time zone 'Mars/Olympus'.*IANA name"),
    ("../etc/passwd", r"unknown time zone"),
])
def test_times_unknown_zone_is_refused(tz, message):
    with pytest.raises(ConfigError, match=message):
        zone(tz)


def test_times_iso_without_offset_is_in_the_schedules_zone():
    berlin = parse_time("2026-11-01T02:00", "Europe/Berlin", "--start")
    assert berlin == datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    assert parse_time("2026-11-01T02:00Z", "Europe/Berlin", "--start") == datetime(
        2026, 11, 1, 2, 0, tzinfo=UTC)
    assert parse_time("2026-11-01", "UTC", "--from") == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(ConfigError, match=r"--from 'yesterday' is not an ISO-8601 time"):
        parse_time("yesterday", "UTC", "--from")


def test_times_run_id_is_derived_from_the_fire_time():
    fire = datetime(2026, 11, 23, 3, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert run_id_for("nightly", fire, "schedule") == "nightly-20261123T020000Z"
    assert run_id_for("nightly", fire, "backfill") == "nightly-backfill-20261123T020000Z"
