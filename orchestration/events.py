"""A run's story as one stream of typed, frozen events: the executor and the runners publish;
the run store, run.json, the terminal and the dashboard subscribe."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from seqline.pipeline.tasks import Counts

__all__ = ["STAGE_ENDS", "BlockRetried", "BlocksDone", "Event", "EventBus", "HeadOfLine",
           "Occupancy", "RecordsConsumed", "RunEnded", "RunStarted", "StageCancelled",
           "StageCommitted", "StageFailed", "StagePlanned", "StageReused", "StageSkipped",
           "StageStarted", "StageStopped", "Subscriber", "WaitEnded", "WaitStarted"]


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something that happened in a run, at `t` (Unix seconds), to `stage` (None: the run)."""

    kind: ClassVar[str] = "event"
    stage: str | None = None
    t: float = field(default_factory=time.time)

    def body(self) -> dict[str, Any]:
        """The event's own fields as JSON, without what the store keeps beside them (t,
        stage) and what it does not keep at all (fields marked `stored: False`)."""
        own = asdict(self)
        for f in fields(self):
            if f.name in ("t", "stage") or not f.metadata.get("stored", True):
                own.pop(f.name)
        return own


def _unstored() -> Any:
    """A field subscribers read but the events table leaves out (it is stored elsewhere)."""
    return field(default=None, metadata={"stored": False}, compare=False)


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    run_id: str
    pipeline: str
    runner: str
    workers: int
    window: int
    resume: bool = False


@dataclass(frozen=True, kw_only=True)
class StagePlanned(Event):
    """The plan's decision for a stage: run, reuse (a cached run's output) or keep (the
    resumed run's own), and why."""

    kind: ClassVar[str] = "stage_planned"
    component: str
    action: str
    reason: str
    reused_from: str | None = None
    cache_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class StageStarted(Event):
    kind: ClassVar[str] = "stage_started"


@dataclass(frozen=True, kw_only=True)
class StageReused(Event):
    """A stage not run now: its committed output, from run `reused_from` (cache) or from this
    run's earlier attempt (keep), is this run's."""

    kind: ClassVar[str] = "stage_reused"
    action: str  # "reuse" or "keep"
    reused_from: str
    took: float  # the seconds it took in that run
    counts: Counts
    seq_min: int | None
    seq_max: int | None
    path: Any = _unstored()  # Folder
    manifest: dict[str, Any] | None = _unstored()


@dataclass(frozen=True, kw_only=True)
class BlocksDone(Event):
    """A data stage's totals after its latest block (published once per block)."""

    kind: ClassVar[str] = "blocks_done"
    counts: Counts
    blocks: int
    waited_input: float
    waited_output: float


@dataclass(frozen=True, kw_only=True)
class Occupancy(Event):
    """The runner's window for a stage now: blocks in flight, and results the reorder buffer
    holds back waiting for an earlier block."""

    kind: ClassVar[str] = "occupancy"
    in_flight: int
    held: int


@dataclass(frozen=True, kw_only=True)
class HeadOfLine(Event):
    """A stage's reorder buffer after a wait for results (in place of that wait's Occupancy,
    so a block costs no more events than before): blocks in flight, results `held` (before
    the release), and why they are held.

    `watermark`: the highest seq released in order; `seq_done`: the highest seq of any block
    finished (None where the engine cannot know it yet: a parallel source numbers its records
    only once they leave in order); `held_records` / `held_bytes`: the results waiting, in
    records and Arrow bytes. `blocker_*`: the block they wait for (None: nothing waits), its
    first seq, the attempt running it, its worker (None: not known) and since when it runs
    (Unix seconds; the time it was handed to the engine where the engine does not tell).
    """

    kind: ClassVar[str] = "head_of_line"
    in_flight: int
    held: int
    watermark: int | None
    seq_done: int | None
    held_records: int
    held_bytes: int
    blocker_block: int | None = None
    blocker_seq: int | None = None
    blocker_attempt: int | None = None
    blocker_worker: str | None = None
    blocker_since: float | None = None


@dataclass(frozen=True, kw_only=True)
class RecordsConsumed(Event):
    """A driver stage's progress: records consumed so far (train: examples fed, all epochs),
    and, where the stage measures its own input waits (train: its steps'), those so far;
    `taken`, where it differs: the records of its input taken so far (train: each epoch
    takes the same ones again, so its largest epoch), a stopped stage's records in."""

    kind: ClassVar[str] = "records_consumed"
    records: int
    waited_input: float | None = None
    taken: int | None = None


@dataclass(frozen=True, kw_only=True)
class WaitStarted(Event):
    """A stage began waiting: on `input` (earlier stages) or `output` (room downstream)."""

    kind: ClassVar[str] = "wait_started"
    on: str


@dataclass(frozen=True, kw_only=True)
class WaitEnded(Event):
    kind: ClassVar[str] = "wait_ended"
    on: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BlockRetried(Event):
    """A block whose worker died runs again."""

    kind: ClassVar[str] = "block_retried"
    block: int | None  # None where the engine does not tell which (Beam)
    first_seq: int | None
    attempt: int | None


@dataclass(frozen=True, kw_only=True)
class StageCommitted(Event):
    kind: ClassVar[str] = "stage_committed"
    counts: Counts
    blocks: int
    seq_min: int | None
    seq_max: int | None
    seconds: float  # busy: from its start (after any wait for earlier stages) to its commit
    waited_input: float
    waited_output: float
    max_in_flight: int
    block_retries: int
    path: Any = _unstored()  # Folder
    manifest: dict[str, Any] | None = _unstored()


@dataclass(frozen=True, kw_only=True)
class StageStopped(Event):
    """A stage that started and ended before its commit (StageFailed, StageCancelled): what
    it had done by then, as the executor followed it, so that the run store and the Python
    API tell the same figures. `seconds` from its start to the stop."""

    kind: ClassVar[str] = "stage_stopped"
    seconds: float | None = None
    records_in: int = 0
    waited_input: float = 0.0
    waited_output: float = 0.0
    max_in_flight: int = 0
    block_retries: int = 0


@dataclass(frozen=True, kw_only=True)
class StageFailed(StageStopped):
    """The stage whose failure stopped the run: the one line the terminal prints, and where
    (`seconds` None: it failed before it started)."""

    kind: ClassVar[str] = "stage_failed"
    message: str
    traceback: str | None
    seq: int | None


@dataclass(frozen=True, kw_only=True)
class StageSkipped(Event):
    """A stage that did nothing (it never started, or only waited for input that never came)
    before another's failure or a cancel: no seconds, no records.

    Example reason: "not run: upstream `features` failed"."""

    kind: ClassVar[str] = "stage_skipped"
    reason: str


@dataclass(frozen=True, kw_only=True)
class StageCancelled(StageStopped):
    """A stage stopped at work (started, and its input had reached it) before its commit, by
    a cancel or by another stage's failure.

    Example reason: "stopped after 3.21 s: the run was cancelled (SIGINT)"."""

    kind: ClassVar[str] = "stage_cancelled"
    reason: str


@dataclass(frozen=True, kw_only=True)
class RunEnded(Event):
    kind: ClassVar[str] = "run_ended"
    status: str  # succeeded, failed or cancelled
    ran: int  # stages run now (to their commit, their failure or their stop: cancelled)
    reused: int  # stages reused or kept
    not_run: int = 0  # stages that did nothing (skipped)
    kept: int = 0  # of `reused`, those kept from the run's earlier attempt (a resume)
    message: str | None = None
    traceback: str | None = None
    error_stage: str | None = None
    error_seq: int | None = None


# How a stage's story ends: after one of these, nothing more of it is told (EventBus).
STAGE_ENDS = (StageCommitted, StageReused, StageFailed, StageCancelled, StageSkipped)

Subscriber = Callable[[Event], None]


class EventBus:
    """Hands every published event to every subscriber, in the publisher's thread.

    Stages publish from threads of their own. A stage's events reach the subscribers one at
    a time, in order, and its story ends at its end (committed, reused, failed, cancelled or
    skipped), the run's at RunEnded: what a stage's thread still publishes after that (a
    thread a cancel left running, which the process ends later) is dropped, so that no
    surface shows progress after an end, nor a stage ending twice (committing while a cancel
    stops it).
    Different stages' events go out side by side: one stage's commit, written to the run
    store, holds up no other stage.
    A subscriber that raises fails the publisher (the run store refusing a stage's commit
    fails that stage): subscribers that must not fail a run catch their own errors.
    """

    def __init__(self, *subscribers: Subscriber) -> None:
        self._subscribers = list(subscribers)
        self._lock = threading.Lock()
        self._stage_locks: dict[str | None, threading.RLock] = {}  # None: the run's own
        self._ended: set[str] = set()
        self._run_ended = False

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def publish(self, event: Event) -> None:
        with self._lock:
            told = self._stage_locks.setdefault(event.stage, threading.RLock())
        with told:  # re-entrant: a subscriber may publish
            if self._run_ended or event.stage in self._ended:
                return
            if isinstance(event, STAGE_ENDS):
                if event.stage is None:  # the end of no stage ends nothing
                    return
                self._ended.add(event.stage)
            if isinstance(event, RunEnded):
                self._run_ended = True
            for subscriber in list(self._subscribers):
                subscriber(event)

