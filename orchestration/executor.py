"""Running a pipeline: stages in file order, blocks streaming between them, each stage's
artifact committed when its output is complete."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from seqline.components import COMPONENTS
from seqline.components.tfrecords import read_artifact, schema_to_text
from seqline.orchestration.runners import Runner
from seqline.pipeline.artifacts import MANIFEST, StageArtifact, read_manifest, run_dir
from seqline.pipeline.audit import SeqDigest
from seqline.pipeline.blocks import Block, recut, seq_of
from seqline.pipeline.deadletters import DeadLetterFile
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import PipelineSpec, StageContext, StageSpec
from seqline.pipeline.stage import BlockResult, Counts

__all__ = ["StageReport", "run_pipeline"]

Progress = Callable[[str, Counts], None]


@dataclass
class StageReport:
    """What one stage did: its counts, time and where its artifact is."""

    stage: str
    component: str
    status: str = "pending"
    counts: Counts = field(default_factory=Counts)
    blocks: int = 0
    seq_min: int | None = None
    seq_max: int | None = None
    seconds: float = 0.0
    path: Path | None = None
    max_in_flight: int = 0
    source: str | None = None  # the stage it read


def run_pipeline(spec: PipelineSpec, runner: Runner, root: Path, run_id: str,
                 progress: Progress | None = None, *, resume: bool = False) -> list[StageReport]:
    """Run every stage of `spec` with `runner`; return one report per stage.

    Stages are chained generators: a map stage pulls blocks from the stage before it as its
    window frees up, so ingest reads only as far ahead as the runner's window. A stage whose
    `inputs` names an earlier, non-adjacent stage reads that stage's stored records once
    every stage before it has committed; driver stages (batching, train, evaluate) run once
    their input has committed. With `resume`, stages the run already committed are kept and
    the run goes on from the first one it did not finish.

    Raises:
        ConfigError: the run id is taken (or, resuming, unknown), or the pipeline's shape is
            not supported.
        StageError: a stage failed; no artifact of an unfinished stage is committed.
    """
    folder = _open_run(run_dir(root, run_id), run_id, resume)
    record = {"run_id": run_id, "pipeline": spec.name, "runner": runner.name,
              "workers": runner.workers, "window": runner.window, "started_at": _now()}
    _write_run(folder, {**record, "status": "running"})
    reports: list[StageReport] = []
    artifacts: dict[str, StageArtifact] = {}
    try:
        stream: Iterator[Block] | None = None
        previous: str | None = None
        for stage in spec.stages:
            source = stage.inputs[0] if stage.inputs else previous
            report = StageReport(stage.name, stage.component, source=source)
            reports.append(report)
            if resume and (folder / stage.name / MANIFEST).exists():
                _drain(stream)
                stream, previous = None, stage.name
                _reuse(report, folder / stage.name)
                continue
            artifact = artifacts[stage.name] = StageArtifact(root, run_id, stage.name)
            if COMPONENTS[stage.component].kind == "driver":
                _drain(stream)
                stream = None
                context = StageContext(folder, artifact.path, source, spec.base_dir, spec.name)
                _run_driver(stage, context, artifact, report, runner, progress)
            else:
                if source is not None and (stream is None or source != previous):
                    _drain(stream)  # every stage so far finishes and commits first
                    stream = _read_records(folder / source)
                produced = _produce(stage, spec.base_dir, runner, stream, artifact.path)
                stream = _track(stage, produced, artifact, report, runner, progress)
            previous = stage.name
        _drain(stream)
    except BaseException as exc:
        for report in reports:
            if report.status not in ("succeeded", "reused"):
                report.status = "failed"
                if report.stage in artifacts:
                    artifacts[report.stage].abandon()
        _write_run(folder, {**record, "status": "failed", "finished_at": _now(),
                            "error": f"{type(exc).__name__}: {exc}"})
        raise
    _write_run(folder, {**record, "status": "succeeded", "finished_at": _now(),
                        "stages": [r.stage for r in reports]})
    return reports


def _open_run(folder: Path, run_id: str, resume: bool) -> Path:
    if resume:
        if not (folder / "run.json").exists():
            raise ConfigError(f"no run {run_id!r} to resume under {folder.parent}. Check "
                              "--run-id and --root.")
        for leftover in folder.glob(".*.tmp-*"):  # an interrupted stage's partial output
            shutil.rmtree(leftover, ignore_errors=True)
    elif (folder / "run.json").exists():
        raise ConfigError(f"run id {run_id!r} is already used under {folder}. Choose another "
                          "--run-id (or omit it for a fresh one), or add --resume to finish it.")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _reuse(report: StageReport, stage_dir: Path) -> None:
    """A stage the resumed run already committed: its report, from its manifest."""
    m = read_manifest(stage_dir)
    report.counts = Counts(m["records_in"], m["records_out"], m["filtered"], m["exploded"],
                           m["dead_lettered"])
    report.seq_min, report.seq_max, report.seconds = m["seq_min"], m["seq_max"], m["seconds"]
    report.status, report.path = "reused", stage_dir


def _drain(stream: Iterator[Block] | None) -> None:
    for _ in stream or ():
        pass


def _read_records(stage_dir: Path) -> Iterator[Block]:
    """A committed stage's stored records as blocks, one per shard, in seq order."""
    manifest = read_manifest(stage_dir)
    if manifest.get("format") != "tfrecord":
        raise ConfigError(f"stage {stage_dir.name!r} streamed its output without storing it, "
                          "so a later stage cannot read it now (e.g. after --resume). Start a "
                          "new run.")
    for index, batch in enumerate(read_artifact(stage_dir, manifest)):
        yield Block(index, batch)


def _run_driver(stage: StageSpec, context: StageContext, artifact: StageArtifact,
                report: StageReport, runner: Runner, progress: Progress | None) -> None:
    """A driver stage: run it on the committed artifacts of the run, commit what it returns."""
    start = time.perf_counter()
    report.status = "running"
    if progress:
        progress(stage.name, report.counts)
    stored = COMPONENTS[stage.component].executor(stage, context)
    records = stored.pop("records_in", 0)
    report.counts = Counts(records_in=records, records_out=records)
    if progress:
        progress(stage.name, report.counts)
    report.seconds = time.perf_counter() - start
    report.status = "succeeded"
    report.path = artifact.commit(_manifest(stage, report, runner, stored))


def _produce(stage: StageSpec, base_dir: Path, runner: Runner,
             upstream: Iterator[Block] | None, out_dir: Path) -> Iterator[BlockResult]:
    component = COMPONENTS[stage.component]
    if component.kind == "source":
        yield from component.executor(stage, base_dir)
        return
    task = component.executor(stage, base_dir, out_dir)
    blocks = upstream or iter(())
    if task.input_records:
        blocks = recut((b.batch for b in blocks), task.input_records)
    runner.max_in_flight = 0
    yield from runner.map_blocks(task, blocks)


def _track(stage: StageSpec, produced: Iterator[BlockResult], artifact: StageArtifact,
           report: StageReport, runner: Runner, progress: Progress | None) -> Iterator[Block]:
    """Pass non-empty blocks on, renumbered densely; account for everything; commit at the end."""
    start = time.perf_counter()
    report.status = "running"
    out = _StageOutput(stage, artifact.path)
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
    report.max_in_flight = runner.max_in_flight
    stored = out.finish(report.counts)
    report.seq_min, report.seq_max = out.seq_min, out.seq_max
    report.status = "succeeded"
    report.path = artifact.commit(_manifest(stage, report, runner, stored))


class _StageOutput:
    """What a stage's results add up to: seq range and digest, dead letters, shards, schema.

    Dead letters are appended to the stage's file as they arrive and held to its error budget;
    shard descriptions are kept in block order, which is seq order.
    """

    def __init__(self, stage: StageSpec, folder: Path) -> None:
        self.stage = stage
        self.component = COMPONENTS[stage.component]
        self.digest = SeqDigest()
        self.dead = DeadLetterFile(folder)
        self.shards: list[dict[str, Any]] = []
        self.schema: pa.Schema | None = None
        self.seq_min: int | None = None
        self.seq_max: int | None = None
        self.forwarded = 0

    def add(self, result: BlockResult) -> None:
        self.dead.add(result.dead_letters)
        if self.stage.errors:
            self.stage.errors.check_running(self.stage.name, self.dead.count, self.dead.first)
        batch = result.batch
        if batch is None or not batch.num_rows:
            return
        seq = seq_of(batch)
        self.digest.update(seq)
        self.seq_min = int(seq[0]) if self.seq_min is None else self.seq_min
        self.seq_max = int(seq[-1])
        if result.shard is not None:
            self._check_schema(result, batch.schema)
            self.shards.append(result.shard)

    def _check_schema(self, result: BlockResult, schema: pa.Schema) -> None:
        if self.schema is None:
            self.schema = schema
        elif schema != self.schema:
            raise StageError(
                f"stage {self.stage.name!r}: block {result.index} (first seq "
                f"{result.first_seq}) returned columns {_describe(schema)}, but earlier blocks "
                f"returned {_describe(self.schema)}. Return the same columns and types from "
                "every block (cast explicitly where a type depends on the data).",
                stage=self.stage.name, block=result.index, seq=result.first_seq)

    def finish(self, counts: Counts) -> dict[str, Any]:
        """The manifest's account of the output; raises if the error budget is exceeded."""
        dead = self.dead.close()
        if self.stage.errors:
            self.stage.errors.check_final(self.stage.name, self.dead.count, counts.records_in,
                                          self.dead.first)
        stored: dict[str, Any] = {"seq_digest": self.digest.hexdigest(), "dead_letters": dead}
        if self.component.writes_records:
            params = self.component.params_with_defaults(self.stage)
            stored |= {
                "format": "tfrecord",
                "compression": params["compression"],
                "schema": schema_to_text(self.schema) if self.schema else None,
                "features": {f.name: str(f.type) for f in self.schema or []},
                "shards": self.shards,
            }
        return stored


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _manifest(stage: StageSpec, report: StageReport, runner: Runner,
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
        "errors": asdict(stage.errors) if stage.errors else None,
        "seconds": round(report.seconds, 4),
        "params": dict(stage.params),
        "runner": {"name": runner.name, "workers": runner.workers, "window": runner.window},
        "committed_at": _now(),
    }


def _write_run(folder: Path, record: dict[str, Any]) -> None:
    tmp = folder / "run.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True))
    tmp.replace(folder / "run.json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
