"""Running a pipeline: stages in file order, blocks streaming between them, each stage's
artifact committed when its output is complete."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seqline.components import COMPONENTS
from seqline.orchestration.runners import Runner
from seqline.pipeline.artifacts import StageArtifact, run_dir
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import PipelineSpec, StageSpec
from seqline.pipeline.stage import Counts

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


def run_pipeline(spec: PipelineSpec, runner: Runner, root: Path, run_id: str,
                 progress: Progress | None = None) -> list[StageReport]:
    """Run every stage of `spec` with `runner`; return one report per stage.

    Stages are chained generators: a map stage pulls blocks from the stage before it as its
    window frees up, so ingest reads only as far ahead as the runner's window.

    Raises:
        ConfigError: the run id is taken, or the pipeline's shape is not supported.
        StageError: a stage failed; no artifact of an unfinished stage is committed.
    """
    folder = run_dir(root, run_id)
    if (folder / "run.json").exists():
        raise ConfigError(f"run id {run_id!r} is already used under {folder}. "
                          "Choose another --run-id (or omit it for a fresh one).")
    folder.mkdir(parents=True, exist_ok=True)
    record = {"run_id": run_id, "pipeline": spec.name, "runner": runner.name,
              "workers": runner.workers, "window": runner.window, "started_at": _now()}
    _write_run(folder, {**record, "status": "running"})
    reports: list[StageReport] = []
    artifacts: list[StageArtifact] = []
    try:
        stream: Iterator[Block] | None = None
        previous: str | None = None
        for stage in spec.stages:
            _check_input(stage, previous)
            report = StageReport(stage.name, stage.component)
            artifact = StageArtifact(root, run_id, stage.name)
            reports.append(report)
            artifacts.append(artifact)
            produced = _produce(stage, spec.base_dir, runner, stream)
            stream = _track(stage, produced, artifact, report, runner, progress)
            previous = stage.name
        for _ in stream or ():
            pass
    except BaseException as exc:
        for artifact, report in zip(artifacts, reports, strict=True):
            if report.status != "succeeded":
                report.status = "failed"
                artifact.abandon()
        _write_run(folder, {**record, "status": "failed", "finished_at": _now(),
                            "error": f"{type(exc).__name__}: {exc}"})
        raise
    _write_run(folder, {**record, "status": "succeeded", "finished_at": _now(),
                        "stages": [r.stage for r in reports]})
    return reports


def _produce(stage: StageSpec, base_dir: Path, runner: Runner,
             upstream: Iterator[Block] | None) -> Iterator[tuple[Block, Counts]]:
    component = COMPONENTS[stage.component]
    if component.kind == "source":
        for block in component.executor(stage, base_dir):
            yield block, Counts(len(block), len(block))
        return
    task = component.executor(stage, base_dir)
    runner.max_in_flight = 0
    for result in runner.map_blocks(task, upstream or iter(())):
        yield Block(result.index, result.batch), result.counts


def _track(stage: StageSpec, produced: Iterator[tuple[Block, Counts]], artifact: StageArtifact,
           report: StageReport, runner: Runner, progress: Progress | None) -> Iterator[Block]:
    """Pass blocks through, counting them; commit the stage's manifest when they end."""
    start = time.perf_counter()
    report.status = "running"
    for block, counts in produced:
        report.counts += counts
        report.blocks += 1
        if len(block):
            seq = block.seq
            report.seq_min = int(seq[0]) if report.seq_min is None else report.seq_min
            report.seq_max = int(seq[-1])
        if progress:
            progress(stage.name, report.counts)
        yield block
    report.seconds = time.perf_counter() - start
    report.max_in_flight = runner.max_in_flight
    report.status = "succeeded"
    report.path = artifact.commit(_manifest(stage, report, runner))


def _manifest(stage: StageSpec, report: StageReport, runner: Runner) -> dict[str, Any]:
    return {
        "stage": stage.name,
        "component": stage.component,
        "status": report.status,
        **asdict(report.counts),
        "blocks": report.blocks,
        "seq_min": report.seq_min,
        "seq_max": report.seq_max,
        "seconds": round(report.seconds, 4),
        "params": dict(stage.params),
        "runner": {"name": runner.name, "workers": runner.workers, "window": runner.window},
        "committed_at": _now(),
    }


def _check_input(stage: StageSpec, previous: str | None) -> None:
    if stage.inputs and list(stage.inputs) != [previous]:
        raise ConfigError(
            f"{stage.where}: reads {list(stage.inputs)}, but this version streams each stage "
            f"into the next only (here {previous!r}). Reorder the stages so that each reads "
            "the one before it.")


def _write_run(folder: Path, record: dict[str, Any]) -> None:
    tmp = folder / "run.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True))
    tmp.replace(folder / "run.json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
