"""Fire times: cron expressions read by cronsim in a schedule's time zone, returned in UTC."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from seqline.pipeline.errors import ConfigError

__all__ = ["check_cron", "explain", "fire_times", "next_fire_times", "parse_time", "run_id_for",
           "zone"]

FIELDS = "minute hour day-of-month month day-of-week"
# crontab's nicknames, which cronsim does not read: the 5-field expression each stands for.
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
             "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
             "@hourly": "0 * * * *"}


@cache
def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (e.g. Europe/Berlin, UTC).

    Raises:
        ConfigError: an unknown zone, with the closest known names.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(name, sorted(available_timezones()), n=1)
        hint = f"did you mean {close[0]!r}?" if close else \
            "use an IANA name such as Europe/Berlin, America/New_York or UTC"
        raise ConfigError(f"unknown time zone {name!r} (--tz); {hint}") from None


def _expression(cron: str) -> str:
    return NICKNAMES.get(cron.strip().lower(), cron)


def check_cron(cron: str, tz: str) -> str:
    """Check a 5-field cron expression, and say in English when it fires.

    Args:
        cron: e.g. "30 2 * * 1-5", or a nickname such as @daily.
        tz: the schedule's zone (checked too).

    Returns:
        cronsim's explanation, e.g. "At 02:30 on Monday through Friday".

    Raises:
        ConfigError: a bad expression or zone, saying which field is wrong.
    """
    expression = _expression(cron)
    fields = len(expression.split())
    if expression.startswith("@"):  # a nickname that is not one
        close = difflib.get_close_matches(expression.lower(), list(NICKNAMES), n=1)
        raise ConfigError(f"cron expression {cron!r}: unknown nickname"
                          + (f"; did you mean {close[0]}?" if close else ".")
                          + f" The nicknames are {', '.join(NICKNAMES)}.")
    if fields != 5:  # cronsim would take 6 (seconds first); cron, Airflow and we take 5
        raise ConfigError(f"cron expression {cron!r} has {fields} field(s); give 5 ({FIELDS}), "
                          "e.g. '30 2 * * *' for 02:30 every day, or @daily")
    try:
        sim = CronSim(expression, datetime.now(zone(tz)))
        next(sim)  # an expression that can never fire fails here
    except CronSimError as exc:
        never = _date_never_occurs(expression)
        if never:
            raise ConfigError(f"cron expression {cron!r} never fires: {never}; pick days those "
                              "months have, or L for each month's last day (e.g. '0 0 L 2 *')"
                              ) from None
        raise ConfigError(f"cron expression {cron!r}: {str(exc).lower()}; the fields are "
                          f"{FIELDS}, e.g. '30 2 * * *' for 02:30 every day") from None
    except StopIteration:
        raise ConfigError(f"cron expression {cron!r} never fires; check its day-of-month and "
                          "month fields") from None
    return explain(cron)


def _date_never_occurs(expression: str) -> str | None:
    """Why a day-of-month cronsim refused is valid, but not in the months given (30 in
    February), or None when the day itself is wrong (32).

    Example: "0 0 30 2 *" -> "day 30 never occurs in month 2".
    """
    minute, hour, day, month, weekday = expression.split()
    try:  # the same days in every month: if that reads, the days are fine, the months lack them
        CronSim(" ".join((minute, hour, day, "*", weekday)), datetime.now(UTC))
    except CronSimError:
        return None
    return f"day {day} never occurs in month {month}"


def explain(cron: str) -> str:
    """cronsim's plain-English reading of a valid expression ("At 02:30 every day")."""
    return CronSim(_expression(cron), datetime.now(UTC)).explain()


def fire_times(cron: str, tz: str, after: datetime) -> Iterator[datetime]:
    """The fire times strictly after `after`, in order, forever.

    cronsim gets an aware time in the schedule's zone: a job at a fixed local time fires
    once per local day, also on DST change days (a nonexistent 02:30 fires at 03:00; an
    ambiguous 01:30 fires at its first occurrence), as Debian's cron does.

    Args:
        cron: the expression.
        tz: the schedule's zone.
        after: an aware time.

    Returns:
        An iterator of aware UTC datetimes.

    Example:
        "30 2 * * *" in America/New_York after 2026-03-08T00:00-05:00 gives
        2026-03-08T07:00Z (03:00 EDT: 02:30 did not exist), then 2026-03-09T06:30Z.
    """
    sim = CronSim(_expression(cron), after.astimezone(zone(tz)))
    last = after.astimezone(UTC)
    for local in sim:
        fire = local.astimezone(UTC)
        # Counting from the second pass of an ambiguous hour, cronsim may return the
        # first pass's time (earlier in UTC): it already fired then, so it is skipped.
        if fire > last:
            last = fire
            yield fire


def next_fire_times(cron: str, tz: str, after: datetime, count: int,
                    end: datetime | None = None) -> list[datetime]:
    """The next `count` fire times after `after`, none past `end`.

    Args:
        cron: the expression.
        tz: the schedule's zone.
        after: an aware time.
        count: how many.
        end: the schedule's end, if any.

    Returns:
        Aware UTC datetimes, oldest first.
    """
    found: list[datetime] = []
    for fire in fire_times(cron, tz, after):
        if len(found) == count or (end is not None and fire > end):
            break
        found.append(fire)
    return found


def parse_time(text: str, tz: str, option: str) -> datetime:
    """An ISO-8601 time from the command line; one without an offset is in the zone `tz`.

    Args:
        text: e.g. 2026-11-01, 2026-11-01T02:00, 2026-11-01T02:00:00+01:00 or …Z.
        tz: the zone of a time given without an offset.
        option: the option's name, for the message.

    Returns:
        An aware UTC datetime.

    Raises:
        ConfigError: not an ISO-8601 time.
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not an ISO-8601 time; write e.g. "
                          "2026-11-01, 2026-11-01T02:00 (in the schedule's zone) or "
                          "2026-11-01T02:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone(tz))
    return value.astimezone(UTC)


def run_id_for(name: str, fire_time: datetime, trigger: str) -> str:
    """The run id of a tick: the same fire time always gives the same id, so the run
    store's primary key refuses a second launch of one tick.

    Example:
        ("nightly", 2026-11-23T02:00Z, "schedule") -> "nightly-20261123T020000Z";
        trigger "backfill" -> "nightly-backfill-20261123T020000Z".
    """
    stamp = fire_time.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{name}-{stamp}" if trigger == "schedule" else f"{name}-{trigger}-{stamp}"
