"""The Beam runner: a map stage as one composite PTransform, order restored by block index."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Literal

import apache_beam as beam
import psutil
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from seqline.orchestration.processes import scratch_dir, stop_children
from seqline.orchestration.runners.base import Runner, poisoned
from seqline.pipeline.blocks import Block
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["BeamRunner", "RunMapStage"]

log = logging.getLogger("seqline")

SDK_WORKER = "apache_beam.runners.worker.sdk_worker_main"  # in its processes' command lines
WATCH_SECONDS = 0.2  # how often a running job's SDK workers are checked
SCAN_EVERY = 5  # checks between two looks for new SDK workers (one look: ~2 ms of CPU)

BeamMode = Literal["in_memory", "multi_threading", "multi_processing"]


def _block_name(index: int) -> str:
    return f"block-{index:09d}.pkl"  # zero-padded: names sort in block order


def _run_spilled(path: str, task: MapTask, out_dir: str) -> str:
    """Run one spilled block, once: Beam runs a bundle again when its worker died.

    Each attempt leaves a marker while it runs, so one that killed its worker is still there
    when Beam retries: a block already done is skipped, and one that killed its worker
    `task.retries` + 1 times is given up as poisoned instead of killing workers for ever.
    """
    out, name = Path(out_dir), Path(path).name  # a result is named as its spilled block
    if (out / name).exists():
        return name
    with open(path, "rb") as f:
        block: Block = pickle.load(f)
    attempt = 1 + len(list(out.glob(f"{name}.attempt-*")))
    if attempt > task.retries + 1:
        result = poisoned(task.stage, block, attempt - 1)
    else:
        if attempt > 1:
            log.warning("stage %r: the worker running block %d (first seq %s) died; running "
                        "it again (attempt %d of %d)", task.stage, block.index,
                        block.first_seq, attempt, task.retries + 1)
        marker = out / f"{name}.attempt-{attempt}.{os.getpid()}"  # the pid: see _run_surviving
        marker.touch()
        result = task(block)
    partial = out / f".{name}.tmp-{os.getpid()}"
    with open(partial, "wb") as f:
        pickle.dump(result, f, protocol=5)  # protocol 5: Arrow buffers without extra copies
    os.replace(partial, out / name)  # a worker killed mid-write leaves no half result
    if attempt <= task.retries + 1:
        marker.unlink()
    return name


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
        self._aborted = False

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
            self._run_surviving(task, paths, out_dir)
            # Markers left behind are attempts whose worker died (see _run_spilled).
            died = len(list(out_dir.glob("*.attempt-*")))
            if died:
                self.block_retries[task.stage] = self.block_retries.get(task.stage, 0) + died
            names = sorted(p.name for p in out_dir.glob("block-*.pkl"))
            for name in names:
                with open(out_dir / name, "rb") as f:
                    result: BlockResult = pickle.load(f)
                result.raise_if_failed()
                yield result
        finally:
            shutil.rmtree(work, ignore_errors=True)
            self._work.discard(work)

    def abort(self) -> None:
        """Stop the SDK worker processes (multi_processing) and remove the blocks spilled
        for the stages; their jobs are left on daemon threads (see _run_surviving)."""
        self._aborted = True
        stop_children(SDK_WORKER)
        for work in list(self._work):
            shutil.rmtree(work, ignore_errors=True)

    def _run_surviving(self, task: MapTask, paths: list[str], out_dir: Path) -> None:
        """Run the stage's Beam job until every block has a result, through worker deaths.

        When an SDK worker process dies, Beam's FnApiRunner (multi_processing) waits for its
        bundle for ever (seen with Beam 2.77). So the job is watched: on a death, its other
        workers are stopped and a new job runs the blocks that have no result yet. The dead
        block's marker makes that its next attempt (see _run_spilled). A job stuck that way
        is left on a daemon thread; on Flink, Spark or Dataflow the engine retries bundles
        itself and this watch never fires.
        """
        while missing := [p for p in paths if not (out_dir / Path(p).name).exists()]:
            job: Future[None] = Future()
            threading.Thread(target=self._job, args=(job, task, missing, str(out_dir)),
                             daemon=True, name=f"seqline-beam-{task.stage}").start()
            if not self._died_during(job):
                job.result()  # the job's own error, if it failed
                return
            stopped = stop_children(SDK_WORKER)
            for marker in out_dir.glob("*.attempt-*"):  # only the dead worker's block is
                if int(marker.suffix[1:]) in stopped:    # charged an attempt
                    marker.unlink(missing_ok=True)

    def _job(self, job: Future[None], task: MapTask, paths: list[str], out_dir: str) -> None:
        try:
            self._run_pipeline(task, paths, out_dir)
            job.set_result(None)
        except BaseException as exc:
            job.set_exception(exc)

    def _died_during(self, job: Future[None]) -> bool:
        """Wait for `job`; True if one of its SDK workers died first (the job then hangs)."""
        seen: dict[int, psutil.Process] = {}
        looks = 0
        while not job.done():
            if looks % SCAN_EVERY == 0:  # finding new workers reads all of /proc: not often
                for child in psutil.Process().children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if SDK_WORKER in " ".join(child.cmdline()):
                            seen.setdefault(child.pid, child)
            looks += 1
            if self._aborted:
                return False
            gone = [p for p in seen.values() if not p.is_running()
                    or p.status() == psutil.STATUS_ZOMBIE]
            if gone:  # Beam stops its workers as a job ends: give an ending job a moment
                with contextlib.suppress(TimeoutError):
                    job.exception(timeout=1.0)
                return not job.done()
            with contextlib.suppress(TimeoutError):
                job.exception(timeout=WATCH_SECONDS)
        return False

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
