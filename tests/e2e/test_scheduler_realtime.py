"""Real time: an every-minute schedule under `seqline scheduler` for about three minutes."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests import commands
from tests.commands import EXE
from tests.conftest import USERFNS
from tests.readers import read_json

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
# 14 one-row blocks of 5 s each on one worker: a run takes about 72 s, so it outlasts the
# minute to the next tick (skipped) but not two (the one after runs).
SLOW = """\
name: slow
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 1}}
  - {name: work, component: preprocess,
     params: {fn: "latency:skewed", fn_kwargs: {base_ms: 5000, slow_every: 1000000}}}
"""


def _seqline(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return commands.seqline(*args, "--root", str(folder / "root"), cwd=folder, timeout=120)


def _json(folder: Path, *args: str):
    """What `seqline ARGS --json` says, read in this process: the test looks every 5 s for
    minutes, and each look as a process cost 0.45 CPU-s (tests/readers.py)."""
    return read_json(*args, "--root", str(folder / "root"))


def _ticks(folder: Path) -> list[dict]:
    return list(reversed(_json(folder, "schedule", "show", "minutely")["ticks"]))


def _wait(what, predicate, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(2)  # the runs take minutes
    raise AssertionError(f"{what}: not within {timeout} s")


def _third_launched(folder: Path) -> list[dict] | None:
    ticks = _ticks(folder)
    return ticks if len(ticks) >= 3 and ticks[2]["status"] == "launched" else None


def _working(folder: Path) -> bool:
    runs = _json(folder, "runs", "list")
    return bool(runs) and any(s["name"] == "work" and s["status"] == "running" for s in
                              _json(folder, "runs", "show", runs[0]["run_id"])["stages"])


def _status(folder: Path, run_id: str) -> str | None:
    return next((r["status"] for r in _json(folder, "runs", "list") if r["run_id"] == run_id),
                None)


def _all_ended(folder: Path) -> list[dict] | None:
    runs = _json(folder, "runs", "list")
    return runs if all(r["status"] != "running" for r in runs) else None


def test_scheduler_every_minute_skips_while_a_run_goes_and_stops_on_sigterm(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(14)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (tmp_path / "slow.yaml").write_text(SLOW)
    assert _seqline(tmp_path, "schedule", "add", "minutely", "slow.yaml", "--cron",
                    "* * * * *", "--workers", "1").returncode == 0
    with open(tmp_path / "err", "w") as err:  # the child keeps its own copy of the file
        daemon = subprocess.Popen([EXE, "scheduler", "--root", str(tmp_path / "root")],
                                  stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    try:
        _wait("the first run's slow stage", lambda: _working(tmp_path), timeout=3 * 60)
        # New input, so the next run is not a cache hit of this one (it would take 2 s).
        with open(tmp_path / "in.csv", "a") as more:
            more.write("14\n")
        # launched, skipped (the first run still goes), launched: about 3 minutes.
        ticks = _wait("three ticks, the third launched", lambda: _third_launched(tmp_path),
                      timeout=4 * 60)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert [t["status"] for t in ticks[:3]] == ["launched", "skipped", "launched"]
    assert ticks[1]["reason"] == (f"overlap skip: the previous run {ticks[0]['run_id']} was "
                                  "still going") and ticks[1]["run_id"] is None
    log = (tmp_path / "err").read_text()
    assert f"launched run {ticks[0]['run_id']}" in log and "skipped: overlap skip" in log
    assert "scheduler stopped (SIGTERM)" in log
    last = ticks[2]["run_id"]
    assert _wait("the last run going on without the scheduler",
                 lambda: _status(tmp_path, last) == "running", timeout=60)
    runs = _wait("every run to end", lambda: _all_ended(tmp_path), timeout=3 * 60)
    spans = sorted((datetime.fromisoformat(r["started"]), datetime.fromisoformat(r["finished"]),
                    r["status"], r["trigger"]) for r in runs)
    assert [s[2:] for s in spans] == [("succeeded", "schedule")] * 2
    assert spans[0][1] <= spans[1][0]  # no overlapping runs
