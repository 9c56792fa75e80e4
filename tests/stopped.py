"""How a stage that a failure or a cancel stopped must end, judged from the events its run
published: cancelled (its seconds in its reason) once any of its input had reached it;
skipped ("not run: …") if it never started, or started on the assembly line and only waited
for its input."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from seqline.orchestration.events import (
    BlocksDone,
    Event,
    Occupancy,
    RecordsConsumed,
    StageCancelled,
    StageSkipped,
    StageStarted,
    WaitEnded,
)

__all__ = ["assert_reports_say_what_the_store_says", "assert_stopped", "fed"]


def fed(events: Sequence[Event], stage: str, source: bool = False) -> bool:
    """Whether the events say any of `stage`'s input reached it (a source's is its files)."""
    mine = [e for e in events if e.stage == stage]
    if not any(isinstance(e, StageStarted) for e in mine):
        return False
    return source or any(
        isinstance(e, BlocksDone | RecordsConsumed)
        or (isinstance(e, Occupancy) and e.in_flight > 0)
        or (isinstance(e, WaitEnded) and e.on == "input") for e in mine)


def assert_stopped(end: Event, was_fed: bool, why: str | None = None) -> None:
    """`end` is a stopped stage's, as `was_fed` says it must be; `why`, when given, is what
    its reason must name ("upstream `features` failed")."""
    if not was_fed:
        assert isinstance(end, StageSkipped), end
        assert end.reason.startswith("not run: ") and why in (None, end.reason[9:]), end
        return
    assert isinstance(end, StageCancelled), end
    said = re.fullmatch(r"stopped after (\d+\.\d\d) s: (.*)", end.reason)
    assert said and why in (None, said.group(2)), end.reason
    assert end.seconds > 0 and said.group(1) == f"{end.seconds:.2f}", end


def assert_reports_say_what_the_store_says(reports: Sequence[Any],
                                           stored: dict[str, dict[str, Any]]) -> None:
    """The Python API's StageReports (`reports`) of the stages that did not commit say what
    their rows in the run store (`stored`, show_run's stages by name) say: one account."""
    for r in reports:
        row = stored[r.stage]
        if r.status not in ("failed", "cancelled", "skipped"):
            continue
        told = (r.status, r.seconds, r.waited_input, r.waited_output)
        assert told == (row["status"], row["seconds"], row["waited_input"],
                        row["waited_output"]), (r, row)
        if r.status != "skipped":  # (a stage that did nothing has no figures at all)
            assert (r.counts.records_in, r.max_in_flight, r.block_retries) == (
                row["records_in"], row["max_in_flight"], row["block_retries"]), (r, row)
