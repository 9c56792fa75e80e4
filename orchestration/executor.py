"""Running a pipeline: stages in file order, blocks streaming between them, each stage's
artifact committed when its output is complete."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seqline.components import COMPONENTS
from seqline.components.tfrecords import schema_from_text
from seqline.orchestration.line import AssemblyLine, Belt
from seqline.orchestration.recorder import RunRecorder
from seqline.orchestration.runners import Runner
from seqline.orchestration.stage_output import StageOutput
from seqline.orchestration.wiring import Wiring, runnable_committed, wire
from seqline.pipeline.artifacts import (
    MANIFEST,
    StageArtifact,
    link_stage,
    read_manifest,
    run_dir,
)
from seqline.pipeline.blocks import Block, recut
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.specs import PipelineSpec, StageContext, StageResult, StageSpec
from seqline.pipeline.stage import BlockResult, Counts, MapTask
from seqline.pipeline.storage import Folder, Location

__all__ = ["StageReport", "run_pipeline"]

Progress = Callable[[str, Counts], None]

# What a followed stage keeps of its newest shards in memory for the trainer, so that the
# first epoch does not decode what was just encoded (see ShardFeed): enough for the trainer's
# lag behind the stream on large inputs, and a bound on memory.
HOLD_BYTES = 256 * 2**20
# A cancelled run (SIGTERM, Ctrl-C) gives its stage threads this long to end once the engine
# has stopped its workers: systemd and Kubernetes send SIGKILL 10 to 30 s after SIGTERM.
HALT_SECONDS = 3.0


@dataclass
class StageReport:
    """What one stage did: its counts, time, waits and where its artifact is."""

    stage: str
    component: str
    status: str = "pending"
    counts: Counts = field(default_factory=Counts)
    blocks: int = 0
    seq_min: int | None = None
    seq_max: int | None = None
    seconds: float = 0.0
    path: Folder | None = None
    max_in_flight: int = 0
    source: str | None = None  # the stage it read
    # Backpressure: seconds the stage waited for its input, and for room to pass its output on.
    waited_input: float = 0.0
    waited_output: float = 0.0
    started: float | None = None  # wall-clock times (Unix seconds): how the stages overlapped
    finished: float | None = None
    cached_from: str | None = None  # the run whose artifact this stage reused
    # The waits so far, while the stage runs (for the run store's samples).
    live_waits: Callable[[], tuple[float, float]] | None = field(
        default=None, repr=False, compare=False)
    # A driver stage's records consumed so far, while it runs (train: examples fed).
    live_records: Callable[[], int] | None = field(default=None, repr=False, compare=False)


def run_pipeline(spec: PipelineSpec, runner: Runner, root: Folder, run_id: str,
                 progress: Progress | None = None, *, resume: bool = False,
                 queue: int = 4, overlap: bool = True, recorder: RunRecorder | None = None,
                 cached: Mapping[str, tuple[str, Folder]] | None = None) -> list[StageReport]:
    """Run every stage of `spec` with `runner` as an assembly line; one report per stage.

    Each stage runs on a thread of its own. A stage passes its blocks to the next one over a
    belt of `queue` blocks; the runner's window bounds the blocks in flight inside a stage, so
    memory is bounded by (window + queue) blocks per stage, whatever the input size. A stage
    that reads an earlier, non-adjacent stage, and the trainer, follow that stage's shards as
    they are written. Batching and train run alongside the stages before them; other driver
    stages (evaluate) start once every stage before them has committed. Without `overlap`,
    every stage waits for the one before it to commit (ingest still streams into the stage
    after it, since it stores nothing): each stage's time is then its time alone, which is
    what the assembly line is measured against (benchmarks/compare.py #7). With `resume`,
    stages the run already committed are kept and the run goes on from the first one it did
    not finish. `cached` stages (name -> the run and folder of an equal stage run) are linked
    into this run instead of being run. `recorder` writes the run into the run store. `root`
    is a local folder or an object-store Location (storage.py, artifacts.py).

    Raises:
        ConfigError: the run id is taken (or, resuming, unknown), or the pipeline's shape is
            not supported.
        StageError: a stage failed (the first failure; stages after it are stopped); no
            artifact of an unfinished stage is committed.
    """
    folder = _open_run(run_dir(root, run_id), run_id, resume)
    record = {"run_id": run_id, "pipeline": spec.name, "runner": runner.name,
              "workers": runner.workers, "window": runner.window, "queue": queue,
              "started_at": _now()}
    _write_run(folder, {**record, "status": "running"})
    done, cached = _take_committed(spec, folder, resume, cached or {})
    line = AssemblyLine(folder)
    if recorder is not None:
        recorder.plan(list(spec.stages), done - set(cached))
    reports: list[StageReport] = []
    artifacts: dict[str, StageArtifact] = {}
    shared = _Run(folder, runner, line, progress, queue)
    try:
        wirings = wire(spec, COMPONENTS, overlap=overlap, committed=done)
        if overlap and runner.chains_stages:
            _link_chains(spec, wirings, shared, lambda name: artifacts.setdefault(
                name, StageArtifact(root, run_id, name)))
        for wiring in wirings:
            stage = spec.stage(wiring.stage)
            report = StageReport(stage.name, stage.component, source=wiring.source)
            reports.append(report)
            if wiring.reused:
                _reuse(report, folder / stage.name, line, cached.get(stage.name, (None,))[0])
                if report.cached_from and recorder is not None:
                    recorder.committed(stage, report, read_manifest(folder / stage.name),
                                       _source_dir(folder, wiring),  # type: ignore[arg-type]
                                       report.cached_from)
                continue
            if stage.name not in artifacts:  # (a chained stage's was made with its chain)
                artifacts[stage.name] = StageArtifact(root, run_id, stage.name)
            artifact = artifacts[stage.name]
            work = _stage_work(spec, stage, wiring, shared, artifact, report)
            line.start(stage.name, _recorded(work, stage, report, recorder,
                                             _source_dir(folder, wiring)), after=wiring.after)
        line.join([s.name for s in spec.stages])
    except BaseException as exc:
        cancelled = isinstance(exc, KeyboardInterrupt)
        if cancelled:  # stop the workers the stages wait on, so that they end in seconds
            runner.abort()
        line.halt(HALT_SECONDS if cancelled else 0.0)
        for report in reports:
            if report.status not in ("succeeded", "reused", "cached"):
                report.status = "failed"
                if recorder is not None:
                    recorder.failed(report.stage, report, exc)
        kept = {r.stage for r in reports if r.status != "failed"}
        for name, artifact in artifacts.items():  # (a chained stage's may have no report yet)
            if name not in kept:
                artifact.abandon()
        _write_run(folder, {**record, "status": "cancelled" if cancelled else "failed",
                            "finished_at": _now(),
                            "error": f"{type(exc).__name__}: {exc}"})
        raise
    _write_run(folder, {**record, "status": "succeeded", "finished_at": _now(),
                        "stages": [r.stage for r in reports]})
    return reports


def _take_committed(spec: PipelineSpec, folder: Folder, resume: bool,
                    cached: Mapping[str, tuple[str, Folder]]
                    ) -> tuple[set[str], dict[str, tuple[str, Folder]]]:
    """The stages this run need not run (committed by a resumed attempt, or cached), with the
    cached ones linked into the run's folder. A committed stage that only passes blocks on
    (ingest) runs again when its reader does: its blocks exist only while it runs."""
    committed = {s.name for s in spec.stages if resume and (folder / s.name / MANIFEST).exists()}
    done = runnable_committed(spec, COMPONENTS, committed | set(cached))
    for name in committed - done:
        _remove(folder / name)
    linked = {name: hit for name, hit in cached.items() if name in done}
    for name, (_, source) in linked.items():
        link_stage(source, folder / name)
    return done, linked


def _recorded(work: Callable[[], Folder], stage: StageSpec[Any], report: StageReport,
              recorder: RunRecorder | None, source: Folder | None) -> Callable[[], Folder]:
    """`work`, telling the run store when the stage starts and what it committed."""
    if recorder is None:
        return work

    def run() -> Folder:
        recorder.started(stage, report)
        path = work()
        recorder.committed(stage, report, read_manifest(path), source)  # type: ignore[arg-type]
        return path

    return run


def _source_dir(folder: Folder, wiring: Wiring) -> Folder | None:
    return folder / wiring.source if wiring.source else None


@dataclass(frozen=True)
class _Link:
    """A map stage that runs inside the engine job of the stage before it (`after`): its task,
    made with its own artifact, and the belt its results arrive on, in block order."""

    after: str
    task: MapTask
    results: Belt[BlockResult]


@dataclass(frozen=True)
class _Run:
    """What every stage of one run shares: its folder, the engine, the line and the belts."""

    folder: Folder
    runner: Runner
    line: AssemblyLine
    progress: Progress | None
    queue: int
    belts: dict[str, Belt[Block]] = field(default_factory=dict)  # by the stage that fills it
    links: dict[str, _Link] = field(default_factory=dict)  # by the chained stage
    chains: dict[str, list[_Link]] = field(default_factory=dict)  # by the stage whose job runs them


def _link_chains(spec: PipelineSpec, wirings: list[Wiring], run: _Run,
                 artifact: Callable[[str], StageArtifact]) -> None:
    """Chain the map stages that can run inside the job of the stage before them.

    Where each stage is a batch job (Beam), a stage taking the blocks of one that passes on
    every record as it came (tfrecord_write) runs in that stage's job: each block goes through
    both in one bundle, and the two stages run at the same time instead of one job after the
    other (decisions/0040). The same records and shards result: the chained stage's blocks are
    numbered as the stage before it numbers them, as they would be on its belt.
    """
    for before, wiring in zip(wirings, wirings[1:], strict=False):
        previous, stage = spec.stage(before.stage), spec.stage(wiring.stage)
        component = COMPONENTS[stage.component]
        if not (wiring.takes == "belt" and wiring.source == before.stage and not before.reused
                and COMPONENTS[previous.component].passes_every_record
                and COMPONENTS[previous.component].runs_on == "workers"
                and component.runs_on == "workers" and component.takes_stream):
            continue
        task: MapTask = component.run(stage, spec.base_dir, artifact(stage.name).path)
        if task.input_records:  # it cuts blocks of its own
            continue
        link = run.links[stage.name] = _Link(before.stage, task, Belt(run.queue, run.line.stop))
        head = run.links[before.stage].after if before.stage in run.links else before.stage
        run.chains.setdefault(head, []).append(link)


def _stage_work(spec: PipelineSpec, stage: StageSpec[Any], wiring: Wiring, run: _Run,
                artifact: StageArtifact, report: StageReport) -> Callable[[], Folder]:
    """The stage's work for its thread, its input and output connected as `wiring` says."""
    component = COMPONENTS[stage.component]
    compression = getattr(stage.params, "compression", "gzip")
    feed = ShardFeed(stage.name, artifact.path, compression, HOLD_BYTES) \
        if component.stores_records else None
    run.line.add_stage(stage.name, feed)
    inputs: Iterable[Block] | None = None
    if wiring.takes == "belt" and stage.name not in run.links:  # (a chained one's: _produce)
        inputs = run.belts.pop(wiring.source or "")
    elif wiring.takes == "feed":
        inputs = run.line.blocks_of(wiring.source or "", stage.name)
    # A stage whose next one runs in its job (a chain) hands that one results, not blocks.
    chained = any(link.after == stage.name for link in run.links.values())
    output: Belt[Block] | None = Belt(run.queue, run.line.stop) \
        if wiring.gives_belt and not chained else None
    if output is not None:
        run.belts[stage.name] = output
    if component.runs_on == "workers" or component.reads == "files":
        return lambda: _run_data_stage(stage, spec.base_dir, run, inputs, output, feed,
                                       artifact, report)
    # On an object store `run` is a Location (its readers take either, storage.py) whose
    # hidden entries (train's backup) are local, and `out_dir` a local staging folder that
    # the commit uploads: TensorFlow writes both as usual.
    folder = run.folder.with_scratch() if isinstance(run.folder, Location) else run.folder
    context = StageContext(folder, artifact.out_dir,
                           wiring.source or "", spec.base_dir,
                           spec.name, blocks=inputs, announce=run.line.announce(stage.name),
                           line=run.line if wiring.follows_line else None,  # type: ignore[arg-type]
                           launcher=getattr(run.runner, "launcher", None),
                           progress=_live_records(report))
    earlier = [s.name for s in spec.stages[:spec.stages.index(stage)]] \
        if wiring.waits_for_all else []
    return lambda: _run_driver(stage, context, artifact, report, run, earlier)


def _live_records(report: StageReport) -> Callable[[int], None]:
    """What a driver stage calls with its records consumed so far; the recorder samples it."""
    fed = [0]
    report.live_records = lambda: fed[0]
    return lambda n: fed.__setitem__(0, n)


def _open_run(folder: Folder, run_id: str, resume: bool) -> Folder:
    if resume:
        if not (folder / "run.json").exists():
            raise ConfigError(f"no run {run_id!r} to resume under {folder.parent}. Check "
                              "--run-id and --root.")
        # An interrupted stage's partial output. On an object store it is the stage's prefix
        # without a manifest, removed when the stage is run again (StageArtifact).
        for leftover in folder.glob(".*.tmp-*") if isinstance(folder, Path) else ():
            shutil.rmtree(leftover, ignore_errors=True)
    elif (folder / "run.json").exists():
        raise ConfigError(f"run id {run_id!r} is already used under {folder}. Choose another "
                          "--run-id (or omit it for a fresh one), or add --resume to finish it.")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _reuse(report: StageReport, stage_dir: Folder, line: AssemblyLine,
           cached_from: str | None = None) -> None:
    """A stage committed before (by the resumed run, or by `cached_from`): its report, from
    its manifest."""
    m = read_manifest(stage_dir)
    report.counts = Counts(m["records_in"], m["records_out"], m["filtered"], m["exploded"],
                           m["dead_lettered"])
    report.seq_min, report.seq_max, report.seconds = m["seq_min"], m["seq_max"], m["seconds"]
    report.status, report.path = ("cached" if cached_from else "reused"), stage_dir
    report.cached_from = cached_from
    schema = m.get("schema")
    line.add_stage(report.stage, ShardFeed.stored(stage_dir, m, schema_from_text(schema))
                   if schema else None)
    line.mark_committed(report.stage, stage_dir)


def _run_data_stage(stage: StageSpec[Any], base_dir: Path, run: _Run,
                    inputs: Iterable[Block] | None, output: Belt[Block] | None,
                    feed: ShardFeed | None,
                    artifact: StageArtifact, report: StageReport) -> Folder:
    """One source or map stage on its thread: produce, account, pass blocks on, commit."""
    report.started = time.time()

    def waits() -> tuple[float, float]:
        belt = run.links[stage.name].results if stage.name in run.links else inputs
        waited_in = belt.waited_get if isinstance(belt, Belt) \
            else run.line.feed_waits.get(stage.name, 0.0)
        return waited_in, output.waited_put if output is not None else 0.0

    report.live_waits = waits

    produced = _produce(stage, base_dir, run, inputs, artifact.path)
    for block in _track(stage, produced, artifact, report, run.runner, run.progress, feed,
                        waits):
        if output is not None:
            output.put(block)
    if output is not None:
        output.close()
    return artifact.final


def _run_driver(stage: StageSpec[Any], context: StageContext, artifact: StageArtifact,
                report: StageReport, run: _Run, earlier: list[str]) -> Folder:
    """A driver stage: live ones start at once; others once every stage before has committed."""
    start, report.started = time.perf_counter(), time.time()
    for name in earlier:
        run.line.committed(name)
    report.waited_input = time.perf_counter() - start
    report.status = "running"
    if run.progress:
        run.progress(stage.name, report.counts)
    result: StageResult = COMPONENTS[stage.component].run(stage, context)
    report.counts = Counts(records_in=result.records_in, records_out=result.records_in)
    if isinstance(context.blocks, Belt):
        report.waited_input = context.blocks.waited_get
    elif result.waited_input is not None:  # measured by the stage (train: its steps' wait)
        report.waited_input = result.waited_input
    if run.progress:
        run.progress(stage.name, report.counts)
    report.seconds = time.perf_counter() - start
    report.status = "succeeded"
    report.path = artifact.commit(_manifest(stage, report, run.runner, result.manifest))
    return report.path


def _produce(stage: StageSpec[Any], base_dir: Path, run: _Run,
             upstream: Iterable[Block] | None, out_dir: Folder) -> Iterator[BlockResult]:
    component = COMPONENTS[stage.component]
    if component.reads == "files":  # a source: it may hand ranges of its files to the workers
        yield from component.run(stage, base_dir, run.runner.map_blocks)
        return
    if stage.name in run.links:  # it runs in the job of the stage before it
        for result in run.links[stage.name].results:
            result.raise_if_failed()
            yield result
        return
    task: MapTask = component.run(stage, base_dir, out_dir)
    blocks = upstream or iter(())
    if task.input_records:
        blocks = recut((b.batch for b in blocks), task.input_records)
    if stage.name not in run.chains:
        yield from run.runner.map_blocks(task, blocks)
        return
    links = run.chains[stage.name]
    for results in run.runner.map_chain([task, *(link.task for link in links)], blocks):
        results[0].raise_if_failed()
        for link, result in zip(links, results[1:], strict=False):
            link.results.put(result)
        yield results[0]
    for link in links:  # only now: a chained stage must not commit what a failure cut short
        link.results.close()


def _track(stage: StageSpec[Any], produced: Iterator[BlockResult], artifact: StageArtifact,
           report: StageReport, runner: Runner, progress: Progress | None,
           feed: ShardFeed | None, waits: Callable[[], tuple[float, float]]) -> Iterator[Block]:
    """Pass non-empty blocks on, renumbered densely; account for everything; commit at the end."""
    start = time.perf_counter()
    report.status = "running"
    out = StageOutput(stage, artifact.path, feed)
    for result in produced:
        report.counts += result.counts
        report.blocks += 1
        out.add(result)
        if progress:
            progress(stage.name, report.counts)
        if result.batch is not None and result.batch.num_rows:
            yield Block(out.forwarded, result.batch)
            out.forwarded += 1
    report.seconds = time.perf_counter() - start
    report.max_in_flight = runner.peaks.get(stage.name, 0)
    report.waited_input, report.waited_output = waits()
    stored = out.finish(report.counts)
    report.seq_min, report.seq_max = out.seq_min, out.seq_max
    report.status = "succeeded"
    report.path = artifact.commit(_manifest(stage, report, runner, stored))
    if feed is not None:
        feed.close(report.path)


def _manifest(stage: StageSpec[Any], report: StageReport, runner: Runner,
              stored: dict[str, Any]) -> dict[str, Any]:
    return {
        "stage": stage.name,
        "component": stage.component,
        "status": report.status,
        **asdict(report.counts),
        "blocks": report.blocks,
        "seq_min": report.seq_min,
        "seq_max": report.seq_max,
        **stored,
        "input": report.source,
        "errors": stage.errors.model_dump() if stage.errors else None,
        "seconds": round(report.seconds, 4),
        "waited": {"input": round(report.waited_input, 4),
                   "output": round(report.waited_output, 4)},
        "timeline": {"started": report.started, "finished": time.time()},
        "params": stage.params.model_dump(mode="json"),
        "runner": {"name": runner.name, "workers": runner.workers, "window": runner.window},
        "block_retries": runner.block_retries.get(stage.name, 0),
        "committed_at": _now(),
    }


def _write_run(folder: Folder, record: dict[str, Any]) -> None:
    if isinstance(folder, Location):  # one PUT replaces the object whole
        (folder / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))
        return
    tmp = folder / "run.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True))
    tmp.replace(folder / "run.json")


def _remove(place: Folder) -> None:
    if isinstance(place, Location):
        place.remove()
    else:
        shutil.rmtree(place)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
