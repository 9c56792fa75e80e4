"""The Beam runner: a map stage as one composite PTransform, order restored by block index."""

from __future__ import annotations

import pickle
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from seqline.orchestration.processes import scratch_dir, stop_children
from seqline.orchestration.runners.base import Runner
from seqline.pipeline.blocks import Block
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["BeamRunner", "RunMapStage"]

BeamMode = Literal["in_memory", "multi_threading", "multi_processing"]


def _block_name(index: int) -> str:
    return f"block-{index:09d}.pkl"  # zero-padded: names sort in block order


def _run_spilled(path: str, task: MapTask, out_dir: str) -> int:
    with open(path, "rb") as f:
        block: Block = pickle.load(f)
    result = task(block)
    with open(Path(out_dir) / _block_name(block.index), "wb") as f:
        pickle.dump(result, f, protocol=5)  # protocol 5: Arrow buffers without extra copies
    return block.index


class RunMapStage(beam.PTransform):
    """Spilled block paths -> the task's results, written beside them as block files.

    PCollections have no order, so nothing here trusts element order: each result is written
    under its block index and the driver reads them back by index.
    """

    def __init__(self, task: MapTask, out_dir: str) -> None:
        super().__init__()
        self.task, self.out_dir = task, out_dir

    def expand(self, paths: Any) -> Any:
        return (paths
                | "SpreadBlocks" >> beam.Reshuffle()  # else one bundle -> one worker
                | "RunStage" >> beam.Map(_run_spilled, self.task, self.out_dir))


class BeamRunner(Runner):
    """Runs each map stage as one Beam pipeline: DirectRunner's FnApiRunner by default.

    The FnApiRunner is named explicitly rather than "DirectRunner", which since Beam 2.68
    first tries the Prism runner, a binary it downloads: runs here stay offline and repeatable.
    `mode` picks the FnApiRunner's execution (in_memory: one thread; multi_processing:
    `workers` SDK worker processes). Any other Beam runner (Flink, Spark, Dataflow) is chosen
    with `options`, e.g. ["--runner=FlinkRunner", "--flink_master=host:8081"].

    Blocks are spilled to files first and results come back as files named by block index,
    so the stage is a batch job: it starts when its input is complete, and the window bounds
    memory on the driver but not Beam's own scheduling (see docs/decisions.md).
    """

    name = "beam"

    def __init__(self, workers: int = 2, window: int | None = None,
                 mode: BeamMode = "multi_processing", options: list[str] | None = None,
                 temp_dir: str | None = None) -> None:
        super().__init__(workers, window)
        self.mode = mode
        self.options = list(options or [])
        self.temp_dir = temp_dir
        self._work: set[Path] = set()  # the stages' spill folders, while they run

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        work = scratch_dir("beam", task.stage) if self.temp_dir is None else \
            Path(tempfile.mkdtemp(prefix=f"seqline-beam-{task.stage}-", dir=self.temp_dir))
        self._work.add(work)
        try:
            paths = self._spill(blocks, work / "in")
            self.peaks[task.stage] = min(len(paths), self._parallelism)
            out_dir = work / "out"
            out_dir.mkdir()
            self._run_pipeline(task, paths, str(out_dir))
            names = sorted(p.name for p in out_dir.iterdir())
            for name in names:
                with open(out_dir / name, "rb") as f:
                    result: BlockResult = pickle.load(f)
                result.raise_if_failed()
                yield result
        finally:
            shutil.rmtree(work, ignore_errors=True)
            self._work.discard(work)

    def abort(self) -> None:
        """Stop the SDK worker processes (multi_processing), so that the stage's Beam job
        fails at once, and remove the blocks spilled for it."""
        stop_children("sdk_worker_main")
        for work in list(self._work):
            shutil.rmtree(work, ignore_errors=True)

    def _spill(self, blocks: Iterable[Block], folder: Path) -> list[str]:
        folder.mkdir(parents=True)
        paths = []
        for block in blocks:
            path = folder / _block_name(block.index)
            with open(path, "wb") as f:
                pickle.dump(block, f, protocol=5)
            paths.append(str(path))
        in_flight: int = min(len(paths), self._parallelism)
        self.max_in_flight = max(self.max_in_flight, in_flight)
        return paths

    @property
    def _parallelism(self) -> int:
        return 1 if self.mode == "in_memory" else min(self.workers, self.window)

    def _run_pipeline(self, task: MapTask, paths: list[str], out_dir: str) -> None:
        options = PipelineOptions([
            f"--direct_running_mode={self.mode}",
            f"--direct_num_workers={self._parallelism}",
            *self.options,
        ])
        with beam.Pipeline(runner=self._runner(), options=options) as p:
            _ = (p
                 | "Blocks" >> beam.Create(paths, reshuffle=False)
                 | task.stage >> RunMapStage(task, out_dir))

    def _runner(self) -> Any:
        if any(o.startswith("--runner") for o in self.options):
            return None  # the user's --runner in options wins
        return FnApiRunner()
