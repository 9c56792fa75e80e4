"""The scheduler launching real `seqline run` processes (simulated clock, real runs)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from seqline.orchestration.schedule.daemon import LEASE_TTL, Scheduler
from seqline.orchestration.schedule.launch import ProcessLauncher
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore
from tests.scheduling import Clock, quick_project

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)


class Killed(BaseException):
    """The scheduler dying right after starting the run's process, before recording it."""


@pytest.fixture
def folder(tmp_path):
    quick_project(tmp_path)
    return tmp_path


@pytest.fixture
def store(folder):
    opened = RunStore.open(folder / "root")
    yield opened
    opened.close()


def _wait_for_runs(store: RunStore, count: int, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = store.list_runs()
        if len(runs) >= count and all(r["status"] not in ("queued", "running") for r in runs):
            return runs
        time.sleep(0.5)
    raise AssertionError(f"runs did not end in {timeout} s: {store.list_runs()}")


def _wait_for_exit(launcher: ProcessLauncher, timeout: float = 120) -> dict[str, int]:
    ended: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while launcher.children and time.monotonic() < deadline:
        ended |= launcher.reap()
        time.sleep(0.2)
    return ended | launcher.reap()


def test_scheduler_launches_a_real_run_with_its_tick_and_log(folder, store):
    clock = Clock(T0)
    schedule, _ = new_schedule("quick", folder / "quick.yaml", "0 * * * *", at=T0, workers=1)
    store.schedules.add_schedule(schedule)
    launcher = ProcessLauncher(folder / "root", None, folder / "root" / "logs")
    scheduler = Scheduler(store, launcher, clock=clock)
    scheduler.acquire()
    clock.t = T0 + timedelta(hours=1, seconds=1)
    scheduler.tick_once()
    assert _wait_for_exit(launcher) == {"quick-20261120T010000Z": 0}
    [run] = _wait_for_runs(store, 1)
    assert (run["run_id"], run["status"], run["trigger"]) == (
        "quick-20261120T010000Z", "succeeded", "schedule")
    [tick] = store.schedules.ticks_of("quick")
    assert (tick.status, tick.run_id) == ("launched", run["run_id"])
    assert tick.pid is not None and tick.pid > 0  # the run's own process: liveness checks it
    log = (folder / "root" / "logs" / "quick-20261120T010000Z.log").read_text()
    assert "succeeded: ran 2 of 2 stages on local" in log


def test_scheduler_killed_after_launch_then_restarted_makes_exactly_one_run(folder, store):
    clock = Clock(T0)
    schedule, _ = new_schedule("quick", folder / "quick.yaml", "0 * * * *", at=T0, workers=1)
    store.schedules.add_schedule(schedule)
    logs = folder / "root" / "logs"
    first_launcher = ProcessLauncher(folder / "root", None, logs)

    def launches_then_dies(request):
        first_launcher(request)
        raise Killed

    first = Scheduler(store, launches_then_dies, clock=clock)
    first.acquire()
    clock.t = T0 + timedelta(hours=1, seconds=1)
    with pytest.raises(Killed):
        first.tick_once()
    # Restarted at once, while the first process may still be importing: the tick is still
    # `launching` and its run may not be in the store yet, so the successor launches it too.
    clock.t += LEASE_TTL
    second_launcher = ProcessLauncher(folder / "root", None, logs)
    second = Scheduler(store, second_launcher, clock=clock)
    second.acquire()
    second.tick_once()
    codes = sorted(_wait_for_exit(first_launcher).values())
    codes += sorted(_wait_for_exit(second_launcher).values())
    [run] = _wait_for_runs(store, 1)  # one run: the primary key refused the other
    assert run["status"] == "succeeded" and run["run_id"] == "quick-20261120T010000Z"
    assert 0 in codes and set(codes) <= {0, 2}
    if len(codes) == 2:  # the loser says why, in the tick's log (both tries appended)
        log = (logs / "quick-20261120T010000Z.log").read_text()
        assert "is already used" in log  # under the root (its folder) or in the run store
