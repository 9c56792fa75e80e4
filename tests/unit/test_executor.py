"""run_plan on a tiny real pipeline (300 CSV rows, the local runner's threads): every stage ends
exactly once, as committed, failed, cancelled or skipped with the reason, or reused; and a
stage's end is published once however many threads end it."""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.api import execute, plan_pipeline
from seqline.orchestration.events import (
    STAGE_ENDS,
    BlocksDone,
    Event,
    EventBus,
    RunEnded,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StagePlanned,
    StageReused,
    StageSkipped,
    StageStarted,
)
from seqline.orchestration.executor import RunContext, run_plan
from seqline.orchestration.line import AssemblyLine
from seqline.orchestration.runners import make_runner
from seqline.orchestration.stage_output import Tally
from seqline.pipeline.artifacts import MANIFEST
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.errors import StageError
from seqline.pipeline.specs import PipelineSpec
from seqline.pipeline.tasks import Counts
from tests.conftest import USERFNS
from tests.stopped import assert_stopped, fed

ROWS = 300
STAGES = ["read", "write", "features", "again", "last"]
KEEP_EVEN = "{fn: 'latency:keep_even', fn_kwargs: {base_ms: 0.2, seed: %d}}"
BOOM = "{fn: 'latency:boom_at', fn_kwargs: {seq: 120, base_ms: 0.2}}"  # (120: an even seq)


class Story:
    """An in-memory subscriber: every event, in the order it was published."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def ends(self) -> dict[str, Event]:
        """Each stage's end, after checking that every stage ended exactly once."""
        ended = Counter(e.stage for e in self.events if isinstance(e, STAGE_ENDS))
        assert ended == Counter(STAGES), ended
        return {e.stage or "": e for e in self.events if isinstance(e, STAGE_ENDS)}

    def of(self, kind: type[Event]) -> list[str]:
        return [e.stage or "" for e in self.events if isinstance(e, kind)]


def _spec(folder: Path, failing: str | None = None, last_seed: int = 0) -> PipelineSpec:
    """read -> write -> features -> again -> last, each preprocess keeping even seqs (so
    `features` makes 150 of 300), or `failing` raising on seq 120."""
    params = {"features": KEEP_EVEN % 0, "again": KEEP_EVEN % 0, "last": KEEP_EVEN % last_seed}
    if failing is not None:
        params[failing] = BOOM
    folder.mkdir(exist_ok=True)
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(ROWS)))
    shutil.copy(USERFNS / "latency.py", folder / "latency.py")
    (folder / "p.yaml").write_text(
        "name: tiny\nstages:\n"
        "  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], "
        "block_records: 50}}\n"
        "  - {name: write, component: tfrecord_write, params: {shard_records: 100}}\n"
        + "".join(f"  - {{name: {name}, component: preprocess, params: {params[name]}}}\n"
                  for name in ("features", "again", "last")))
    return load_pipeline(folder / "p.yaml", COMPONENTS)


@pytest.fixture
def runner():
    with make_runner("local", mode="thread", workers=2) as threads:
        yield threads


def _run(spec: PipelineSpec, root: Path, run_id: str, runner) -> Story:
    """Plan (with the run store, if the root has one) and run, the events told to a Story."""
    story = Story()
    plan = plan_pipeline(spec, root=root, run_id=run_id, mode="thread")
    run_plan(plan, spec, runner, root, EventBus(story))
    return story


def _committed(root: Path, run_id: str, stage: str) -> bool:
    return (root / "runs" / run_id / stage / MANIFEST).exists()


def test_run_plan_tells_a_run_in_order_and_commits_every_stage_once(tmp_path, runner):
    root = tmp_path / "root"
    story = _run(_spec(tmp_path / "p"), root, "r", runner)
    events = story.events
    assert isinstance(events[0], RunStarted) and events[0].run_id == "r"
    assert story.of(StagePlanned) == STAGES  # all planned, in order, before any starts
    last_planned = max(i for i, e in enumerate(events) if isinstance(e, StagePlanned))
    assert all(i > last_planned for i, e in enumerate(events) if isinstance(e, StageStarted))
    assert sorted(story.of(StageStarted)) == sorted(STAGES)
    ends = story.ends()
    assert all(isinstance(e, StageCommitted) for e in ends.values())
    counts = {name: (e.counts.records_in, e.counts.records_out) for name, e in ends.items()
              if isinstance(e, StageCommitted)}
    assert counts == {"read": (ROWS, ROWS), "write": (ROWS, ROWS), "features": (ROWS, 150),
                      "again": (150, 150), "last": (150, 150)}
    assert all(_committed(root, "r", stage) for stage in STAGES)
    assert not any(isinstance(e, RunEnded) for e in events)  # the caller ends the run


# (the stage whose function raises, the stages after it)
FAILURES = [
    ("a middle stage", "features", ["again", "last"]),
    ("the last stage", "last", []),
]


@pytest.mark.parametrize(("failing", "downstream"), [c[1:] for c in FAILURES],
                         ids=[c[0] for c in FAILURES])
def test_run_plan_fails_one_stage_and_stops_the_others(tmp_path, runner, failing, downstream):
    """The failing stage is failed; every other that its input had reached is cancelled,
    with the seconds it ran in its reason; one that only waited for its input (on the
    assembly line every stage's thread starts with the run) is skipped ("not run: …")."""
    root = tmp_path / "root"
    story = Story()
    spec = _spec(tmp_path / "p", failing=failing)
    plan = plan_pipeline(spec, root=root, run_id="r", mode="thread")
    with pytest.raises(StageError) as caught:
        run_plan(plan, spec, runner, root, EventBus(story))
    assert caught.value.stage == failing and caught.value.seq == 120
    ends = story.ends()
    assert story.of(StageFailed) == [failing]
    failed = ends[failing]
    assert isinstance(failed, StageFailed) and failed.seq == 120
    assert "\n" not in failed.message and "bad value at seq 120" in failed.message
    assert failed.traceback is not None and "boom_at" in failed.traceback
    for stage in downstream:
        assert_stopped(ends[stage], fed(story.events, stage), f"upstream `{failing}` failed")
    upstream = STAGES[:STAGES.index(failing)]
    for stage in upstream:  # done before the failure, or stopped by it
        end = ends[stage]
        if not isinstance(end, StageCommitted):
            assert_stopped(end, fed(story.events, stage, source=stage == "read"),
                           f"`{failing}` failed")
    for stage in STAGES:  # no artifact of a stage that did not commit
        assert _committed(root, "r", stage) == isinstance(ends[stage], StageCommitted), stage


def test_run_plan_reuses_committed_stages_and_runs_the_changed_one_on_their_output(tmp_path,
                                                                                   runner):
    root = tmp_path / "root"
    execute(_spec(tmp_path / "p"), root=root, run_id="first", verify=False, mode="thread")
    first = {s: (root / "runs" / "first" / s / MANIFEST).read_text() for s in STAGES}
    story = _run(_spec(tmp_path / "p", last_seed=1), root, "second", runner)  # `last` changed
    ends = story.ends()
    reused = {name: e for name, e in ends.items() if isinstance(e, StageReused)}
    assert sorted(reused) == ["again", "features", "read", "write"]
    assert {e.action for e in reused.values()} == {"reuse"}
    assert {e.reused_from for e in reused.values()} == {"first"}
    assert reused["features"].counts == Counts(ROWS, 150, filtered=150)
    assert story.of(StageStarted) == ["last"]  # reused stages are reported, not run
    last = ends["last"]
    assert isinstance(last, StageCommitted) and last.counts.records_in == 150  # again's, read
    for stage in reused:  # linked into this run as they were committed
        assert (root / "runs" / "second" / stage / MANIFEST).read_text() == first[stage]


def _context(tmp_path: Path, runner, story: Story) -> RunContext:
    spec = _spec(tmp_path / "p")
    root = tmp_path / "root"
    plan = plan_pipeline(spec, root=root, run_id="r", mode="thread")
    folder = root / "runs" / "r"
    return RunContext(plan, spec, root, folder, runner, AssemblyLine(folder), EventBus(story),
                      Tally())


def _commit(stage: str | None) -> StageCommitted:
    return StageCommitted(stage=stage, counts=Counts(ROWS, ROWS), blocks=3, seq_min=0,
                          seq_max=ROWS - 1, seconds=0.1, waited_input=0.0, waited_output=0.0,
                          max_in_flight=2, block_retries=0)


CANCELLED = "not run: the run was cancelled (SIGTERM)"
STOPPED = StageCancelled(stage="write", seconds=1.5,
                         reason="stopped after 1.50 s: the run was cancelled (SIGTERM)")
# (the end published first, then a second end of the same stage, which is dropped)
SECOND_ENDS = [
    ("a commit, then a cancel's stop", _commit("write"), STOPPED),
    ("a cancel's stop, then a late commit", STOPPED, _commit("write")),
    ("a cancel's skip, then a late commit", StageSkipped(stage="write", reason=CANCELLED),
     _commit("write")),
    ("a failure, then a stop", StageFailed(stage="write", message="boom", traceback=None,
                                           seq=None),
     StageCancelled(stage="write", seconds=0.2, reason="stopped after 0.20 s: `write` failed")),
]


@pytest.mark.parametrize(("first", "second"), [c[1:] for c in SECOND_ENDS],
                         ids=[c[0] for c in SECOND_ENDS])
def test_run_context_end_publishes_a_stages_end_once(tmp_path, runner, first, second):
    story = Story()
    run = _context(tmp_path, runner, story)
    other = _commit("read")
    run.end(first)
    run.end(second)
    run.end(other)  # another stage's end still goes out
    run.end(_commit(None))  # an end of no stage is none
    assert story.events == [first, other]


def test_the_bus_drops_what_a_stage_thread_publishes_after_its_end_and_the_runs():
    """A cancel leaves a stage's thread running for the process to end (AssemblyLine.halt):
    what it still publishes, progress after its stage was skipped or after RunEnded, reaches
    no subscriber (CI: a BlocksDone after RunEnded on a loaded Ray run)."""
    story = Story()
    bus = EventBus(story)
    progress = BlocksDone(stage="features", counts=Counts(40, 40), blocks=1, waited_input=0.0,
                          waited_output=0.0)
    skipped = StageSkipped(stage="features", reason=CANCELLED)
    ended = RunEnded(status="cancelled", ran=1, reused=0)
    later = StageStarted(stage="again")
    bus.publish(progress)
    bus.publish(skipped)
    bus.publish(progress)  # the stage's story ended
    bus.publish(later)  # another stage's goes on
    bus.publish(ended)
    bus.publish(StageSkipped(stage="again", reason=CANCELLED))  # the run's ended
    assert story.events == [progress, skipped, later, ended]


def test_the_bus_tells_each_stage_in_order_and_holds_no_stage_up_for_another():
    """Four stages publishing side by side: each subscriber sees each stage's events in the
    order published, and a subscriber slow on one stage's event (the run store writing a
    commit) does not hold up the others'."""
    first, second = Story(), Story()
    slow = threading.Event()

    def writing(event: Event) -> None:
        if event.stage == "s0" and isinstance(event, BlocksDone) and event.blocks == 1:
            assert slow.wait(timeout=30), "another stage's events never went out meanwhile"

    bus = EventBus(writing, first, second)

    def publish(stage: str) -> None:
        for block in range(1, 301):
            bus.publish(BlocksDone(stage=stage, counts=Counts(block, block), blocks=block,
                                   waited_input=0.0, waited_output=0.0))
        if stage == "s3":
            slow.set()

    threads = [threading.Thread(target=publish, args=(f"s{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for story in (first, second):
        for stage in ("s0", "s1", "s2", "s3"):
            assert [e.blocks for e in story.events if e.stage == stage] == list(range(1, 301))
