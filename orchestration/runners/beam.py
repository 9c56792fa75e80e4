"""The Beam runner: a map stage as one Beam job of SeqlineMap, order restored by block index."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import Literal

import apache_beam as beam
import grpc
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from seqline.orchestration.events import BlockRetried, Occupancy, Subscriber
from seqline.orchestration.processes import scratch_dir
from seqline.orchestration.runners import beam_workers
from seqline.orchestration.runners.base import Runner
from seqline.orchestration.runners.beam_transforms import (
    MarkDone,
    ReadBlocks,
    SeqlineMap,
    block_name,
    done_name,
    put,
    read_result,
    result_name,
)
from seqline.pipeline.blocks import Block, batch_to_ipc
from seqline.pipeline.errors import Cancelled, ConfigError
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["BeamRunner", "SeqlineMap"]

WATCH_SECONDS = 0.2  # how often a running job's SDK workers are checked
# How long a job whose worker exited gets to end before the exit counts as a death. Beam stops
# its workers as a job ends; on a loaded machine the job may take seconds more to return, and
# taking that for a death stops the other workers and reruns blocks for nothing.
ENDING_GRACE_SECONDS = 5.0

BeamMode = Literal["in_memory", "multi_threading", "multi_processing"]


class BeamRunner(Runner):
    """Runs each map stage (or several fused into one, `map_fused`) as one Beam job of
    `SeqlineMap`s: Beam's FnApiRunner by default.

    The FnApiRunner is named explicitly rather than "DirectRunner", which since Beam 2.68
    first tries the Prism runner, a binary it downloads: runs here stay offline and repeatable.
    `mode` picks the FnApiRunner's execution (in_memory: one thread; multi_threading: threads;
    multi_processing: `workers` SDK worker processes). Any other Beam runner is chosen with
    `options`, e.g. ["--runner=FlinkRunner", "--flink_master=host:8081",
    "--temp_location=s3://bucket/tmp"].

    Blocks and results travel through a scratch location that the driver and every worker
    reach, one folder per stage job, removed when the stage ends: `scratch` if given (a fsspec
    URL, e.g. under the artifact root), else the `--temp_location` of `options`; on the
    FnApiRunner without either, process memory (`memory://`, in_memory and multi_threading:
    the workers are threads of this process) or a local temp folder (multi_processing: the
    workers are processes of this machine). A cluster runner with neither is a ConfigError.

    A stage is a batch job: it starts when its input is complete. The driver holds one block
    at a time (each is written out as it arrives, and results are read back one by one, in
    block order); the scratch location holds the stage's whole input and output meanwhile.
    """

    name = "beam"

    def __init__(self, workers: int = 2, window: int | None = None,
                 mode: BeamMode = "multi_processing", options: list[str] | None = None,
                 scratch: str | None = None, publish: Subscriber | None = None) -> None:
        super().__init__(workers, window, publish)
        self.mode = mode
        self.options = list(options or [])
        given = scratch or PipelineOptions(self.options).get_all_options().get("temp_location")
        self.scratch: str | None = given.rstrip("/") if given else None
        if self.scratch is None and not self._on_fn_api_runner:
            raise ConfigError(
                "runner beam: a Beam runner other than the FnApiRunner needs a location that "
                "its workers and this driver both reach, for the blocks and their results. "
                "Pass --temp_location=<URL> in the Beam options (gs://…, s3://…, hdfs://…).")
        self._work: set[str] = set()  # the stages' scratch folders, while they run
        self._aborted = False

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        for results in self.map_fused([task], blocks):
            results[0].raise_if_failed()
            yield results[0]

    def map_fused(self, tasks: list[MapTask],
                  blocks: Iterable[Block]) -> Iterator[list[BlockResult]]:
        """Run `tasks` one after the other on every block, all in one Beam job.

        Yields, in block order, each block's results: one per task that ran on it. Task k + 1
        runs on task k's output with the same block index, and not at all where task k failed
        or kept no rows (the list is then shorter). Failures are returned, not raised: each
        belongs to its own stage. Beam fuses them, so a block goes through every task in
        one bundle: one job's start-up, and no trip through storage between the stages.
        """
        work = self._scratch_for(tasks[0].stage)
        self._work.add(work)
        try:
            indices = self._spill(blocks, f"{work}/in")
            outs = _outs(work, tasks)
            for task in tasks:  # the job's workers: every block is in flight until it ends
                self.publish(Occupancy(stage=task.stage,
                                       in_flight=min(len(indices), self._parallelism), held=0))
            for folder in [*outs, f"{work}/done"]:
                fs, path = url_to_fs(folder)
                fs.makedirs(path, exist_ok=True)
            self._run_surviving(tasks, work, indices)
            for task, out in zip(tasks, outs, strict=True):
                # Markers left behind are attempts whose worker died (see _run_block).
                for _ in _attempt_markers(out):  # (which block and attempt: not told)
                    self.publish(BlockRetried(stage=task.stage, block=None, first_seq=None,
                                              attempt=None))
                self.publish(Occupancy(stage=task.stage, in_flight=0, held=0))
            for index in indices:  # block order, whatever order the job finished them in
                yield list(_results_of(index, outs))
        finally:
            _remove(work)
            self._work.discard(work)

    def abort(self) -> None:
        """Stop the SDK worker processes (multi_processing) and remove the stages' scratch
        folders; their jobs are left on daemon threads (see _run_surviving)."""
        self._aborted = True
        beam_workers.stop()
        for work in list(self._work):
            _remove(work)

    @property
    def _on_fn_api_runner(self) -> bool:
        return not any(o.startswith("--runner") for o in self.options)

    @property
    def _local_processes(self) -> bool:
        """The FnApiRunner's worker processes: this runner, not Beam, retries their deaths."""
        return self._on_fn_api_runner and self.mode == "multi_processing"

    def _scratch_for(self, stage: str) -> str:
        if self.scratch is not None:
            return f"{self.scratch}/seqline-beam-{os.getpid()}-{stage}-{uuid.uuid4().hex[:8]}"
        if self._local_processes:
            return str(scratch_dir("beam", stage))
        return f"memory://seqline-beam-{os.getpid()}-{stage}-{uuid.uuid4().hex[:8]}"

    def _run_surviving(self, tasks: list[MapTask], work: str, indices: list[int]) -> None:
        """Run the stage's Beam job until every block is done, through worker deaths.

        When an SDK worker process dies, Beam's FnApiRunner (multi_processing) waits for its
        bundle for ever (seen with Beam 2.77). So the job is watched: on a death, its other
        workers are stopped and a new job runs the blocks that have no result yet. The dead
        block's marker makes that its next attempt (see _run_block). A job stuck that way
        is left on a daemon thread. On Flink, Spark or Dataflow the engine retries bundles
        itself: no markers are written and this watch never fires.
        """
        fs, marks = url_to_fs(f"{work}/done")
        done = _listing(fs, marks)
        while missing := [i for i in indices if f"{marks}/{done_name(i)}" not in done]:
            job: Future[None] = Future()
            threading.Thread(target=self._job, args=(job, tasks, work, missing),
                             daemon=True, name=f"seqline-beam-{tasks[0].stage}").start()
            dead = self._died_during(job)
            if not dead:
                if self._aborted:  # the job is left on its daemon thread, as a stuck one is
                    raise Cancelled("the run was cancelled")
                job.result()  # the job's own error, if it failed
                return
            stopped = beam_workers.stop()
            # Only the dead worker's block is charged an attempt (`stop` stops the others,
            # the workers still running).
            for out in _outs(work, tasks):
                for marker in _attempt_markers(out):
                    if int(marker.rsplit(".", 1)[1]) in stopped - dead:
                        fs.rm_file(marker)
            fs.invalidate_cache(marks)
            done = _listing(fs, marks)

    def _job(self, job: Future[None], tasks: list[MapTask], work: str,
             indices: list[int]) -> None:
        try:
            self._run_pipeline(tasks, work, indices)
            job.set_result(None)
        except BaseException as exc:
            job.set_exception(exc)

    def _died_during(self, job: Future[None]) -> set[int]:
        """Wait for `job`; the pids of its SDK workers that died first (the job then hangs)."""
        # Workers of an earlier job may not have ended yet: not this job's.
        earlier = set(beam_workers.started())
        mine: set[int] = set()
        try:
            while not job.done():
                if self._aborted:
                    return set()
                workers = {pid: w for pid, w in beam_workers.started().items()
                           if pid not in earlier}
                mine |= workers.keys()
                gone = {pid for pid, w in workers.items() if w.exitcode}
                if gone:  # Beam stops its workers as a job ends: give an ending job a moment
                    with contextlib.suppress(TimeoutError):
                        job.exception(timeout=ENDING_GRACE_SECONDS)
                    return set() if job.done() else gone
                with contextlib.suppress(TimeoutError):
                    job.exception(timeout=WATCH_SECONDS)
            return set()
        finally:  # those that ended (another job's still running are that job's to watch)
            beam_workers.forget({pid for pid, w in beam_workers.started().items()
                                 if pid in mine and w.exitcode is not None})

    def _spill(self, blocks: Iterable[Block], folder: str) -> list[int]:
        """Write each block's Arrow IPC bytes into `folder` as it arrives; their indices."""
        fs, path = url_to_fs(folder)
        fs.makedirs(path, exist_ok=True)
        indices = []
        for block in blocks:
            put(f"{folder}/{block_name(block.index)}", batch_to_ipc(block.batch))
            indices.append(block.index)
        return indices

    @property
    def _parallelism(self) -> int:
        return 1 if self.mode == "in_memory" else min(self.workers, self.window)

    def _run_pipeline(self, tasks: list[MapTask], work: str, indices: list[int]) -> None:
        # multi_processing: workers forked with Beam imported, not started as new interpreters
        # (beam_workers.py); the FnApiRunner then runs `direct_num_workers` of them, with the
        # mode it would otherwise set its own environment by left at in_memory.
        forked = self._local_processes
        options = PipelineOptions([
            f"--direct_running_mode={'in_memory' if forked else self.mode}",
            f"--direct_num_workers={self._parallelism}",
            *self.options,
        ])
        urls = [(i, f"{work}/in/{block_name(i)}") for i in indices]
        runner = None  # the user's --runner
        if self._on_fn_api_runner:
            runner = FnApiRunner(beam_workers.ForkedEnvironment.default() if forked else None)
        with beam.Pipeline(runner=runner, options=options) as p:
            blocks = (p
                      | "Blocks" >> beam.Create(urls, reshuffle=False)
                      | "ReadBlocks" >> ReadBlocks())
            for task, out in zip(tasks, _outs(work, tasks), strict=True):
                blocks |= task.stage >> SeqlineMap(task, out,
                                                   count_attempts=self._local_processes)
            _ = blocks | "Done" >> MarkDone(f"{work}/done")


def _quiet_stopped_workers(args: threading.ExceptHookArgs) -> None:
    """When an SDK worker process dies or is stopped, two of Beam's threads raise: `run_worker`
    (the process exited non-zero) and `beam_control_read` (its gRPC stream broke), and Python
    prints each as a traceback on stderr. This runner stops workers itself (after a death, on a
    cancel) and reports deaths in its own words (a retry line, a poisoned block's error), so
    those tracebacks would only be noise, even under `-q`."""
    name = args.thread.name if args.thread is not None else ""
    if (name == "run_worker" and isinstance(args.exc_value, RuntimeError)
            and str(args.exc_value).startswith(beam_workers.EXITED)) \
            or (name == "beam_control_read" and isinstance(args.exc_value, grpc.RpcError)):
        return
    _EXCEPTHOOK(args)


_EXCEPTHOOK = threading.excepthook
threading.excepthook = _quiet_stopped_workers


def _outs(work: str, tasks: list[MapTask]) -> list[str]:
    """Where each stage of a job writes its blocks' results (stage names are safe names)."""
    return [f"{work}/out-{task.stage}" for task in tasks]


def _results_of(index: int, outs: list[str]) -> Iterator[BlockResult]:
    """Block `index`'s results, stage by stage, up to the stage where it stopped."""
    for out in outs:
        try:
            yield read_result(f"{out}/{result_name(index)}")
        except FileNotFoundError:
            return


def _listing(fs: AbstractFileSystem, folder: str) -> set[str]:
    """What is in `folder`; nothing if it is not there (an object store has no empty folders)."""
    return set(fs.ls(folder, detail=False)) if fs.exists(folder) else set()


def _attempt_markers(folder: str) -> list[str]:
    fs, path = url_to_fs(folder)
    fs.invalidate_cache(path)
    return list(fs.glob(f"{path}/*.attempt-*"))


def _remove(url: str) -> None:
    fs, path = url_to_fs(url)
    with contextlib.suppress(FileNotFoundError, OSError):
        fs.rm(path, recursive=True)
