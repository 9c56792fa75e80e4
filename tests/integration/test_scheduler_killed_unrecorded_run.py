"""A scheduler SIGKILLed after launching a run that then dies before recording itself (soak
finding 2): the next scheduler fails the tick with the reason, rather than leaving it
`launched` with a run that no store has; a tick whose pid was reused is not taken for a live
run, and one whose run recorded itself keeps its run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from seqline.orchestration.processes import pid_alive
from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore, Tick
from seqline.orchestration.store.liveness import HOST
from tests.scheduling import Clock, quick_project

pytestmark = pytest.mark.integration
SEQLINE = str(Path(sys.executable).parent / "seqline")
# Loaded by every Python process started with this PYTHONPATH: a run (its command names
# --run-id) waits at its very start until the gate file exists. The test then knows the run
# is still alive when it kills the scheduler, whatever the machine's load.
GATE_HOOK = """\
import os, sys, time
gate = os.environ.get("SOAK_TEST_GATE")
if gate and "--run-id" in sys.argv:
    while not os.path.exists(gate):
        time.sleep(0.05)
"""
# A component no one has: `seqline run` exits 2 as it loads it, before recording the run.
BROKEN = "name: quick\nstages:\n  - {name: read, component: no_such_component, params: {}}\n"


def _wait_for(what: str, found: Callable[[], object], timeout: float = 120) -> object:
    deadline = time.monotonic() + timeout
    while not (value := found()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout:.0f} s for {what}")
        time.sleep(0.05)
    return value


def _launched_tick(store: RunStore) -> Tick:
    """The tick the catch-up launched (the older missed fire times are recorded skipped)."""
    [tick] = [t for t in store.schedules.ticks_of("quick") if t.status != "skipped"]
    return tick


def _scheduler(root: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([SEQLINE, "scheduler", "--root", str(root)], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_a_killed_schedulers_run_that_ended_unrecorded_fails_its_tick_on_the_next(tmp_path):
    quick_project(tmp_path)
    root, hook, gate = tmp_path / "root", tmp_path / "hook", tmp_path / "gate"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(GATE_HOOK)
    env = {**os.environ, "PYTHONPATH": str(hook), "SOAK_TEST_GATE": str(gate)}
    store = RunStore.open(root)
    started: list[subprocess.Popen[bytes]] = []
    try:
        # Daily, at two hours ago, added three days ago: the first pass catches up the latest
        # fire time at once, and no other comes due while the test runs.
        fired = datetime.now(UTC) - timedelta(hours=2)
        schedule, _ = new_schedule("quick", tmp_path / "quick.yaml",
                                   f"{fired.minute} {fired.hour} * * *", workers=1,
                                   at=fired - timedelta(days=3))
        store.schedules.add_schedule(schedule)
        (tmp_path / "quick.yaml").write_text(BROKEN)  # broken after it was added
        started.append(_scheduler(root, env, tmp_path / "first.log"))
        tick = _wait_for("the tick's launch", lambda: next(
            (t for t in store.schedules.ticks_of("quick") if t.status == "launched"), None))
        assert isinstance(tick, Tick) and tick.pid is not None and tick.host == HOST
        started[0].send_signal(signal.SIGKILL)  # before it could collect its run's exit
        started[0].wait()

        started.append(_scheduler(root, env, tmp_path / "second.log"))
        _wait_for("the second scheduler's start", lambda: "scheduler started" in
                  (tmp_path / "second.log").read_text())
        time.sleep(2)  # a few passes while the run still waits at its gate
        assert _launched_tick(store).status == "launched", "a live run's tick was settled"

        gate.touch()  # the run goes on: it finds its pipeline broken and exits 2, unrecorded
        _wait_for("the run's end", lambda: not pid_alive(tick.pid or 0))
        failed = _wait_for("the tick's failure", lambda: (t := _launched_tick(store)).status ==
                           "failed" and t)
        assert isinstance(failed, Tick)
        assert failed.reason == (f"its run process ended before recording the run "
                                 f"{tick.run_id} in the run store; its exit code is not "
                                 "known (see its log)")
        assert store.schedules.run_states([tick.run_id or ""]) == {}
        assert "unknown component 'no_such_component'" in \
            (root / "logs" / f"{tick.run_id}.log").read_text()
        # (the scheduler records the failure, then logs it: the line comes a moment later)
        line = f"quick: tick {tick.fire_time.isoformat()} failed: its run process ended"
        _wait_for("the failure's log line", lambda: line in (tmp_path / "second.log").read_text(),
                  timeout=30)
    finally:
        gate.touch()
        for process in started:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=60)
        store.close()


def test_a_predecessors_tick_is_settled_by_its_pid_and_run_id_not_its_pid_alone(tmp_path):
    quick_project(tmp_path)
    store = RunStore.open(tmp_path / "root")
    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                                "--run-id", "quick-alive"])
    try:
        for name in ("quick", "reused", "alive", "recorded"):
            schedule, _ = new_schedule(name, tmp_path / "quick.yaml", "0 0 1 1 *", at=t0)
            store.schedules.add_schedule(schedule)
        # As a killed predecessor left them: launched on this host, with the pid it started.
        # `reused`: the pid is alive but is another process (this test's), its run unrecorded;
        # `alive`: a live process naming the run; `recorded`: a gone pid whose run recorded
        # itself (settled from the run's status, as ever).
        pids = {"reused": os.getpid(), "alive": sleeper.pid, "recorded": 2**22 + 1}
        for name, pid in pids.items():
            store.schedules.record_ticks([{"schedule": name, "fire_time": t0,
                                           "trigger": "schedule", "status": "launched",
                                           "reason": None, "run_id": f"quick-{name}"}])
            [tick] = store.schedules.ticks_of(name)
            store.schedules.update_tick(tick.id, host=HOST, pid=pid, launched=t0)
        store.create_run("quick-recorded", "quick", pipeline_file=None, fingerprint=None,
                         runner="local", options={}, trigger="schedule")
        store.finish_run("quick-recorded", "succeeded")
        scheduler = Scheduler(store, lambda request: None, clock=Clock(t0 + timedelta(1)))
        scheduler.acquire()
        scheduler.tick_once()
        got = {n: (t.status, t.reason) for n in pids
               for t in store.schedules.ticks_of(n)}
        assert got["reused"][0] == "failed"
        assert got["reused"][1].startswith("its run process ended before recording the run "
                                           "quick-reused in the run store")
        assert got["alive"] == ("launched", None)
        assert got["recorded"] == ("launched", None)
    finally:
        sleeper.kill()
        sleeper.wait()
        store.close()
