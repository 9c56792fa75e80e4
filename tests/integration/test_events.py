"""The run's event stream, as an in-memory subscriber sees it: complete, ordered and well
formed for a success, a failure, a cancel, a resume and a cached run, on every runner; and
a stage stopped once its input had reached it is cancelled (its seconds, in the store too),
one that never started or only waited for its input skipped."""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from collections import defaultdict

import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.api import execute
from seqline.orchestration.dashboard.page_data import _ran
from seqline.orchestration.events import (
    STAGE_ENDS,
    BlocksDone,
    Event,
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
from seqline.orchestration.stage_output import StageOutput
from seqline.orchestration.store import RunStore
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.errors import Cancelled, StageError
from tests.conftest import USERFNS
from tests.stopped import assert_reports_say_what_the_store_says, assert_stopped, fed

pytestmark = pytest.mark.integration

ROWS = 400
PIPELINE = """\
name: evented
stages:
  - {{name: read, component: ingest, params: {{format: csv, paths: [in.csv], block_records: 40}}}}
  - {{name: write, component: tfrecord_write, params: {{shard_records: 80}}}}
  - {{name: features, component: preprocess, params: {{fn: "latency:{fn}", fn_kwargs: {kwargs}}}}}
  - {{name: again, component: preprocess, params: {{fn: "latency:keep_even"}}}}
"""
RUNNERS = {"local": {}, "beam": {"mode": "multi_processing"}, "ray": {}}


class Story:
    """An in-memory subscriber: every event, in the order it was published."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, stage: str) -> list[Event]:
        return [e for e in self.events if e.stage == stage]

    def ended(self) -> dict[str, Event]:
        return {e.stage or "": e for e in self.events if isinstance(e, STAGE_ENDS)}


def _folder(tmp_path, fn="skewed", kwargs="{base_ms: 3, seed: 1}"):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(ROWS)))
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    (tmp_path / "p.yaml").write_text(PIPELINE.format(fn=fn, kwargs=kwargs))
    return load_pipeline(tmp_path / "p.yaml", COMPONENTS)


def _run(spec, tmp_path, run_id, story, runner="local", subscribers=None, **options):
    if runner == "ray":
        options.setdefault("working_dir", str(spec.base_dir))
    return execute(spec, root=tmp_path / "root", run_id=run_id, runner=runner,
                   subscribers=subscribers or [story], **{**RUNNERS[runner], **options})


def _well_formed(story: Story, stages: list[str], status: str) -> None:
    """The shape every run's story has, whatever happened in it."""
    events = story.events
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunEnded)
    assert events[-1].status == status
    planned = [e.stage for e in events if isinstance(e, StagePlanned)]
    assert planned == stages  # every stage planned, in pipeline order, before any starts
    first_start = next((i for i, e in enumerate(events) if isinstance(e, StageStarted)), None)
    assert first_start is None or first_start > max(
        i for i, e in enumerate(events) if isinstance(e, StagePlanned))
    ends = defaultdict(list)
    for e in events:
        if isinstance(e, STAGE_ENDS):
            ends[e.stage].append(e)
    assert {s: len(ends[s]) for s in stages} == dict.fromkeys(stages, 1)  # one end each
    # the run's end counts its stages as they ended (the run log and the dashboard say these)
    outcomes = [type(ends[s][0]) for s in stages]
    assert (events[-1].ran, events[-1].reused, events[-1].not_run) == (
        sum(t in (StageCommitted, StageFailed, StageCancelled) for t in outcomes),
        outcomes.count(StageReused), outcomes.count(StageSkipped))
    for stage in stages:
        mine = story.of(stage)
        end = ends[stage][0]
        assert all(not isinstance(e, STAGE_ENDS) for e in mine[mine.index(end) + 1:])
        started = [i for i, e in enumerate(mine) if isinstance(e, StageStarted)]
        if isinstance(end, StageCommitted | StageFailed | StageCancelled):
            assert started == [1]  # once, right after its plan, before any of its progress
        if isinstance(end, StageCancelled | StageSkipped):  # stopped: as its input had come
            assert_stopped(end, fed(events, stage, source=stage == "read"))
        if not started:  # nothing of its work is told (CI run 12: a fused stage's occupancy)
            assert all(isinstance(e, (StagePlanned, *STAGE_ENDS)) for e in mine)
        totals = [e.counts.records_in for e in mine if isinstance(e, BlocksDone)]
        assert totals == sorted(totals)  # totals only grow
        if isinstance(end, StageCommitted) and totals:
            assert end.counts.records_in == totals[-1]
            c = end.counts
            assert c.records_in == c.records_out + c.filtered + c.dead_lettered - c.exploded


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_successful_run_tells_every_stage_start_progress_and_commit(tmp_path, runner,
                                                                      request):
    if runner == "ray":
        request.getfixturevalue("ray_session")
    story = Story()
    result = _run(_folder(tmp_path), tmp_path, "ok", story, runner)
    stages = ["read", "write", "features", "again"]
    _well_formed(story, stages, "succeeded")
    assert all(isinstance(e, StageCommitted) for e in story.ended().values())
    assert [r.status for r in result.stages] == ["succeeded"] * 4
    assert story.ended()["again"].counts.records_out == ROWS // 2  # (it keeps even seq)
    assert result.plan is not None and result.plan.summary() == f"4 of 4 stages on {runner}"


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_failure_is_one_stage_failed_and_the_rest_stopped_with_the_reason(tmp_path, runner,
                                                                            request):
    if runner == "ray":
        request.getfixturevalue("ray_session")
    story = Story()
    spec = _folder(tmp_path, fn="boom_at", kwargs="{seq: 250}")
    result = _run(spec, tmp_path, "bad", story, runner, raise_on_error=False)
    assert isinstance(result.error, StageError)
    _well_formed(story, ["read", "write", "features", "again"], "failed")
    ended = story.ended()
    failed = [e for e in ended.values() if isinstance(e, StageFailed)]
    assert [e.stage for e in failed] == ["features"]
    assert "\n" not in failed[0].message and "seq 250" in failed[0].message
    assert failed[0].traceback and "boom_at" in failed[0].traceback
    # its seconds, told once: the event's are the store's and the Python API's
    with RunStore.open(tmp_path / "root") as store:
        stored = {s["name"]: s for s in store.show_run("bad")["stages"]}
    reported = {r.stage: r for r in result.stages}
    assert failed[0].seconds and failed[0].seconds > 0
    assert stored["features"]["seconds"] == reported["features"].seconds == failed[0].seconds
    assert_reports_say_what_the_store_says(result.stages, stored)  # and every stopped one
    # `again` (its thread waits on features' belt from the run's start) is cancelled if
    # features' blocks before seq 250 had reached it, else skipped
    assert_stopped(ended["again"], fed(story.events, "again"), "upstream `features` failed")
    run_end = story.events[-1]
    assert run_end.message == failed[0].message and run_end.error_stage == "features"


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_cancel_ends_every_stage_that_ran_as_cancelled_with_its_seconds(tmp_path, runner,
                                                                          request):
    if runner == "ray":
        request.getfixturevalue("ray_session")
    story = Story()
    spec = _folder(tmp_path, kwargs="{base_ms: 100, seed: 1}")
    sent = threading.Event()

    def ctrl_c_midway(event: Event) -> None:  # as a user would, once features is under way
        if isinstance(event, BlocksDone) and event.stage == "features" and not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C as Python handles it in a fresh process: a test run earlier in this worker may
    # have left another SIGINT handler behind (CI run 10: the cancel never came, three times)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Cancelled):
            _run(spec, tmp_path, "stopped", story, runner, subscribers=[story, ctrl_c_midway])
    finally:
        signal.signal(signal.SIGINT, before)
    _well_formed(story, ["read", "write", "features", "again"], "cancelled")
    ended = story.ended()
    assert isinstance(ended["features"], StageCancelled)  # stopped while it worked
    assert ended["features"].reason.endswith(" s: the run was cancelled (SIGINT)")
    assert all(isinstance(e, StageCommitted | StageCancelled | StageSkipped)
               for e in ended.values())
    assert not any(isinstance(e, StageFailed) for e in story.events)
    # The store says what the events said: features cancelled, its seconds and records so far.
    with RunStore.open(tmp_path / "root") as store:
        shown = store.show_run("stopped")
        stored = {s["name"]: s for s in shown["stages"]}
    assert shown["error"]["traceback"] is None  # a cancel, not an error: no traceback
    for name, end in ended.items():
        if isinstance(end, StageCancelled):
            row = stored[name]
            assert (row["status"], row["seconds"], row["reason"]) == (
                "cancelled", end.seconds, end.reason)
    assert stored["features"]["records_in"] > 0 and stored["features"]["started"]


def test_a_failure_stops_a_running_stage_before_it_as_cancelled(tmp_path):
    """`again` fails on its first block while `features`, before it, is still at work on
    the 39 blocks after (100 ms each; more than again's window and belt take in): features
    did not fail and was not skipped: it ran until the failure stopped it."""
    _folder(tmp_path, kwargs="{base_ms: 100, seed: 1}")
    text = (tmp_path / "p.yaml").read_text().replace(
        '"latency:keep_even"}', '"latency:boom_at", fn_kwargs: {seq: 0}}').replace(
        "block_records: 40", "block_records: 10").replace("shard_records: 80",
                                                          "shard_records: 10")
    (tmp_path / "p.yaml").write_text(text)
    spec = load_pipeline(tmp_path / "p.yaml", COMPONENTS)
    story = Story()
    with pytest.raises(StageError, match="bad value at seq 0"):
        _run(spec, tmp_path, "sibling", story)
    _well_formed(story, ["read", "write", "features", "again"], "failed")
    ended = story.ended()
    assert isinstance(ended["again"], StageFailed)
    features = ended["features"]
    assert isinstance(features, StageCancelled) and features.seconds > 0
    assert re.fullmatch(r"stopped after \d+\.\d\d s: `again` failed", features.reason)
    with RunStore.open(tmp_path / "root") as store:
        stored = {s["name"]: s for s in store.show_run("sibling")["stages"]}
    assert (stored["features"]["status"], stored["features"]["seconds"]) == (
        "cancelled", features.seconds)
    assert stored["features"]["records_in"] > 0
    assert stored["again"]["status"] == "failed"


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_resume_keeps_what_was_committed_and_runs_the_rest(tmp_path, runner, request):
    if runner == "ray":
        request.getfixturevalue("ray_session")
    spec = _folder(tmp_path, fn="boom_at", kwargs="{seq: 250}")
    with pytest.raises(StageError):
        _run(spec, tmp_path, "r", Story(), runner)
    fixed = _folder(tmp_path)  # the function mended
    story = Story()
    result = _run(fixed, tmp_path, "r", story, runner, resume=True)
    assert result.plan is not None
    assert result.plan.summary() == \
        f"2 of 4 stages on {runner}; 2 kept from the earlier attempt"
    _well_formed(story, ["read", "write", "features", "again"], "succeeded")
    ended = story.ended()
    assert isinstance(ended["write"], StageReused) and ended["write"].action == "keep"
    assert ended["write"].reused_from == "r"
    assert isinstance(ended["features"], StageCommitted)
    assert isinstance(story.events[0], RunStarted) and story.events[0].resume
    # the dashboard's run line counts as the terminal does: 2 ran now, 2 kept
    with RunStore.open(tmp_path / "root") as store:
        counted = _ran(store.show_run("r"))
    assert (counted["ran"], counted["kept"], counted["of"]) == (2, 2, 4)


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_cached_run_reuses_every_stage_and_runs_nothing(tmp_path, runner, request):
    if runner == "ray":
        request.getfixturevalue("ray_session")
    spec = _folder(tmp_path)
    _run(spec, tmp_path, "first", Story(), runner)
    story = Story()
    result = _run(spec, tmp_path, "second", story, runner)
    _well_formed(story, ["read", "write", "features", "again"], "succeeded")
    assert all(isinstance(e, StageReused) and e.action == "reuse" and e.reused_from == "first"
               for e in story.ended().values())
    assert not any(isinstance(e, StageStarted | BlocksDone) for e in story.events)
    assert [r.status for r in result.stages] == ["cached"] * 4
    assert result.plan is not None
    assert result.plan.summary() == f"0 of 4 stages on {runner}; 4 reused from run first"


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_stage_fed_by_one_that_fails_after_its_last_block_commits_nothing(
        tmp_path, runner, request, monkeypatch):
    """`read` fails at its end (2 bad records of 400, over its budget of 0.1 %), after it
    passed its last block on: `write`, which got them all, must not commit (it did, whenever
    it got there first). The second it waits here is when it used to."""
    if runner == "ray":
        request.getfixturevalue("ray_session")
    _folder(tmp_path)
    lines = [f"{i}\n" for i in range(ROWS)]
    lines[100], lines[300] = "one hundred\n", "three hundred\n"
    (tmp_path / "in.csv").write_text("x\n" + "".join(lines))
    text = (tmp_path / "p.yaml").read_text().replace(
        "name: evented\n", "name: evented\nerrors: {max_fraction: 0.001}\n").replace(
        "block_records: 40", "block_records: 40, schema: {x: int64}")
    (tmp_path / "p.yaml").write_text(text)
    spec = load_pipeline(tmp_path / "p.yaml", COMPONENTS)
    finish = StageOutput.finish

    def late(self, counts):
        if self.stage.name == "read":
            time.sleep(1.0)
        return finish(self, counts)

    monkeypatch.setattr(StageOutput, "finish", late)
    story = Story()
    with pytest.raises(StageError, match="exceeded its error budget: 2 of 400"):
        _run(spec, tmp_path, "over", story, runner)
    _well_formed(story, ["read", "write", "features", "again"], "failed")
    ended = story.ended()
    assert isinstance(ended["read"], StageFailed)
    # stopped (cancelled once their input had reached them, as _well_formed checks), each
    # saying why
    for stage in ("write", "features", "again"):
        assert_stopped(ended[stage], fed(story.events, stage), "upstream `read` failed")
    assert not list((tmp_path / "root" / "runs" / "over").glob("*/manifest.json"))


def test_a_cancel_after_the_run_succeeded_stops_only_its_verify(tmp_path):
    """A Ctrl-C as the run's success is recorded: the record is finished (succeeded), and the
    cancel says the run succeeded, its id, and that only verify was stopped (it said "before
    the run started: nothing ran", or cut the record halfway)."""
    story = Story()
    spec = _folder(tmp_path)

    def ctrl_c_at_the_end(event: Event) -> None:
        if isinstance(event, RunEnded):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # (Python runs the handler at once: here, if it is not held)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Cancelled) as stopped:
            _run(spec, tmp_path, "late", story, subscribers=[story, ctrl_c_at_the_end],
                 verify=True)
    finally:
        signal.signal(signal.SIGINT, before)
    assert (stopped.value.run_id, stopped.value.succeeded) == ("late", True)
    assert [e.status for e in story.events if isinstance(e, RunEnded)] == ["succeeded"]
    with RunStore.open(tmp_path / "root") as store:
        shown = store.show_run("late")
    assert shown["status"] == "succeeded"
    assert {s["status"] for s in shown["stages"]} == {"succeeded"}
