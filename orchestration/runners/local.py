"""The local runner: a pool of processes (or threads) on this machine."""

from __future__ import annotations

import os
import shutil
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
)
from concurrent.futures import wait as wait_for_futures
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import connection
from typing import Literal

from seqline.orchestration.events import Subscriber
from seqline.orchestration.processes import scratch_dir
from seqline.orchestration.runners.base import Runner, poisoned, retry_after_death, run_windowed
from seqline.orchestration.runners.forked import PRELOAD, WorkerContext
from seqline.orchestration.runners.local_worker import init_worker, marker, run_marked
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import Cancelled
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["LocalRunner"]

# How often a process pool is looked at for a worker that died unnoticed (see _watch), and
# how long a dead worker may go unnoticed before the runner ends the pool's read itself: the
# pool notices one within milliseconds unless it is stuck.
WATCH_SECONDS = 0.5
UNNOTICED_SECONDS = 2.0


@dataclass(eq=False)  # a handle: hashed by identity, as the windowed loop keys by it
class _Job:
    """One block of one stage, as long as it is in flight: its current future and attempt."""

    task: MapTask
    block: Block
    future: Future
    generation: int  # of the pool the future belongs to
    attempt: int = 1


class LocalRunner(Runner):
    """Blocks run in a process pool by default: user functions are Python, and threads would
    serialize them on the GIL. `mode="thread"` suits I/O-bound functions and small tests.

    A worker that dies (SIGKILL, the OOM killer, a segfault in native code) breaks the pool:
    the pool is started again and the blocks in flight are submitted again, in order; the
    block whose worker died counts an attempt, and after the stage's `retries` more it fails
    the run,
    named. The others were only stopped and are not charged. A user function's exception is
    a result, not a death, and is not retried here.
    """

    name = "local"

    def __init__(self, workers: int = 2, window: int | None = None,
                 mode: Literal["process", "thread"] = "process",
                 publish: Subscriber | None = None) -> None:
        super().__init__(workers, window, publish)
        self.mode = mode
        self._pool: Executor | None = None
        self._generation = 0
        self._lock = threading.Lock()
        self._aborted = False
        self._markers = str(scratch_dir("workers")) if mode == "process" else ""

    def _executor(self) -> Executor:
        if self._pool is None:
            if self.mode == "thread":
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="seqline")
            else:
                # Workers fork from a clean server and never import the caller's __main__: a
                # script needs no `if __name__ == "__main__":` guard (see WorkerContext).
                pool = ProcessPoolExecutor(self.workers, mp_context=WorkerContext(PRELOAD),
                                           initializer=init_worker,
                                           initargs=(os.getpid(), self._markers,
                                                     dict(os.environ)))
                threading.Thread(target=_watch, args=(weakref.ref(pool), self._lock),
                                 daemon=True, name="seqline-pool-watch").start()
                self._pool = pool
        return self._pool

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        return run_windowed(self, task, blocks, self, ordered=ordered)

    def submit(self, task: MapTask, block: Block) -> _Job:
        with self._lock:
            return _Job(task, block, self._start(task, block, 1), self._generation)

    def _start(self, task: MapTask, block: Block, attempt: int) -> Future:
        """Submit a block (the caller holds the lock). A pool that broke since (a worker of
        another block, maybe another stage's, died) refuses it: this block did not run, so
        it goes to a fresh pool uncharged, and the blocks in flight recover as they learn."""
        if self.mode == "thread":
            return self._executor().submit(task, block)
        while True:
            try:
                return self._executor().submit(run_marked, task, block, self._markers, attempt)
            except BrokenProcessPool:
                self._renew(self._generation)

    def _renew(self, generation: int) -> None:
        """Replace the broken pool of `generation`, once: by the first to see it broken, once
        every worker has stopped, so that the markers left say which blocks killed theirs."""
        if generation == self._generation and self._pool is not None:
            _stop_workers(self._pool)
            self._pool.shutdown(wait=True)
            self._pool = None
            self._generation += 1

    def running(self, handle: _Job) -> tuple[int, str | None, float | None]:
        """In process mode the block's marker says which worker runs it (its pid) and since
        when (the marker's time); none while the block waits in the pool's queue."""
        if self.mode != "process":
            return handle.attempt, None, None
        found = marker(self._markers, handle.task.stage, handle.block.index, handle.attempt)
        try:
            pid, since = found.read_text(), found.stat().st_mtime
        except OSError:  # not started yet (or just finished)
            return handle.attempt, None, None
        return handle.attempt, f"pid {pid}" if pid else None, since

    def wait(self, handles: list[_Job]) -> list[tuple[_Job, BlockResult]]:
        while True:
            wait_for_futures([j.future for j in handles], return_when=FIRST_COMPLETED)
            finished, broken = [], []
            for job in handles:
                if not job.future.done():
                    continue
                try:
                    finished.append((job, job.future.result()))
                except BrokenProcessPool:
                    broken.append(job)
            for job in broken:
                finished.extend(self._recover(job))
            if finished:
                return finished

    def _recover(self, job: _Job) -> list[tuple[_Job, BlockResult]]:
        """A job whose pool broke: run it again on a fresh pool, or fail it if it is the one
        that keeps killing its worker."""
        with self._lock:
            if self._aborted:
                raise Cancelled("the run was cancelled")
            self._renew(job.generation)
            killed = marker(self._markers, job.task.stage, job.block.index, job.attempt)
            died = killed.exists()
            killed.unlink(missing_ok=True)
            if died and job.attempt > job.task.retries:
                return [(job, poisoned(job.task.stage, job.block, job.attempt))]
            if died:
                retry_after_death(self, job.task, job.block, job.attempt)
                job.attempt += 1
            job.future = self._start(job.task, job.block, job.attempt)
            job.generation = self._generation
        return []

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            if self._pool is not None:
                _stop_workers(self._pool)  # the pool breaks, and every wait on it returns

    def cancel(self, handles: list[_Job]) -> None:
        if self._aborted:
            # The pool is breaking and fails every future it holds: CPython 3.11's fails one
            # cancelled meanwhile too, which raises InvalidStateError in its manager thread
            # (a traceback on a stopped run's stderr) and ends that thread before it stops
            # the workers.
            return
        for job in handles:
            job.future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            if getattr(self._pool, "_broken", False):  # waited for below: see _stop_workers
                _stop_workers(self._pool)
            self._pool.shutdown(wait=True, cancel_futures=not self._aborted)  # (see cancel)
            self._pool = None
        if self._markers:
            shutil.rmtree(self._markers, ignore_errors=True)


def _watch(pool_ref: weakref.ref[ProcessPoolExecutor], lock: threading.Lock) -> None:
    """Until the pool breaks or shuts down: a worker dead for UNNOTICED_SECONDS that the pool
    has not noticed means the pool is stuck reading that worker's last result; end the read.

    CPython's pool (3.11 here; 3.12 and 3.13 alike) reads a result to its end before it looks
    at its workers again. A worker killed halfway through sending one (the OOM killer as a
    large block is in the pipe) leaves it reading for ever: every other worker holds the
    pipe's write end, and so does this process. The run hung (a fault test's, once in some
    hundred). Stopping the workers and closing this process's end ends the read with an
    EOFError, and the pool breaks as it would have: its blocks run again on a fresh one.
    """
    dead_since: float | None = None
    while True:
        time.sleep(WATCH_SECONDS)
        pool = pool_ref()
        processes = None if pool is None else pool._processes  # type: ignore[attr-defined]
        if pool is None or pool._broken or processes is None:  # type: ignore[attr-defined]
            return  # (gone, broken as it should be, or shut down)
        try:  # a sentinel is ready once its worker has exited
            exited = connection.wait([p.sentinel for p in list(processes.values())], timeout=0)
        except (OSError, ValueError):  # closed meanwhile: the pool is shutting down
            return
        if not exited:
            dead_since = None
        elif dead_since is None:
            dead_since = time.monotonic()
        elif time.monotonic() - dead_since >= UNNOTICED_SECONDS:
            with lock:  # no submit is starting a worker meanwhile (see _stop_workers)
                _stop_workers(pool)
                results = pool._result_queue  # type: ignore[attr-defined]
                if results is not None:
                    results._writer.close()  # type: ignore[attr-defined]
        del pool  # (held only while looked at: a pool nobody closes is still collected)


def _stop_workers(pool: Executor) -> None:
    """SIGTERM every worker of a process pool: each removes its marker and exits.

    The pool has no public way to stop running work. And a broken pool is waited for only once
    all its workers have exited: CPython's pool (3.11 here) stops those it knows of as it
    breaks, but a worker that a submit was starting at that moment (submit starts workers
    under a lock the pool's manager does not take to stop them) is never stopped, and the wait
    never ends. Our submits and this run under the runner's lock, so none is under way here.
    """
    if isinstance(pool, ProcessPoolExecutor):
        for process in list(pool._processes.values()):  # type: ignore[attr-defined]
            process.terminate()
