"""The local runner: a pool of processes (or threads) on this machine."""

from __future__ import annotations

import multiprocessing
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
from typing import Literal

from seqline.orchestration.runners.base import Runner, run_windowed
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import StageError
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["LocalRunner"]


# Imported once by the fork server, so each worker starts with them loaded (tfx-bsl's coders
# take about 1 s and 230 MB to import) instead of importing them on its first block.
PRELOAD = ["seqline.pipeline.stage", "pyarrow", "seqline.components.tfrecords",
           "tfx_bsl.coders.example_coder"]


class LocalRunner(Runner):
    """Blocks run in a process pool by default: user functions are Python, and threads would
    serialize them on the GIL. `mode="thread"` suits I/O-bound functions and small tests.
    """

    name = "local"

    def __init__(self, workers: int = 2, window: int | None = None,
                 mode: Literal["process", "thread"] = "process") -> None:
        super().__init__(workers, window)
        self.mode = mode
        self._pool: Executor | None = None
        self._blocks: dict[Future, tuple[str, Block]] = {}

    def _executor(self) -> Executor:
        if self._pool is None:
            if self.mode == "thread":
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="seqline")
            else:
                # forkserver: workers fork from a clean server, not from a driver that may hold
                # TensorFlow, gRPC or Ray threads (forking those can deadlock).
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(PRELOAD)
                self._pool = ProcessPoolExecutor(self.workers, mp_context=context)
        return self._pool

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        return run_windowed(self, task, blocks, self, ordered=ordered)

    def submit(self, task: MapTask, block: Block) -> Future:
        future = self._executor().submit(task, block)
        self._blocks[future] = (task.stage, block)
        return future

    def wait(self, handles: list[Future]) -> list[tuple[Future, BlockResult]]:
        done, _ = wait_for_futures(handles, return_when=FIRST_COMPLETED)
        return [(future, self._result(future)) for future in done]

    def _result(self, future: Future) -> BlockResult:
        stage, block = self._blocks.pop(future)
        try:
            return future.result()
        except BrokenProcessPool as exc:
            raise StageError(
                f"stage {stage!r}: a worker process died while running block {block.index} "
                f"(first seq {block.first_seq}); the user function may have crashed the "
                "interpreter (e.g. a segfault in native code or os._exit). Run with --workers 1 "
                "to see it fail on its own.",
                stage=stage, block=block.index, seq=block.first_seq) from exc

    def cancel(self, handles: list[Future]) -> None:
        for future in handles:
            future.cancel()
            self._blocks.pop(future, None)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
