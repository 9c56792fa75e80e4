"""Every status and trigger a run, a stage run or a tick can have: one home, as StrEnums."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["COMMITTED", "ENDED", "GOING", "RAN", "RunStatus", "StageStatus", "TickStatus",
           "TickTrigger", "Trigger", "attempts"]

# A StrEnum's members are their values (`RunStatus.failed == "failed"`, and JSON, SQL and
# templates see "failed"): rows and documents keep plain strings, code names them here.


class RunStatus(StrEnum):
    """What became of a run (the `runs.status` column)."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    interrupted = "interrupted"  # its driver stopped without finishing it; resumable
    cancelled = "cancelled"  # SIGTERM or Ctrl-C; resumable


class StageStatus(StrEnum):
    """What became of one attempt of a stage (the `stage_runs.status` column)."""

    pending = "pending"  # planned, waiting for its turn
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cached = "cached"  # reused from an earlier run's committed artifact
    skipped = "skipped"  # did nothing (never started, or only waited for its input): `reason`
    cancelled = "cancelled"  # stopped at work, before its commit, by a cancel or another
    # stage's failure (the `reason` says which); its seconds and records are what it did so far


class Trigger(StrEnum):
    """Why a run started (the `runs.trigger` column)."""

    manual = "manual"
    schedule = "schedule"
    backfill = "backfill"
    resume = "resume"


class TickStatus(StrEnum):
    """What became of a schedule's fire time (the `ticks.status` column)."""

    launching = "launching"  # recorded, its run not started yet (relaunched if left so)
    launched = "launched"  # its `seqline run` process started
    queued = "queued"  # waits for the schedule's previous run to end
    skipped = "skipped"  # no run: `reason` says why
    failed = "failed"  # the launch itself failed (`reason`)


class TickTrigger(StrEnum):
    """Which of the two ways a tick was recorded (a backfill may redo a scheduled time)."""

    schedule = "schedule"
    backfill = "backfill"


ENDED = (RunStatus.succeeded, RunStatus.failed, RunStatus.interrupted, RunStatus.cancelled)
"""A run in one of these is over: its record no longer changes."""

GOING = (RunStatus.queued, RunStatus.running)
"""A run in one of these still counts as going (a schedule's overlap policy asks)."""

COMMITTED = (StageStatus.succeeded, StageStatus.cached)
"""A stage run in one of these committed its artifact: a later run may reuse it."""

RAN = (StageStatus.succeeded, StageStatus.failed, StageStatus.cancelled, StageStatus.running)
"""A stage run in one of these does or did work in its run (not reused, not skipped)."""


def attempts(statuses: list[str]) -> int:
    """How many attempts at a stage did work, given its rows' statuses oldest first, the
    latest included: an attempt that never reached it (skipped) or reused it (cached, kept)
    does not count, as Airflow counts a task's tries; 0: it has not run in this run."""
    return sum(status in RAN for status in statuses)
