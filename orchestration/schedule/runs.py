"""A tick's run: launching it and recording how that went, and whether it is still going."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from seqline.orchestration.schedule.launch import Launcher, LaunchRequest
from seqline.orchestration.schedule.times import run_id_for
from seqline.orchestration.store import Schedule, ScheduleStore, Tick
from seqline.orchestration.store.liveness import HOST, pid_alive
from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.statuses import GOING, TickStatus
from seqline.pipeline.errors import ConfigError

__all__ = ["START_GRACE", "launch_tick", "run_going"]

# A launched run not yet in the store is still starting (`seqline run` takes a second or two
# to import and record itself); past this, with no pid to check (another host), it is gone.
START_GRACE = timedelta(seconds=120)


def run_going(stored: ScheduleStore, tick: Tick, at: datetime) -> bool:
    """Whether a launched tick's run is still going.

    Going: in the store as queued or running (the reaper marks a run whose driver died
    `interrupted` first), or not in the store yet while its process lives (on this host) or
    was launched less than START_GRACE ago (elsewhere).

    Args:
        stored: the store's schedules.
        tick: a `launched` tick.
        at: the time now.

    Returns:
        True while the run goes.
    """
    if tick.run_id is None:
        return False
    state = stored.run_states([tick.run_id]).get(tick.run_id)
    if state is not None:
        return state in GOING
    if tick.pid is not None and tick.host == HOST:
        return pid_alive(tick.pid)
    return at - (tick.launched or tick.recorded) < START_GRACE


def launch_tick(stored: ScheduleStore, launcher: Launcher, schedule: Schedule, tick: Tick,
                at: datetime, log: Callable[[str], None]) -> bool:
    """Start a tick's run and record the outcome on the tick (launched, or failed and why).

    Args:
        stored: the store's schedules.
        launcher: starts the run.
        schedule: the tick's schedule.
        tick: the tick, recorded as launching (or queued) with its run id.
        at: the time now.
        log: where the outcome's line goes.

    Returns:
        True when the run was launched.
    """
    run_id = tick.run_id or run_id_for(schedule.name, tick.fire_time, tick.trigger)
    request = LaunchRequest(run_id, schedule.name, tick.fire_time, schedule.pipeline,
                            schedule.runner, schedule.workers, tick.trigger)
    try:
        pid = launcher(request)
    except (ConfigError, OSError) as exc:
        stored.update_tick(tick.id, status=TickStatus.failed, reason=f"launch failed: {exc}")
        log(f"{schedule.name}: tick {iso(tick.fire_time)} failed to launch: {exc}")
        return False
    stored.update_tick(tick.id, status=TickStatus.launched, run_id=run_id, launched=at,
                       host=HOST, pid=pid)
    log(f"{schedule.name}: tick {iso(tick.fire_time)} launched run {run_id}"
        + (f" (pid {pid})" if pid else ""))
    return True
