"""What a stage's thread does: a data stage produces, accounts and passes blocks on; a driver
stage runs its component; both commit their artifact and say so."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from seqline.components import COMPONENTS
from seqline.orchestration.events import (
    BlocksDone,
    EventBus,
    RecordsConsumed,
    StageCommitted,
    StageStarted,
    WaitEnded,
    WaitStarted,
)
from seqline.orchestration.line import Belt, Stopped
from seqline.orchestration.plan import Step
from seqline.orchestration.shard_reads import read_back
from seqline.orchestration.stage_output import StageOutput, manifest_of
from seqline.pipeline.artifacts import StageArtifact
from seqline.pipeline.blocks import Block, recut
from seqline.pipeline.errors import InternalError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.specs import (
    DriverSpec,
    MapSpec,
    SourceSpec,
    StageContext,
    StageResult,
    StageSpec,
)
from seqline.pipeline.storage import Folder
from seqline.pipeline.tasks import BlockResult, Counts, MapTask

if TYPE_CHECKING:
    from seqline.orchestration.executor import RunContext

__all__ = ["map_spec", "run_data_stage", "run_driver"]

log = logging.getLogger("seqline")


def map_spec(component: str) -> MapSpec[Any]:
    """The component of a step planned as a map stage (the planner's kind is its type)."""
    spec = COMPONENTS[component]
    if not isinstance(spec, MapSpec):
        raise InternalError(f"component {component!r} was planned as a map stage, but it is a "
                            f"{type(spec).__name__}")
    return spec


def run_data_stage(step: Step, stage: StageSpec[Any], run: RunContext, artifact: StageArtifact,
                    inputs: Iterable[Any] | None, output: Belt[Block] | None,
                    feed: ShardFeed | None, waits: Callable[[], tuple[float, float]]) -> Folder:
    """A source or map stage: produce, account, pass blocks on, commit."""
    if not step.fused_after:  # a fused stage starts with the engine job it runs in (_produce)
        run.bus.publish(StageStarted(stage=stage.name))
    start, started = time.perf_counter(), time.time()
    out = StageOutput(stage, artifact.path, feed, run.reads)
    counts, blocks = Counts(), 0
    for result in _produce(step, stage, run, inputs, artifact.path):
        for line in result.retried:  # a worker's own log reaches neither the run's log nor,
            log.warning(line, extra={"stage": stage.name})  # on every engine, the terminal
        counts, blocks = counts + result.counts, blocks + 1
        out.add(result)
        run.bus.publish(BlocksDone(stage=stage.name, counts=counts, blocks=blocks,
                                   waited_input=waits()[0], waited_output=waits()[1]))
        if output is not None and result.batch is not None and result.batch.num_rows:
            output.put(Block(out.forwarded, result.batch))
            out.forwarded += 1
    if output is not None:
        output.close()
    seconds, (waited_input, waited_output) = time.perf_counter() - start, waits()
    stored = out.finish(counts)
    return _commit(step, stage, run, artifact, counts, blocks, out.seq_min, out.seq_max,
                   seconds, started, waited_input, waited_output, stored, feed)


def _told(blocks: Iterable[Block], stage: str, bus: EventBus) -> Iterator[Block]:
    """The blocks a driver stage takes from the line, each told as it is taken: its live
    records in, and that its input reached it (a stop then calls it cancelled, not skipped)."""
    records = 0
    for block in blocks:
        records += len(block)
        bus.publish(RecordsConsumed(stage=stage, records=records))
        yield block


def run_driver(step: Step, stage: StageSpec[Any], run: RunContext, artifact: StageArtifact,
                inputs: Iterable[Any] | None) -> Folder:
    """A driver stage: live ones start at once; others once every stage before has committed."""
    bus = run.bus
    bus.publish(StageStarted(stage=stage.name))
    start, started = time.perf_counter(), time.time()
    if step.waits_for_all:
        bus.publish(WaitStarted(stage=stage.name, on="input"))
        for earlier in run.plan.steps[:run.plan.steps.index(step)]:
            run.line.committed(earlier.stage)
        bus.publish(WaitEnded(stage=stage.name, on="input",
                              seconds=time.perf_counter() - start))
    waited = time.perf_counter() - start
    # `out_dir` is local on every storage (on an object store a staging folder that the
    # commit uploads): TensorFlow writes it as usual.
    context = StageContext(
        run.folder, artifact.out_dir, step.source or "", run.spec.base_dir, run.spec.name,
        blocks=None if inputs is None else _told(inputs, stage.name, bus),
        announce=run.line.announce(stage.name),
        line=run.line if step.follows_line else None,  # type: ignore[arg-type]
        launcher=getattr(run.runner, "launcher", None),
        progress=lambda n, waited, taken: bus.publish(
            RecordsConsumed(stage=stage.name, records=n, waited_input=waited, taken=taken)))
    component = COMPONENTS[stage.component]
    if not isinstance(component, DriverSpec):
        raise InternalError(f"stage {stage.name!r}: planned as a driver stage, but its "
                            f"component is a {type(component).__name__}")
    result: StageResult = component.run(stage, context)
    if isinstance(inputs, Belt):
        waited = inputs.waited_get
    elif result.waited_input is not None:  # measured by the stage (train: its steps' wait)
        waited = result.waited_input
    counts = Counts(records_in=result.records_in, records_out=result.records_in)
    return _commit(step, stage, run, artifact, counts, 0, None, None,
                   time.perf_counter() - start, started, waited, 0.0, result.manifest, None)


def _produce(step: Step, stage: StageSpec[Any], run: RunContext, upstream: Iterable[Any] | None,
             out_dir: Folder) -> Iterator[BlockResult]:
    source = COMPONENTS[stage.component]
    if isinstance(source, SourceSpec):  # it may hand ranges of its files to the workers
        yield from source.run(stage, run.spec.base_dir, run.runner.map_blocks)
        return
    if step.fused_after:  # it runs in the engine job of the stage before it
        for result in upstream or ():
            result.raise_if_failed()
            yield result
        return
    task: MapTask = map_spec(stage.component).run(stage, run.spec.base_dir, out_dir)
    if run.reads is not None and task.sink is not None:  # its workers read their shards back
        task = replace(task, read_back=partial(read_back, str(out_dir),
                                               stage.params.compression))
    blocks: Iterable[Block] = upstream or iter(())
    if task.input_records:
        blocks = recut((b.batch for b in blocks), task.input_records)
    fused = [s.stage for s in run.plan.steps if s.fused_after == stage.name]
    if not fused:
        yield from run.runner.map_blocks(task, blocks)
        return
    tasks = [task, *(run.fused[name][0] for name in fused)]
    for name in fused:  # said here, not on their threads: before the job tells their progress
        run.bus.publish(StageStarted(stage=name))
    for results in run.runner.map_fused(tasks, blocks):
        results[0].raise_if_failed()
        for name, result in zip(fused, results[1:], strict=False):
            run.fused[name][1].put(result)
        yield results[0]
    for name in fused:  # only now: a fused stage must not commit what a failure cut short
        run.fused[name][1].close()


def _commit(step: Step, stage: StageSpec[Any], run: RunContext, artifact: StageArtifact,
            counts: Counts, blocks: int, seq_min: int | None, seq_max: int | None,
            seconds: float, started: float, waited_input: float, waited_output: float,
            stored: dict[str, Any], feed: ShardFeed | None) -> Folder:
    """Write the manifest last (the commit), then say so."""
    _upstream_committed(step, run)
    peak, retries = run.tally.peak(stage.name), run.tally.retries(stage.name)
    stored = {**stored, **_files_read(stage, run)}
    manifest = manifest_of(stage, step.source, run.runner, counts, blocks, seq_min, seq_max,
                           seconds, started, waited_input, waited_output, peak, retries, stored)
    path = artifact.commit(manifest)
    if feed is not None:
        feed.close(path)
    run.end(StageCommitted(
        stage=stage.name, counts=counts, blocks=blocks, seq_min=seq_min, seq_max=seq_max,
        seconds=seconds, waited_input=waited_input, waited_output=waited_output,
        max_in_flight=peak, block_retries=retries, path=path, manifest=manifest))
    return path


def _upstream_committed(step: Step, run: RunContext) -> None:
    """A stage fed block by block commits only once the stage feeding it has: that one can
    still fail after its last block (its error budget is judged at its end, its own commit can
    fail), and nothing made from its records may outlive it. If it failed, this stage stops."""
    if step.source is None or (step.takes != "belt" and not step.fused_after):
        return
    try:
        run.line.wait_committed(step.source)
    except BaseException as exc:  # its failure is told on it; this one stops
        raise Stopped(f"stage {step.stage!r}: upstream {step.source!r} did not commit") from exc


def _files_read(stage: StageSpec[Any], run: RunContext) -> dict[str, Any]:
    """A source stage's files in source order (paths or URLs): `seqline lookup` maps a seq to
    its file and line from them, since the pipeline file's paths are relative to a folder the
    run does not record."""
    component = COMPONENTS[stage.component]
    if isinstance(component, SourceSpec):
        return {"files": component.files(stage, run.spec.base_dir)}
    return {}
