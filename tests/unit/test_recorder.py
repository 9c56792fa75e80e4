"""RunRecorder fed hand-built runs' events on a real SQLite store, read back as `runs show`
prints them: each stage's status, counts, seconds, waits and reason, the failure's line and
traceback, a resumed run's attempts, and progress coalesced into a bounded count of events."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.events import (
    BlocksDone,
    EventBus,
    Occupancy,
    RunEnded,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StagePlanned,
    StageReused,
    StageSkipped,
    StageStarted,
    WaitEnded,
    WaitStarted,
)
from seqline.orchestration.plan import RunPlan, plan_run
from seqline.orchestration.recorder import RunRecorder
from seqline.orchestration.run_options import RunOptions
from seqline.orchestration.stage_output import Tally
from seqline.orchestration.store import RunStore
from seqline.pipeline.specs import PipelineSpec
from seqline.pipeline.tasks import Counts
from tests.recorded import project

PIPELINE = """\
name: recorded
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}
  - {name: write, component: tfrecord_write}
  - {name: features, component: preprocess, params: {fn: "fns:same"}}
  - {name: again, component: preprocess, params: {fn: "fns:same"}}
"""
STAGES = ["read", "write", "features", "again"]
FAILURE = "stage 'features' failed on seq 120 (block 1): ValueError: bad value at seq 120"
TRACEBACK = 'Traceback (most recent call last):\n  File "fns.py", line 2\nValueError: bad'
SKIPPED = "not run: upstream `features` failed"
KEPT = "kept: the earlier attempt committed it"
RERUN = "the earlier attempt did not commit it"
REUSED = "reused from run earlier (took 1.50 s)"
COALESCED = {"blocks_done", "occupancy", "records_consumed", "wait_started", "wait_ended"}


@pytest.fixture
def pipeline(tmp_path) -> PipelineSpec:
    return project(tmp_path, 300, PIPELINE)


@pytest.fixture
def store(tmp_path):
    with RunStore.open(tmp_path / "root") as opened:
        opened.create_run("r", "recorded", pipeline_file=None, fingerprint=None,
                          runner="local", options={})
        yield opened


def _plan(spec: PipelineSpec, root: Path, sample_seconds: float | None = 0.05,
          resume: bool = False, **actions: tuple[str, str | None, str]) -> RunPlan:
    """The planner's plan of run `r`, with some steps decided here: stage -> (action,
    reused_from, reason); `resume`: a plan to finish it (the store decides nothing here)."""
    plan = plan_run(spec, RunOptions(sample_seconds=sample_seconds), COMPONENTS, run_id="r",
                    root=root, store=None)
    steps = tuple(replace(s, action=actions[s.stage][0], reused_from=actions[s.stage][1],
                          reason=actions[s.stage][2]) if s.stage in actions else s
                  for s in plan.steps)
    return replace(plan, steps=steps, options=replace(plan.options, resume=resume))


def _recording(store: RunStore, plan: RunPlan, spec: PipelineSpec) -> EventBus:
    """The run's bus with its recorder, the run and its plan already told."""
    bus = EventBus(RunRecorder(store, plan, spec, COMPONENTS))
    bus.publish(RunStarted(run_id="r", pipeline=spec.name, runner="local", workers=2,
                           window=8, resume=plan.options.resume))
    for s in plan.steps:
        bus.publish(StagePlanned(stage=s.stage, component=s.component, action=s.action,
                                 reason=s.reason, reused_from=s.reused_from))
    return bus


def _folder(root: Path, stage: str) -> Path:
    folder = root / "runs" / "r" / stage
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _committed(root: Path, stage: str, records: int, **figures: Any) -> StageCommitted:
    shards = [{"path": "shard-000000.tfrecord.gz", "bytes": 939, "sha256": "ab" * 32}]
    return StageCommitted(
        stage=stage, counts=Counts(records, records), blocks=3, seq_min=0,
        seq_max=records - 1, **{"seconds": 0.8, "waited_input": 0.3, "waited_output": 0.1,
                                "max_in_flight": 3, "block_retries": 0, **figures},
        path=_folder(root, stage), manifest={"records_out": records, "shards": shards})


def _shown(store: RunStore) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    run = store.show_run("r")
    return run, {s["name"]: s for s in run["stages"]}


def test_recorder_records_how_each_stage_and_the_run_ended(tmp_path, pipeline, store):
    root = tmp_path / "root"
    plan = _plan(pipeline, root, read=("reuse", "earlier", REUSED))
    bus = _recording(store, plan, pipeline)
    tally = Tally()  # as the executor follows each stage, for the account of one that stops
    bus.subscribe(tally)
    bus.publish(StageReused(stage="read", action="reuse", reused_from="earlier", took=1.5,
                            counts=Counts(300, 300), seq_min=0, seq_max=299,
                            path=_folder(root, "read"), manifest={"records_out": 300}))
    bus.publish(StageStarted(stage="write"))
    bus.publish(StageStarted(stage="features"))
    bus.publish(BlocksDone(stage="write", counts=Counts(100, 100), blocks=1, waited_input=0.1,
                           waited_output=0.0))
    bus.publish(_committed(root, "write", 300, block_retries=1))
    bus.publish(BlocksDone(stage="features", counts=Counts(120, 120), blocks=1,
                           waited_input=0.02, waited_output=0.0))
    bus.publish(WaitStarted(stage="features", on="output"))
    time.sleep(0.06)  # a wait still under way when the stage fails: counted to its end
    bus.publish(StageFailed(stage="features", message=FAILURE, traceback=TRACEBACK, seq=120,
                            seconds=time.time() - (tally.started("features") or 0.0),
                            **tally.account("features")))
    bus.publish(StageSkipped(stage="again", reason=SKIPPED))
    bus.publish(RunEnded(status="failed", ran=3, reused=1, message=FAILURE, traceback=TRACEBACK,
                         error_stage="features", error_seq=120))

    run, stages = _shown(store)
    assert run["status"] == "failed" and run["finished"] is not None
    assert run["error"] == {"stage": "features", "seq": 120, "message": FAILURE,
                            "traceback": TRACEBACK}
    assert list(stages) == STAGES  # one row each, in plan order
    got = {name: (s["status"], s["records_in"], s["records_out"], s["cached_from"],
                  s["reason"], s["error"]) for name, s in stages.items()}
    assert got == {
        "read": ("cached", 300, 300, "earlier", REUSED, None),
        "write": ("succeeded", 300, 300, None, plan.step("write").reason, None),
        "features": ("failed", 120, None, None, plan.step("features").reason, FAILURE),
        "again": ("skipped", None, None, None, SKIPPED, None),
    }
    # attempts that did work: the reused and the skipped stage did not run
    assert [s["attempts"] for s in stages.values()] == [0, 1, 1, 0]
    write, features, again = stages["write"], stages["features"], stages["again"]
    assert (write["seconds"], write["waited_input"], write["waited_output"]) == (0.8, 0.3, 0.1)
    assert (write["max_in_flight"], write["block_retries"]) == (3, 1)
    assert stages["read"]["seconds"] == 0.0  # about nothing now: it ran in run `earlier`
    assert 0.06 <= features["seconds"] < 5 and features["waited_input"] == 0.02
    assert features["waited_output"] >= 0.06
    # it never started: no seconds, no waits, nothing counted
    assert (again["seconds"], again["started"], again["waited_input"]) == (None, None, None)
    artifacts = {(a["role"], Path(a["uri"]).name): a for a in write["artifacts"]}
    assert set(artifacts) == {("output", "write"), ("input", "read")}
    output = artifacts[("output", "write")]
    assert (output["kind"], output["records"], output["bytes"]) == ("records", 300, 939)
    assert output["checksum"].startswith("sha256:")
    assert [(a["role"], a["kind"]) for a in stages["read"]["artifacts"]] == [("output",
                                                                              "stream")]
    assert features["artifacts"] == [] and again["artifacts"] == []


def test_recorder_records_a_stopped_stage_as_cancelled_with_its_seconds_and_records(
        tmp_path, pipeline, store):
    """A cancel: the stages that had started are cancelled, with the seconds the event
    says (its reason says them too) and what they took in so far; the one that never
    started is skipped, with no seconds. The events table keeps both ends."""
    root = tmp_path / "root"
    plan = _plan(pipeline, root)
    bus = _recording(store, plan, pipeline)
    tally = Tally()
    bus.subscribe(tally)
    bus.publish(StageStarted(stage="read"))
    bus.publish(_committed(root, "read", 300))
    for stage in ("write", "features"):
        bus.publish(StageStarted(stage=stage))
    bus.publish(BlocksDone(stage="write", counts=Counts(100, 100), blocks=1, waited_input=0.1,
                           waited_output=0.0))
    stopped = {"write": 1.25, "features": 1.5}
    for stage, seconds in stopped.items():
        bus.publish(StageCancelled(stage=stage, seconds=seconds, reason=(
            f"stopped after {seconds:.2f} s: the run was cancelled (SIGINT)"),
            **tally.account(stage)))
    bus.publish(StageSkipped(stage="again", reason="not run: the run was cancelled (SIGINT)"))
    bus.publish(RunEnded(status="cancelled", ran=3, reused=0, not_run=1,
                         message="Cancelled: SIGINT"))

    run, stages = _shown(store)
    assert run["status"] == "cancelled"
    got = {name: (s["status"], s["records_in"], s["seconds"], s["reason"])
           for name, s in stages.items()}
    assert got == {
        "read": ("succeeded", 300, 0.8, plan.step("read").reason),
        "write": ("cancelled", 100, 1.25,
                  "stopped after 1.25 s: the run was cancelled (SIGINT)"),
        "features": ("cancelled", 0, 1.5,
                     "stopped after 1.50 s: the run was cancelled (SIGINT)"),
        "again": ("skipped", None, None, "not run: the run was cancelled (SIGINT)"),
    }
    assert stages["write"]["waited_input"] == 0.1 and stages["write"]["started"] is not None
    assert stages["again"]["started"] is None
    kinds = [e["kind"] for e in store.events_of("r")]
    assert kinds.count("stage_cancelled") == 2 and kinds.count("stage_skipped") == 1
    cancelled = next(e for e in store.events_of("r") if e["kind"] == "stage_cancelled")
    assert (cancelled["stage"], cancelled["seconds"]) == ("write", 1.25)


def test_recorder_stores_each_end_event_once_and_leaves_out_what_it_coalesces(
        tmp_path, pipeline, store):
    root = tmp_path / "root"
    bus = _recording(store, _plan(pipeline, root), pipeline)
    for stage in STAGES:
        bus.publish(StageStarted(stage=stage))
        bus.publish(WaitStarted(stage=stage, on="input"))
        bus.publish(WaitEnded(stage=stage, on="input", seconds=0.01))
        bus.publish(Occupancy(stage=stage, in_flight=2, held=1))
        bus.publish(BlocksDone(stage=stage, counts=Counts(300, 300), blocks=3,
                               waited_input=0.01, waited_output=0.0))
        bus.publish(_committed(root, stage, 300))
    bus.publish(RunEnded(status="succeeded", ran=4, reused=0))

    run, stages = _shown(store)
    assert (run["status"], run["error"]) == ("succeeded", None)
    assert {s["status"] for s in stages.values()} == {"succeeded"}
    events = store.events_of("r")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert kinds.count("stage_planned") == 4 and kinds.count("stage_committed") == 4
    assert not COALESCED & set(kinds)
    committed = next(e for e in events if e["kind"] == "stage_committed")
    assert committed["counts"]["records_in"] == 300 and committed["seconds"] == 0.8
    assert "path" not in committed and "manifest" not in committed  # stored elsewhere


@pytest.mark.parametrize("sample_seconds", [0.05, 5.0, None],
                         ids=["every 0.05 s", "a stage shorter than one interval", "never"])
def test_recorder_coalesces_progress_into_a_bounded_count_of_samples(
        tmp_path, pipeline, store, sample_seconds):
    root = tmp_path / "root"
    bus = _recording(store, _plan(pipeline, root, sample_seconds), pipeline)
    bus.publish(StageStarted(stage="write"))
    started, published = time.perf_counter(), 0
    while time.perf_counter() - started < 0.3:  # thousands of blocks, as fast as they come
        published += 1
        bus.publish(BlocksDone(stage="write", counts=Counts(published, published),
                               blocks=published, waited_input=0.0, waited_output=0.0))
    took = time.perf_counter() - started
    bus.publish(_committed(root, "write", published))
    for stage in ("read", "features", "again"):
        bus.publish(StageSkipped(stage=stage, reason="not run: a test"))
    bus.publish(RunEnded(status="succeeded", ran=4, reused=0))

    _, stages = _shown(store)
    progress = [e for e in store.events_of("r") if e["kind"] == "progress"]
    samples = store.samples_of(stages["write"]["stage_run_id"])
    assert published > 1000
    if sample_seconds is None:
        assert progress == [] and samples == []
        return
    assert {e["stage"] for e in progress} == {"write"}  # only a stage that ran is sampled
    # at most one a sampling interval, and one as it ends (+1: the stage began before `took`)
    assert 1 <= len(progress) <= took / sample_seconds + 3
    if sample_seconds > took:
        assert len(progress) == 1  # the one it gets as it ends
    assert len(samples) == len(progress) == stages["write"]["samples"]
    done = [e["records_done"] for e in progress]
    assert done == sorted(done) and done[-1] == published  # the last sample: its end


def test_recorder_of_a_resumed_run_keeps_committed_stages_and_counts_attempts(
        tmp_path, pipeline, store):
    root = tmp_path / "root"
    first = _recording(store, _plan(pipeline, root), pipeline)
    for stage in ("read", "write", "features"):
        first.publish(StageStarted(stage=stage))
    first.publish(_committed(root, "read", 300))
    first.publish(_committed(root, "write", 300))
    first.publish(StageFailed(stage="features", message=FAILURE, traceback=TRACEBACK, seq=120))
    first.publish(StageSkipped(stage="again", reason=SKIPPED))
    first.publish(RunEnded(status="failed", ran=4, reused=0, message=FAILURE,
                           error_stage="features", error_seq=120))

    store.resume_run("r")
    decided = {"read": ("keep", "r", KEPT), "write": ("keep", "r", KEPT),
               "features": ("run", None, RERUN), "again": ("run", None, RERUN)}
    again = _recording(store, _plan(pipeline, root, resume=True, **decided), pipeline)
    for stage in ("read", "write"):
        again.publish(StageReused(stage=stage, action="keep", reused_from="r", took=0.8,
                                  counts=Counts(300, 300), seq_min=0, seq_max=299,
                                  path=_folder(root, stage), manifest={}))
    for stage in ("features", "again"):
        again.publish(StageStarted(stage=stage))
        again.publish(_committed(root, stage, 300, seconds=0.5))
    again.publish(RunEnded(status="succeeded", ran=2, reused=2))

    run, stages = _shown(store)
    assert (run["status"], run["trigger"], run["error"]) == ("succeeded", "resume", None)
    got = {name: (s["status"], s["attempts"], s["seconds"], s["reason"])
           for name, s in stages.items()}
    assert got == {
        "read": ("succeeded", 1, 0.8, KEPT),  # its row from the first attempt, kept
        "write": ("succeeded", 1, 0.8, KEPT),
        "features": ("succeeded", 2, 0.5, RERUN),
        "again": ("succeeded", 1, 0.5, RERUN),  # skipped before: its first attempt at work
    }
    assert [(h["attempt"], h["status"], h["error"]) for h in stages["features"]["history"]] \
        == [(1, "failed", FAILURE)]
    assert [(h["attempt"], h["status"]) for h in stages["again"]["history"]] == [
        (None, "skipped")]  # the first attempt never reached it: not an attempt of it
