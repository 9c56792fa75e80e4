"""What each stage of a run did, gathered from the run's events (the Python API's answer)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seqline.orchestration.events import (
    BlocksDone,
    Event,
    RunEnded,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StagePlanned,
    StageReused,
    StageSkipped,
    StageStarted,
    StageStopped,
)
from seqline.orchestration.failures import error_line, error_traceback
from seqline.pipeline.errors import StageError
from seqline.pipeline.storage import Folder
from seqline.pipeline.tasks import Counts

if TYPE_CHECKING:
    from seqline.orchestration.plan import RunPlan

__all__ = ["RunReports", "StageReport"]


@dataclass
class StageReport:
    """What one stage did: its status, counts, time, waits and where its artifact is.

    `status`: succeeded, cached (reused from run `cached_from`), kept (committed by the
    resumed run's earlier attempt), failed, cancelled (stopped at work, before its commit,
    by a cancel or another stage's failure: `reason` says which), skipped (it did nothing:
    `reason` says why), or pending/running while the run goes. `seconds` is this
    run's: a stopped stage's until it stopped, 0 for a reused one, None (as its waits) for
    one that did nothing. A stage that stopped before its commit counts only its records in:
    it stored nothing.
    """

    stage: str
    component: str
    status: str = "pending"
    reason: str = ""
    counts: Counts = field(default_factory=Counts)
    blocks: int = 0
    seq_min: int | None = None
    seq_max: int | None = None
    seconds: float | None = None
    waited_input: float | None = None
    waited_output: float | None = None
    max_in_flight: int = 0
    block_retries: int = 0
    path: Folder | None = None
    cached_from: str | None = None
    took: float | None = None  # a reused stage: the seconds it took in run `cached_from`


class RunReports:
    """A subscriber: one StageReport per stage, in plan order, kept current by the events."""

    def __init__(self) -> None:
        self._reports: dict[str, StageReport] = {}
        self._lock = threading.Lock()

    @property
    def stages(self) -> list[StageReport]:
        with self._lock:
            return list(self._reports.values())

    def run_ended(self, plan: RunPlan, status: str, error: BaseException | None = None
                  ) -> RunEnded:
        """The run's end, its stages counted by how they ended: run now (to their commit,
        their failure or their stop), reused or kept, and the rest (they did nothing)."""
        ended = [r.status for r in self.stages]
        ran = sum(s in ("succeeded", "failed", "cancelled") for s in ended)
        reused = sum(s in ("cached", "kept") for s in ended)
        stage_error = error if isinstance(error, StageError) else None
        return RunEnded(status=status, ran=ran, reused=reused,
                        not_run=len(plan.steps) - ran - reused, kept=ended.count("kept"),
                        message=error_line(error) if error else None,
                        # a cancel is not an error: where the signal found the driver
                        # tells nothing (a traceback of SIGTERM's handler was stored)
                        traceback=error_traceback(error) if error and not isinstance(
                            error, KeyboardInterrupt) else None,
                        error_stage=stage_error.stage if stage_error else None,
                        error_seq=stage_error.seq if stage_error else None)

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, StagePlanned):
                self._reports[event.stage or ""] = StageReport(
                    event.stage or "", event.component, reason=event.reason)
                return
            report = self._reports.get(event.stage or "")
            if report is not None:
                _apply(report, event)


def _apply(report: StageReport, event: Event) -> None:
    if isinstance(event, StageStarted):
        report.status = "running"
    elif isinstance(event, BlocksDone):
        report.counts, report.blocks = event.counts, event.blocks
    elif isinstance(event, StageReused):
        report.status = "cached" if event.action == "reuse" else "kept"
        report.seconds, report.waited_input, report.waited_output = 0.0, 0.0, 0.0
        report.counts, report.seq_min, report.seq_max = event.counts, event.seq_min, event.seq_max
        report.path, report.took = event.path, event.took
        report.cached_from = event.reused_from if event.action == "reuse" else None
    elif isinstance(event, StageCommitted):
        report.status, report.counts, report.blocks = "succeeded", event.counts, event.blocks
        report.seq_min, report.seq_max, report.seconds = event.seq_min, event.seq_max, \
            event.seconds
        report.waited_input, report.waited_output = event.waited_input, event.waited_output
        report.max_in_flight, report.block_retries = event.max_in_flight, event.block_retries
        report.path = event.path
    elif isinstance(event, StageStopped):  # the account the run store takes too
        report.status = "failed" if isinstance(event, StageFailed) else "cancelled"
        if isinstance(event, StageCancelled):
            report.reason = event.reason
        report.counts, report.seconds = Counts(records_in=event.records_in), event.seconds
        report.waited_input, report.waited_output = event.waited_input, event.waited_output
        report.max_in_flight, report.block_retries = event.max_in_flight, event.block_retries
    elif isinstance(event, StageSkipped):
        report.status, report.reason = "skipped", event.reason
