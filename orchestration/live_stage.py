"""A running stage's figures as its events tell them: records done, waits, blocks in flight and
held by its reorder buffer (with their peaks between two samples), what holds that buffer back
(head of line), and block retries."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from seqline.orchestration.events import (
    BlockRetried,
    BlocksDone,
    Event,
    HeadOfLine,
    Occupancy,
    RecordsConsumed,
    WaitEnded,
    WaitStarted,
)

__all__ = ["HEAD", "PROGRESS", "LiveStage"]

# What a progress event carries: a sample's figures, without its stage run id and time.
PROGRESS = ("records_done", "rows_per_s", "waited_input", "waited_output", "in_flight",
            "reorder_held")
# A sample's head-of-line figures, as the newest HeadOfLine told them (not peaks: "blocked on
# seq N for 4.2 s" is a state, now); in a progress event only when known.
HEAD = ("watermark", "seq_done", "held_records", "held_bytes", "blocker_block", "blocker_seq",
        "blocker_attempt", "blocker_worker", "blocker_seconds")


@dataclass
class LiveStage:
    """One running stage, followed event by event, sampled about once a second.

    Example: BlocksDone(records_in=512), then Occupancy(in_flight=6, held=2) and
    Occupancy(in_flight=3, held=0), then `sample(now)` -> records_done 512, in_flight 6 and
    reorder_held 2 (the peaks since the last sample), rows_per_s over the interval.
    """

    stage_run_id: int
    started: float  # perf_counter
    records: int = 0
    taken: int | None = None  # a driver stage's own count of its input taken, if it differs
    waited_input: float = 0.0
    waited_output: float = 0.0
    ended_waits: float = 0.0  # driver stages: waits published as they ended
    # a driver stage that measures its own input waits (train: its steps'), the newest: the
    # figure its result will hold, so its live one is the same measure
    own_waits: float | None = None
    waiting: dict[str, float] | None = None  # "input"/"output" -> since (perf_counter)
    in_flight: int = 0
    max_in_flight: int = 0  # over the whole stage (the peaks below are per sample)
    peak_in_flight: int = 0
    held: int = 0
    peak_held: int = 0
    retries: int = 0
    head: HeadOfLine | None = None  # the newest
    sampled: tuple[float, int] = (0.0, 0)  # when (perf_counter), and records then

    def follow(self, event: Event) -> None:
        """Take in one of the stage's coalesced events (progress, occupancy, waits, retries)."""
        if isinstance(event, BlocksDone):
            self.records = event.counts.records_in
            self.waited_input, self.waited_output = event.waited_input, event.waited_output
        elif isinstance(event, RecordsConsumed):
            self.records = max(self.records, event.records)
            if event.taken is not None:
                self.taken = max(self.taken or 0, event.taken)
            if event.waited_input is not None:
                self.own_waits = event.waited_input
        elif isinstance(event, Occupancy | HeadOfLine):
            if isinstance(event, HeadOfLine):
                self.head = event
            self.in_flight, self.held = event.in_flight, event.held
            self.peak_in_flight = max(self.peak_in_flight, event.in_flight)
            self.max_in_flight = max(self.max_in_flight, event.in_flight)
            self.peak_held = max(self.peak_held, event.held)
        elif isinstance(event, WaitStarted):
            self.waiting = {**(self.waiting or {}), event.on: time.perf_counter()}
        elif isinstance(event, WaitEnded):
            (self.waiting or {}).pop(event.on, None)
            if event.on == "input":
                self.ended_waits += event.seconds
        elif isinstance(event, BlockRetried):
            self.retries += 1

    def waits(self, now: float) -> tuple[float, float]:
        """Seconds waited on input and on output so far, a wait still under way included."""
        waiting = self.waiting or {}
        waited_in = self.own_waits if self.own_waits is not None else \
            max(self.waited_input, self.ended_waits) \
            + (now - waiting["input"] if "input" in waiting else 0.0)
        waited_out = self.waited_output + (now - waiting["output"] if "output" in waiting
                                           else 0.0)
        return waited_in, waited_out

    def sample(self, now: float) -> dict[str, Any]:
        """A sample row (the columns of RunWriter.add_samples): the figures now, the peaks
        since the last sample (then reset to what is in flight and held now)."""
        waited_in, waited_out = self.waits(now)
        before, done_before = self.sampled
        self.sampled = (now, self.records)
        t = time.time()
        row = {"stage_run_id": self.stage_run_id, "t": t,
               "records_done": self.records, "waited_input": waited_in,
               "waited_output": waited_out, "in_flight": self.peak_in_flight,
               "reorder_held": self.peak_held,
               "rows_per_s": (self.records - done_before) / max(now - before, 1e-9),
               **self._head_now(t)}
        self.peak_in_flight, self.peak_held = self.in_flight, self.held
        return row

    def _head_now(self, t: float) -> dict[str, Any]:
        """The head-of-line columns at `t` (Unix seconds): the blocker's seconds so far."""
        head = self.head
        if head is None:
            return dict.fromkeys(HEAD)
        since = head.blocker_since
        return {"watermark": head.watermark, "seq_done": head.seq_done,
                "held_records": head.held_records, "held_bytes": head.held_bytes,
                "blocker_block": head.blocker_block, "blocker_seq": head.blocker_seq,
                "blocker_attempt": head.blocker_attempt, "blocker_worker": head.blocker_worker,
                "blocker_seconds": None if since is None else max(t - since, 0.0)}
