"""Running a plan: each stage on a thread of the assembly line, blocks streaming between them,
each artifact committed when complete, and every fact published as an event."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

from seqline.components import COMPONENTS
from seqline.orchestration.events import (
    EventBus,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StagePlanned,
    StageReused,
    StageSkipped,
)
from seqline.orchestration.failures import error_line, error_traceback
from seqline.orchestration.line import AssemblyLine, Belt
from seqline.orchestration.plan import DAMAGED, RunPlan, Step
from seqline.orchestration.run_log import RunLog
from seqline.orchestration.runners import Runner
from seqline.orchestration.shard_reads import ShardReads
from seqline.orchestration.stage_output import Tally
from seqline.orchestration.stage_work import map_spec, run_data_stage, run_driver
from seqline.pipeline.artifacts import VERDICT, StageArtifact, link_stage, read_manifest, run_dir
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import Cancelled, StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.reorder import first_window
from seqline.pipeline.specs import PipelineSpec
from seqline.pipeline.storage import Folder, storage_of
from seqline.pipeline.tasks import BlockResult, Counts, MapTask
from seqline.pipeline.tfrecord import schema_from_text

__all__ = ["never_started", "run_plan"]

log = logging.getLogger(__name__)

# What a followed stage keeps of its newest shards in memory for the trainer, so that the
# first epoch does not decode what was just encoded (see ShardFeed): enough for the trainer's
# lag behind the stream on large inputs, and a bound on memory.
HOLD_BYTES = 256 * 2**20
# A cancelled run (SIGTERM, Ctrl-C) gives its stage threads this long to end once the engine
# has stopped its workers: systemd and Kubernetes send SIGKILL 10 to 30 s after SIGTERM.
HALT_SECONDS = 3.0


@dataclass(frozen=True)
class RunContext:
    """What every stage of one run shares: the plan, the engine, the line, the belts."""

    plan: RunPlan
    spec: PipelineSpec
    root: Folder
    folder: Folder
    runner: Runner
    line: AssemblyLine
    bus: EventBus
    tally: Tally
    belts: dict[str, Belt[Block]] = field(default_factory=dict)  # by the stage that fills it
    fused: dict[str, tuple[MapTask, Belt[BlockResult]]] = field(default_factory=dict)
    artifacts: dict[str, StageArtifact] = field(default_factory=dict)
    reads: ShardReads | None = None  # shards read back as they come, for verify at the end

    def end(self, event: StageCommitted | StageReused | StageFailed | StageCancelled
            | StageSkipped) -> None:
        """Publish a stage's end. A stage that commits while a cancel stops the run (its
        thread between the manifest and the line's record of it) ends as whichever came
        first, never as both: the bus drops a second end (EventBus)."""
        self.bus.publish(event)

    def artifact(self, stage: str) -> StageArtifact:
        if stage not in self.artifacts:
            self.artifacts[stage] = StageArtifact(self.root, self.plan.run_id, stage)
        return self.artifacts[stage]

    def belt(self, producer: str, consumer: str) -> Belt[Any]:
        return Belt(self.plan.options.queue, self.line.stop, producer, consumer,
                    self.bus.publish)


def run_plan(plan: RunPlan, spec: PipelineSpec, runner: Runner, root: Folder,
             bus: EventBus, reads: ShardReads | None = None) -> None:
    """Run `plan`'s steps with `runner` as an assembly line, publishing what happens on `bus`.

    Each stage runs on a thread of its own and passes its blocks to the next over a belt of
    `queue` blocks; the runner's window bounds the blocks in flight inside a stage, so memory
    is bounded by (window + queue) blocks per stage, whatever the input size. A stage that
    reads an earlier, non-adjacent stage, and the trainer, follow that stage's shards as they
    are written. Steps the plan reuses or keeps are linked in and reported, not run. With
    `reads`, each stored shard is read back as its stage accounts for it (verify's, after).

    Raises:
        StageError: a stage failed (the first failure; the other stages are stopped and
            published as cancelled, or as skipped if no input had reached them); no artifact
            of an unfinished stage is committed.
        KeyboardInterrupt: the run was cancelled (Ctrl-C, or SIGTERM as Cancelled).
    """
    folder = _open_run(run_dir(root, plan.run_id), plan.options.resume)
    runner.publish = bus.publish  # what the engine sees (blocks in flight, retries) is told
    run = RunContext(plan, spec, root, folder, runner, AssemblyLine(folder), bus, Tally(),
                     reads=reads)
    bus.subscribe(run.tally)
    # The run's log: its events until RunEnded closes it, this process's log records while
    # the stages run (detached below whatever happens, so no handler outlives its run).
    run_log = RunLog(folder, [s.stage for s in plan.steps], resume=plan.options.resume)
    bus.subscribe(run_log)
    run_log.attach()
    try:
        _run_steps(run)
    except BaseException:
        if reads is not None:  # no verify follows a run that did not succeed
            reads.close()
        raise
    finally:
        run_log.detach()


def never_started(plan: RunPlan, spec: PipelineSpec, root: Folder, bus: EventBus,
                  cancel: Cancelled) -> None:
    """A run cancelled before its engine had started (Ctrl-C while Ray or Beam start): its
    folder, its log and a row for every stage, skipped with the cancel's reason, as a run
    stopped later tells them; the caller ends the run."""
    folder = _open_run(run_dir(root, plan.run_id), plan.options.resume)
    bus.subscribe(RunLog(folder, [s.stage for s in plan.steps], resume=plan.options.resume))
    options = plan.options
    _announce(plan, spec, bus, options.runner, options.workers,
              first_window(options.workers, options.window))
    for step in plan.steps:
        if step.action != "keep":  # (a kept stage is the earlier attempt's, as it was)
            bus.publish(StageSkipped(stage=step.stage,
                                     reason=f"not run: {_stopped_by(step, plan, None, cancel)}"))


def _announce(plan: RunPlan, spec: PipelineSpec, bus: EventBus, runner: str, workers: int,
              window: int) -> None:
    """The run's start and its plan, stage by stage."""
    bus.publish(RunStarted(run_id=plan.run_id, pipeline=spec.name, runner=runner,
                           workers=workers, window=window, resume=plan.options.resume))
    for step in plan.steps:
        bus.publish(StagePlanned(stage=step.stage, component=step.component, action=step.action,
                                 reason=step.reason, reused_from=step.reused_from,
                                 cache_key=step.cache_key))


def _run_steps(run: RunContext) -> None:
    plan, spec, bus = run.plan, run.spec, run.bus
    _announce(plan, spec, bus, run.runner.name, run.runner.workers, run.runner.window)
    try:
        for step in plan.steps:
            if step.fused_after:  # its task and results belt, before the stage it is fused to
                task = map_spec(step.component).run(spec.stage(step.stage), spec.base_dir,
                                                    run.artifact(step.stage).path)
                run.fused[step.stage] = (task, run.belt(step.fused_after, step.stage))
        for step in plan.steps:
            _start(step, run) if step.runs else _reuse(step, run)
        run.line.join([s.stage for s in plan.steps])
    except BaseException as exc:
        _stop(run, exc)
        raise


def _open_run(folder: Folder, resume: bool) -> Folder:
    """The run's folder; resuming, without the earlier attempt's partial stage output (on
    an object store that is a prefix without a manifest, removed when the stage runs)."""
    storage = storage_of(folder)
    if resume:
        for leftover in storage.entries(folder):
            if fnmatch(leftover.name, ".*.tmp-*") or leftover.name == VERDICT:
                storage.remove(leftover)  # (a verdict of the attempt before: stale now)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _reuse(step: Step, run: RunContext) -> None:
    """A stage committed before (by run `step.reused_from`): linked into this run, reported."""
    place = run.folder / step.stage
    if step.action == "reuse" and step.folder is not None:
        link_stage(step.folder, place)
    m = read_manifest(place)
    schema = m.get("schema")
    run.line.add_stage(step.stage, ShardFeed.stored(place, m, schema_from_text(schema))
                       if schema else None)
    run.line.mark_committed(step.stage, place)
    counts = Counts(m["records_in"], m["records_out"], m["filtered"], m["exploded"],
                    m["dead_lettered"])
    run.end(StageReused(stage=step.stage, action=step.action,
                        reused_from=step.reused_from or run.plan.run_id, took=m["seconds"],
                        counts=counts, seq_min=m["seq_min"], seq_max=m["seq_max"], path=place,
                        manifest=m))


def _start(step: Step, run: RunContext) -> None:
    """The stage's work on its thread, its input and output connected as the plan says."""
    if step.stale:  # committed before, but to be made again
        if step.reason.startswith(DAMAGED):  # never trusted: said, removed and made again
            log.warning("stage %r: %s; making it again", step.stage, step.reason)
        storage_of(run.folder).remove(run.folder / step.stage)
    stage = run.spec.stage(step.stage)
    component = COMPONENTS[stage.component]
    artifact = run.artifact(step.stage)
    feed = ShardFeed(stage.name, artifact.path, getattr(stage.params, "compression", "gzip"),
                     HOLD_BYTES) if component.stores_records else None
    run.line.add_stage(stage.name, feed)
    waited = [0.0]  # on a feed: seconds waiting for shards not yet written

    def add_wait(seconds: float) -> None:
        waited[0] += seconds

    inputs: Iterable[Any] | None = None
    if step.fused_after:
        inputs = run.fused[step.stage][1]
    elif step.takes == "belt":
        inputs = run.belts.pop(step.source or "")
    elif step.takes == "feed":
        inputs = run.line.blocks_of(step.source or "", add_wait)
    # A stage whose next one runs in its engine job hands that one results, not blocks.
    feeds_fused = any(s.fused_after and s.source == step.stage for s in run.plan.steps)
    reader = next((s.stage for s in run.plan.steps
                   if s.source == step.stage and s.takes == "belt"), "")
    output = run.belt(stage.name, reader) if step.gives_belt and not feeds_fused else None
    if output is not None:
        run.belts[stage.name] = output

    def waits() -> tuple[float, float]:
        got = inputs.waited_get if isinstance(inputs, Belt) else waited[0]
        return got, output.waited_put if output is not None else 0.0

    def work() -> Folder:
        if step.kind == "driver":
            return run_driver(step, stage, run, artifact, inputs)
        return run_data_stage(step, stage, run, artifact, inputs, output, feed, waits)

    run.line.start(stage.name, work, after=step.after)


def _stop(run: RunContext, exc: BaseException) -> None:
    """After a failure or a cancel: stop the line, publish what became of every stage that
    did not commit (the one that failed; those it stopped, cancelled once they had work,
    skipped if not), abandon their artifacts."""
    cancelled = isinstance(exc, KeyboardInterrupt)
    if cancelled:  # stop the workers the stages wait on, so that they end in seconds
        run.runner.abort()
    run.line.halt(HALT_SECONDS if cancelled else 0.0)
    cause = run.line.failed_stage or (exc.stage if isinstance(exc, StageError) else None)
    for step in run.plan.steps:
        if run.line.is_committed(step.stage):
            continue
        started = run.tally.started(step.stage)
        # its seconds: from its start to now, when its thread has ended (or was left)
        seconds = None if started is None else max(time.time() - started, 0.0)
        if step.stage == cause and not cancelled:
            run.end(StageFailed(stage=step.stage, message=error_line(exc),
                                traceback=error_traceback(exc), seconds=seconds,
                                seq=exc.seq if isinstance(exc, StageError) else None,
                                **run.tally.account(step.stage)))
            continue
        why = _stopped_by(step, run.plan, cause, exc if cancelled else None)
        if seconds is None or (step.source and not step.after
                               and not run.tally.fed(step.stage)):
            # never started, or started on the line and only waited for input that never
            # came (a one-by-one stage starts once its input is whole)
            run.end(StageSkipped(stage=step.stage, reason=f"not run: {why}"))
        else:
            run.end(StageCancelled(stage=step.stage, seconds=seconds,
                                   reason=f"stopped after {seconds:.2f} s: {why}",
                                   **run.tally.account(step.stage)))
    for name, artifact in run.artifacts.items():
        if not run.line.is_committed(name):
            artifact.abandon()


def _stopped_by(step: Step, plan: RunPlan, cause: str | None,
                cancel: BaseException | None) -> str:
    """What stopped a stage, in the user's words: "the run was cancelled (SIGINT)",
    "upstream `read` failed" (a stage that reads it, directly or through others), "`read`
    failed" (any other)."""
    if cancel is not None:
        how = cancel.signal if isinstance(cancel, Cancelled) else "SIGINT"
        return f"the run was cancelled ({how})"
    if cause is None:
        return "the run failed"
    downstream: set[str] = set()
    for other in plan.steps:  # the stages that read `cause`, directly or through others
        if other.source == cause or other.source in downstream:
            downstream.add(other.stage)
    if step.stage in downstream:
        return f"upstream `{cause}` failed"
    return f"`{cause}` failed"
