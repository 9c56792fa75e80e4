"""The assembly line on real threads: belts bound, time and publish their waits and stop with
the line; stages start in order, commit through futures, and join raises the first failure."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from seqline.orchestration.events import Event, WaitEnded, WaitStarted
from seqline.orchestration.line import _POLL as POLL  # a wait shorter than one is not told
from seqline.orchestration.line import AssemblyLine, Belt, Stopped
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.feed import ShardFeed

# How long a test waits for a thread it unblocked: far beyond one poll of a belt (0.05 s) on
# a loaded machine, and a hang fails the test instead of the suite's timeout.
SETTLE = 5.0


class Heard:
    """An in-memory subscriber that a test can wait on: the events, in publishing order."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, kind: type[Event], stage: str) -> Event:
        """The first `kind` event of `stage`, once published (a stage blocked on a belt longer
        than one poll says so: this is how a test knows it is blocked, without sleeping)."""
        def found() -> Event | None:
            return next((e for e in self.events
                         if isinstance(e, kind) and e.stage == stage), None)
        with self._changed:
            assert self._changed.wait_for(found, timeout=SETTLE), f"no {kind.__name__}"
            event = found()
        assert event is not None
        return event


class Outcome:
    """A call on a thread of its own: what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.value = call()
        except BaseException as exc:  # the test reads it
            self.error = exc

    def settled(self) -> Outcome:
        self.thread.join(timeout=SETTLE)
        assert not self.thread.is_alive(), "the call is still blocked"
        return self


def _belt(capacity: int = 2, heard: Heard | None = None) -> Belt[Any]:
    return Belt(capacity, threading.Event(), producer="write", consumer="features",
                publish=heard)


# -- Belt ------------------------------------------------------------------------------------

@pytest.mark.parametrize("capacity", [0, -3])
def test_belt_refuses_a_capacity_below_one_block(capacity):
    with pytest.raises(ConfigError, match=rf"^--queue must be at least 1 block, got {capacity}"):
        _belt(capacity)


def test_belt_hands_blocks_on_in_order_and_ends_at_close_without_waits():
    heard = Heard()
    belt = _belt(4, heard)
    for block in ("b0", "b1", "b2"):
        belt.put(block)
    belt.close()
    assert list(belt) == ["b0", "b1", "b2"]  # the end mark itself is never yielded
    assert heard.events == []  # no wait longer than one poll, nothing said


def test_belt_holds_at_most_its_capacity_then_the_producer_waits():
    heard, put, held_when_blocked = Heard(), [], []

    def producer() -> None:
        for block in range(10):
            belt.put(block)
            put.append(block)
        belt.close()

    def on_wait(event: Event) -> None:  # published on the producer's thread, inside put()
        if isinstance(event, WaitStarted) and not held_when_blocked:
            held_when_blocked.append(len(put))
        heard(event)

    belt = Belt(2, threading.Event(), producer="write", consumer="features", publish=on_wait)
    making = Outcome(producer)
    heard.wait_for(WaitStarted, "write")
    assert held_when_blocked == [2]  # two blocks on the belt, the third waits for room
    assert list(belt) == list(range(10))
    making.settled()
    producing = [e for e in heard.events if e.stage == "write"]  # (the consumer may wait too)
    starts = [e for e in producing if isinstance(e, WaitStarted)]
    ends = [e for e in producing if isinstance(e, WaitEnded)]
    assert {e.on for e in producing} == {"output"}
    assert len(starts) == len(ends) >= 1  # every wait said to start is said to end
    assert belt.waited_put >= sum(e.seconds for e in ends) - 1e-9  # and each is accounted
    assert min(e.seconds for e in ends) >= POLL


# (what blocks, the stage that waits, on what, blocks put first, the blocked call, the call
#  that frees it, the waiting side's account)
WAITS = [
    ("a producer on a full belt", "write", "output", 1,
     lambda b: b.put("late"), lambda b: next(iter(b)), lambda b: b.waited_put),
    ("a consumer on an empty belt", "features", "input", 0,
     lambda b: next(iter(b)), lambda b: b.put("late"), lambda b: b.waited_get),
]


@pytest.mark.parametrize(("stage", "on", "fill", "blocked", "frees", "waited"),
                         [c[1:] for c in WAITS], ids=[c[0] for c in WAITS])
def test_belt_times_a_wait_and_publishes_its_start_and_end(stage, on, fill, blocked, frees,
                                                           waited):
    heard = Heard()
    belt = _belt(1, heard)
    for block in range(fill):
        belt.put(block)
    before = waited(belt)  # (filling it took no wait worth a poll)
    waiting = Outcome(lambda: blocked(belt))
    started = heard.wait_for(WaitStarted, stage)
    assert started.on == on and waiting.thread.is_alive()
    frees(belt)
    waiting.settled()
    assert waiting.error is None
    ended = heard.wait_for(WaitEnded, stage)
    assert [type(e) for e in heard.events] == [WaitStarted, WaitEnded]  # the other side: none
    assert ended.on == on and ended.seconds >= POLL
    assert waited(belt) - before == pytest.approx(ended.seconds)  # one measure, both told


STOPS = [
    ("a producer on a full belt", "write", 1, lambda b: b.put("late")),
    ("a consumer on an empty belt", "features", 0, lambda b: next(iter(b))),
]


@pytest.mark.parametrize(("stage", "fill", "blocked"), [c[1:] for c in STOPS],
                         ids=[c[0] for c in STOPS])
def test_belt_stops_a_blocked_stage_when_the_line_stops(stage, fill, blocked):
    heard, stop = Heard(), threading.Event()
    belt: Belt[Any] = Belt(1, stop, producer="write", consumer="features", publish=heard)
    for block in range(fill):
        belt.put(block)
    waiting = Outcome(lambda: blocked(belt))
    heard.wait_for(WaitStarted, stage)
    stop.set()
    assert isinstance(waiting.settled().error, Stopped)


# -- AssemblyLine ----------------------------------------------------------------------------

def _line(tmp_path: Path, *stages: str) -> AssemblyLine:
    line = AssemblyLine(tmp_path / "run")
    for stage in stages:
        line.add_stage(stage)
    return line


def test_line_starts_a_stage_after_another_only_once_that_one_committed(tmp_path):
    line = _line(tmp_path, "write", "batches")
    batches_ran = threading.Event()
    early: list[bool] = []

    def write() -> Path:
        # Long enough for a stage that ignored `after` to have run; returns at once if it did.
        early.append(batches_ran.wait(0.3))
        return tmp_path / "write"

    def batches() -> Path:
        batches_ran.set()
        return line.committed("write") / "then-batches"

    line.start("batches", batches, after="write")  # started first: it must still wait
    line.start("write", write)
    line.join(["write", "batches"])
    assert early == [False]
    assert line.committed("batches") == tmp_path / "write" / "then-batches"
    assert line.failed_stage is None


def test_line_announces_before_it_commits_and_a_commit_announces_too(tmp_path):
    line = _line(tmp_path, "batches", "write")
    gate = threading.Event()

    def batches() -> Path:
        line.announce("batches")({"splits": 2})
        gate.wait(SETTLE)
        return tmp_path / "batches"

    line.start("batches", batches)
    assert line.announced("batches") == {"splits": 2}  # while the stage still runs
    assert not line.is_committed("batches")
    gate.set()
    line.join(["batches"])
    assert line.is_committed("batches")
    line.mark_committed("write", tmp_path / "write")  # (a reused stage: never started)
    assert line.announced("write") is None and line.committed("write") == tmp_path / "write"
    assert not line.is_committed("evaluation")  # a stage the line does not have


# (the first failure, what join raises, and its message; None: the failure itself)
FAILURES = [
    ("user code, wrapped and chained", ValueError("bad row"), StageError,
     r"^stage 'write' failed: ValueError: bad row$"),
    ("a StageError, as it is", StageError("stage 'write' failed on seq 3", stage="write",
                                          seq=3), None, None),
    ("a ConfigError, as it is", ConfigError("no column 'x'"), None, None),
    ("a full disk, naming the run's folder", OSError(errno.ENOSPC, "No space left on device"),
     StageError, r"^stage 'write': the disk is full: writing .*/run failed \(No space left"),
]


@pytest.mark.parametrize(("error", "raised", "message"), [c[1:] for c in FAILURES],
                         ids=[c[0] for c in FAILURES])
def test_line_join_raises_the_first_failure_not_a_later_one(tmp_path, error, raised, message):
    line = _line(tmp_path, "read", "write", "features")

    def write() -> Path:
        raise error

    def features() -> Path:  # fails too, but only because the line stopped
        assert line.stop.wait(SETTLE)
        raise RuntimeError("a later failure")

    def read() -> Path:  # blocked on a belt no one reads: stopped, not failed
        belt: Belt[str] = Belt(1, line.stop)
        while True:
            belt.put("block")

    for stage, work in (("read", read), ("write", write), ("features", features)):
        line.start(stage, work)
    with pytest.raises(raised or type(error), match=message) as caught:
        line.join(["read", "write", "features"])
    assert line.failed_stage == "write"
    if raised is None:
        assert caught.value is error
    else:
        assert caught.value.stage == "write" and caught.value.__cause__ is error
    with pytest.raises(Stopped):
        line.committed("read")
    assert not any(line.is_committed(s) for s in ("read", "write", "features"))


def test_line_halt_unblocks_a_stage_on_a_belt_and_it_ends_stopped(tmp_path):
    heard = Heard()
    line = _line(tmp_path, "write")

    def write() -> Path:
        belt: Belt[str] = Belt(1, line.stop, producer="write", publish=heard)
        while True:
            belt.put("block")

    line.start("write", write)
    heard.wait_for(WaitStarted, "write")
    started = time.monotonic()
    line.halt(SETTLE)
    assert time.monotonic() - started < SETTLE / 2  # it ended: halt did not wait it out
    line.join(["write"])  # a stopped stage is no failure
    assert line.failed_stage is None
    with pytest.raises(Stopped):
        line.committed("write")


def test_line_halt_wakes_a_reader_of_a_feed_that_gets_no_shard(tmp_path):
    line = AssemblyLine(tmp_path / "run")
    line.add_stage("write", ShardFeed("write", tmp_path / "write"))  # never writes a shard
    line.add_stage("model")
    reader_ended = threading.Event()

    def model() -> Path:
        try:
            return Path(str(list(line.blocks_of("write", on_wait=lambda seconds: None))))
        finally:
            reader_ended.set()

    line.start("model", model)
    line.halt(SETTLE)
    assert reader_ended.wait(SETTLE)  # else it would wait for a shard forever
    with pytest.raises(StageError, match=r"^stage 'write' stopped before storing all its "
                                         r"records: Stopped: the run is stopping") as caught:
        line.committed("model")
    assert isinstance(caught.value.__cause__, Stopped)


def test_line_halt_gives_up_after_its_timeout_on_a_stage_that_does_not_stop(tmp_path):
    line = _line(tmp_path, "model")
    gate = threading.Event()
    line.start("model", lambda: gate.wait(SETTLE) and tmp_path)  # a long library call
    started = time.monotonic()
    line.halt(0.2)
    took = time.monotonic() - started
    gate.set()
    assert 0.2 <= took < 2.0


@pytest.mark.parametrize("stage", ["read", "nowhere"])
def test_line_feed_of_a_stage_that_stores_no_records_says_which_to_read(tmp_path, stage):
    line = _line(tmp_path, "read")
    with pytest.raises(ConfigError, match=rf"^stage '{stage}' does not store records, so no "
                                          r"later stage can read them; read a tfrecord_write"):
        line.feed(stage)


def test_line_a_wait_for_a_commit_ends_when_the_line_stops(tmp_path):
    """A stage fed by a belt waits for its upstream's commit before its own (decision 66); a
    cancel stops the line while that upstream still finishes: the wait ends, Stopped, as a
    wait on a belt does, and the waiting stage never commits after the run gave it up."""
    line = AssemblyLine(tmp_path)
    line.add_stage("read")
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            line.wait_committed("read")
        except BaseException as exc:  # noqa: BLE001 - what ended it, for the test
            ended.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(3 * POLL)
    assert waiter.is_alive()  # `read` has not committed: it waits
    line.stop.set()
    waiter.join(timeout=SETTLE)
    assert not waiter.is_alive() and [type(e) for e in ended] == [Stopped]
    line.mark_committed("read", tmp_path)
    assert line.wait_committed("read") == tmp_path
