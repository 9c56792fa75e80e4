"""The Beam runner: a map stage as one Beam job of SeqlineMap, order restored by block index."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Literal

import apache_beam as beam
import grpc
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from fsspec.core import url_to_fs

from seqline.orchestration.events import BlockRetried, Occupancy, Subscriber
from seqline.orchestration.processes import scratch_dir
from seqline.orchestration.runners import beam_workers
from seqline.orchestration.runners.base import Runner
from seqline.orchestration.runners.beam_options import on_fn_api_runner, scratch_location
from seqline.orchestration.runners.beam_scratch import (
    attempt_markers,
    charge,
    listing,
    once_done,
    out_folders,
    remove,
    results_of,
)
from seqline.orchestration.runners.beam_transforms import (
    MarkDone,
    ReadBlocks,
    SeqlineMap,
    attempts_folder,
    block_name,
    done_name,
    put,
)
from seqline.orchestration.runners.beam_workers import WorkersLost
from seqline.pipeline.blocks import Block, batch_to_ipc
from seqline.pipeline.errors import RESUME, Cancelled
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["BeamRunner", "SeqlineMap"]

WATCH_SECONDS = 0.2  # how often a running job's SDK workers are checked
# Jobs in a row that may lose a worker outside any block, with no block done meanwhile,
# before the stage fails: a worker that dies at its start every time would otherwise be
# started again for ever. A block that kills its worker is bounded by its own retries.
LOST_JOBS = 3

# Beam's threads that read from an SDK worker: they raise when it is gone (see below).
BROKEN_STREAMS = ("beam_control_read", "read_grpc_client_inputs")

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
    block order, as the job finishes them); the scratch location holds the stage's whole
    input and output meanwhile.
    """

    name = "beam"

    def __init__(self, workers: int = 2, window: int | None = None,
                 mode: BeamMode = "multi_processing", options: list[str] | None = None,
                 scratch: str | None = None, publish: Subscriber | None = None) -> None:
        super().__init__(workers, window, publish)
        self.mode = mode
        self.options = list(options or [])
        self.scratch = scratch_location(self.options, scratch)  # (a ConfigError if unsound)
        self._work: set[str] = set()  # the stages' scratch folders, while they run
        self._jobs: set[str] = set()  # the keys of the jobs running (beam_workers.environment)
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
        A block's results are yielded as soon as it and every block before it are done, while
        the job runs on: the stages after it start on them (decision 65).
        """
        work = self._scratch_for(tasks[0].stage)
        self._work.add(work)
        job = _StageJob()
        try:
            indices = self._spill(blocks, f"{work}/in")
            outs = out_folders(work, tasks)
            for task in tasks:  # the job's workers: every block is in flight until it ends
                self.publish(Occupancy(stage=task.stage,
                                       in_flight=min(len(indices), self._parallelism), held=0))
            for folder in [*outs, *map(attempts_folder, outs), f"{work}/done"]:
                fs, path = url_to_fs(folder)
                fs.makedirs(path, exist_ok=True)
            threading.Thread(target=job.run, args=(self._run_surviving, tasks, work, indices),
                             daemon=True, name=f"seqline-beam-watch-{tasks[0].stage}").start()
            fs, marks = url_to_fs(f"{work}/done")
            done: set[str] = set()
            for index in indices:  # block order, whatever order the job finishes them in
                if f"{marks}/{done_name(index)}" not in done:
                    done = once_done(job.ended, fs, marks, index, tasks[0].stage)
                yield list(results_of(index, outs))
            job.ended.result()
            for task, out in zip(tasks, outs, strict=True):
                # Markers left behind are attempts whose worker died (see _run_block).
                for _ in attempt_markers(out):  # (which block and attempt: not told)
                    self.publish(BlockRetried(stage=task.stage, block=None, first_seq=None,
                                              attempt=None))
                self.publish(Occupancy(stage=task.stage, in_flight=0, held=0))
        finally:
            if not job.ended.done():  # left before the job ended: it is not needed any more
                job.stop()
            remove(work)
            self._work.discard(work)

    def abort(self) -> None:
        """Stop the SDK worker processes (multi_processing) and remove the stages' scratch
        folders; their jobs are left on daemon threads (see _run_surviving)."""
        self._aborted = True
        for key in list(self._jobs):
            beam_workers.stop(key)
        for work in list(self._work):
            remove(work)

    @property
    def _on_fn_api_runner(self) -> bool:
        return on_fn_api_runner(self.options)

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

    def _run_surviving(self, tasks: list[MapTask], work: str, indices: list[int],
                       stage_job: _StageJob) -> None:
        """Run the stage's Beam job until every block is done, through worker deaths.

        When an SDK worker process is gone (killed, ended, never started), Beam's FnApiRunner
        (multi_processing) waits for its bundle for ever (seen with Beam 2.77). So the job is
        watched: on a loss, its other workers are stopped and a new job runs the blocks that
        have no result yet. A block whose worker died in it is charged an attempt by its
        marker (see _run_block); jobs that lose workers outside any block, with no block
        done in between, fail the stage after LOST_JOBS of them (WorkersLost) rather than
        start workers for ever. A job given up is left on a daemon thread. On Flink, Spark or
        Dataflow the engine retries bundles itself: no markers are written and this watch
        never fires. A stage job stopped (its results no longer read) ends at its next job.
        """
        fs, marks = url_to_fs(f"{work}/done")
        done = listing(fs, marks)
        fruitless = 0
        while missing := [i for i in indices if f"{marks}/{done_name(i)}" not in done]:
            if stage_job.stopped.is_set():
                raise Cancelled("the stage's results are no longer read")
            key = stage_job.key = uuid.uuid4().hex
            job: Future[None] = Future()
            self._jobs.add(key)
            try:
                threading.Thread(target=self._job, args=(job, tasks, work, missing, key),
                                 daemon=True, name=f"seqline-beam-{tasks[0].stage}").start()
                lost = self._lost_during(job, key)
                if not lost:
                    if self._aborted:  # the job is left on its daemon thread, as a stuck one is
                        raise Cancelled("the run was cancelled")
                    job.result()  # the job's own error, if it failed
                    return
                stopped = beam_workers.stop(key)
            finally:
                if self._aborted:  # (abort() may have looked at the jobs before this one)
                    beam_workers.stop(key)
                self._jobs.discard(key)
                beam_workers.forget(key)
            charged = charge(tasks, work, {w.process.pid for w in lost if w.process}, stopped)
            fs.invalidate_cache(marks)
            before, done = len(done), listing(fs, marks)
            fruitless = 0 if charged or len(done) > before else fruitless + 1
            if fruitless == LOST_JOBS:
                raise WorkersLost(
                    f"stage {tasks[0].stage!r} on Beam: {LOST_JOBS} jobs in a row lost an SDK "
                    f"worker before it ran a block (the last one {lost[0].gone}). Nothing "
                    "points at the data: see that this machine can start Python processes "
                    f"(memory, process limits), then finish the run with {RESUME}.")

    def _job(self, job: Future[None], tasks: list[MapTask], work: str,
             indices: list[int], key: str) -> None:
        try:
            self._run_pipeline(tasks, work, indices, key)
            job.set_result(None)
        except BaseException as exc:
            job.set_exception(exc)

    def _lost_during(self, job: Future[None], key: str) -> list[beam_workers.Worker]:
        """Wait for `job`; its SDK workers that were lost first (the job then waits for
        ever). A worker's exit counts unless Beam was ending the job (Worker.closing)."""
        while not job.done():
            if self._aborted:
                return []
            if lost := beam_workers.lost(key):
                return lost
            with contextlib.suppress(TimeoutError):
                job.exception(timeout=WATCH_SECONDS)
        return []

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

    def _run_pipeline(self, tasks: list[MapTask], work: str, indices: list[int],
                      key: str) -> None:
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
            runner = FnApiRunner(beam_workers.environment(key) if forked else None)
        with beam.Pipeline(runner=runner, options=options) as p:
            blocks = (p
                      | "Blocks" >> beam.Create(urls, reshuffle=False)
                      | "ReadBlocks" >> ReadBlocks())
            for task, out in zip(tasks, out_folders(work, tasks), strict=True):
                blocks |= task.stage >> SeqlineMap(task, out,
                                                   count_attempts=self._local_processes)
            _ = blocks | "Done" >> MarkDone(f"{work}/done")


class _StageJob:
    """A stage's Beam job run to its end (`_run_surviving`, jobs after lost workers included)
    on its own thread, while the driver reads the results of the blocks done."""

    def __init__(self) -> None:
        self.ended: Future[None] = Future()
        self.stopped = threading.Event()
        self.key: str | None = None  # the Beam job running now (beam_workers.environment)

    def run(self, surviving: Callable[..., None], *args: object) -> None:
        try:
            surviving(*args, self)
            self.ended.set_result(None)
        except BaseException as exc:  # given to the reader of the results
            self.ended.set_exception(exc)

    def stop(self) -> None:
        """No more jobs; the SDK workers of the one running are stopped (multi_processing).
        An in-process job is left on its daemon thread, as `BeamRunner.abort` leaves it."""
        self.stopped.set()
        if self.key is not None:
            beam_workers.stop(self.key)


def _quiet_stopped_workers(args: threading.ExceptHookArgs) -> None:
    """When an SDK worker process dies or is stopped, two of Beam's threads raise as their
    gRPC streams to it break, `beam_control_read` and `read_grpc_client_inputs`, and Python
    prints each as a traceback on stderr. This runner stops workers itself (after a death, on
    a cancel) and reports deaths in its own words (a retry line, a poisoned block's error),
    so those tracebacks would only be noise, even under `-q`."""
    name = args.thread.name if args.thread is not None else ""
    if name in BROKEN_STREAMS and isinstance(args.exc_value, grpc.RpcError):
        return
    _EXCEPTHOOK(args)


_EXCEPTHOOK = threading.excepthook
threading.excepthook = _quiet_stopped_workers
