"""What to do with a schedule's due fire times: launch, queue or skip each, and why (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from seqline.orchestration.schedule.times import fire_times, run_id_for
from seqline.orchestration.store import Schedule

__all__ = ["MISSED_AFTER", "Decision", "decide", "due_fire_times", "first_after"]

# A fire time found more than this after it passed was missed (the scheduler was down, or
# stalled): the catch-up policy decides about it. Within it, the tick is on time: a scheduler
# restarted by systemd, or a slow loop, is not an outage. A minute is cron's own resolution.
MISSED_AFTER = timedelta(seconds=60)


@dataclass(frozen=True)
class Decision:
    """What becomes of one fire time: `launching` (run it now), `queued` (run it after the
    schedule's running run) or `skipped` (never run; `reason` says why)."""

    fire_time: datetime
    status: str
    reason: str | None = None


def first_after(schedule: Schedule, last_fire: datetime | None) -> datetime:
    """The time after which a schedule's next fire time is counted (its cursor).

    Args:
        schedule: the schedule.
        last_fire: the fire time of its latest recorded scheduled tick, if any.

    Returns:
        The latest of: when it was added or resumed, its last tick, just before --start.
    """
    after = max(schedule.since, last_fire) if last_fire else schedule.since
    if schedule.start is not None:  # fire times are strictly after: start itself may fire
        after = max(after, schedule.start - timedelta(seconds=1))
    return after


def due_fire_times(schedule: Schedule, after: datetime, now: datetime) -> list[datetime]:
    """The fire times in (after, now], none past the schedule's end.

    Args:
        schedule: the schedule.
        after: its cursor (`first_after`).
        now: the time now.

    Returns:
        Aware UTC datetimes, oldest first (many after a long outage).
    """
    due: list[datetime] = []
    for fire in fire_times(schedule.cron, schedule.tz, after):
        if fire > now or (schedule.end is not None and fire > schedule.end):
            break
        due.append(fire)
    return due


def decide(schedule: Schedule, due: list[datetime], now: datetime,
           running: str | None) -> list[Decision]:
    """Decide each due fire time: the catch-up policy first, then the overlap policy.

    Catch-up (when fire times were missed: more than one is due, or one is late): `none`
    skips every late one; `latest` keeps only the most recent; `all` keeps the most recent
    `max_catchup`. Overlap, over what is kept, oldest first: `allow` launches every one;
    `queue` launches one and queues the rest behind it (and all of them while a run goes);
    `skip` skips an on-time tick while a run goes, but runs kept catch-up ticks in order,
    queued one after another (that is what `all` promises).

    Args:
        schedule: the schedule (its catchup, max_catchup and overlap).
        due: its due fire times, oldest first.
        now: the time now.
        running: the run id of its previous run if that is still going, else None.

    Returns:
        One decision per due fire time, in order.

    Example:
        catchup all, max_catchup 2, overlap skip, nothing running, due [1:00, 2:00, 3:00]
        found at 3:30 -> 1:00 skipped (missed), 2:00 launching, 3:00 queued.
    """
    kept, decisions = _catch_up(schedule, due, now)
    for fire in kept:
        late = now - fire > MISSED_AFTER
        if schedule.overlap == "allow" or running is None:
            decisions[fire] = Decision(fire, "launching")
            running = running or run_id_for(schedule.name, fire, "schedule")
        elif schedule.overlap == "skip" and not late:
            decisions[fire] = Decision(fire, "skipped", f"overlap skip: the previous run "
                                       f"{running} was still going")
        else:
            why = "catch-up all runs missed ticks in order" if schedule.overlap == "skip" \
                else "overlap queue"
            decisions[fire] = Decision(fire, "queued", f"{why}: waits for {running}")
    return [decisions[fire] for fire in due]


def _catch_up(schedule: Schedule, due: list[datetime],
              now: datetime) -> tuple[list[datetime], dict[datetime, Decision]]:
    """The fire times the catch-up policy keeps, and skip decisions for the others."""
    late = [fire for fire in due if now - fire > MISSED_AFTER]
    if not late and len(due) <= 1:
        return due, {}
    if schedule.catchup == "none":
        kept = [fire for fire in due if fire not in late]
        why = "catch-up none"
    elif schedule.catchup == "latest":
        kept = due[-1:]
        why = "catch-up latest runs only the most recent"
    else:
        kept = due[-schedule.max_catchup:] if schedule.max_catchup > 0 else []
        why = f"catch-up all runs only the most recent {schedule.max_catchup} (--max-catchup)"
    skipped = {fire: Decision(fire, "skipped", f"missed (found {_ago(now - fire)} after its "
                                               f"fire time): {why}")
               for fire in due if fire not in kept}
    return kept, skipped


def _ago(delta: timedelta) -> str:
    """A short duration: 45 s, 12 min, 3.0 h, 2.5 days."""
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
