"""The Ray runner: one Ray task per block, on a local Ray or a cluster (`address`)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from seqline.orchestration.environment import worker_environment
from seqline.orchestration.options import output
from seqline.orchestration.processes import scratch_dir
from seqline.orchestration.runners.base import Runner, poisoned, run_windowed
from seqline.orchestration.runners.ray_train import RayTrainLauncher
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import Cancelled
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["RayRunner"]

ABORT_POLL_SECONDS = 0.25  # how often a wait for blocks checks whether the run was cancelled


def _run(task: MapTask, block: Block) -> BlockResult:
    return task(block)


class RayRunner(Runner):
    """Each block is a Ray task (1 CPU); Ray's object store carries the Arrow buffers.

    Locally, Ray starts with `workers` CPUs. With `address` (e.g. "ray://head:10001" or "auto")
    it joins a cluster; the pipeline's folder is shipped as the job's working_dir so that user
    modules import on every node. `launcher` runs train `workers: N` on the same Ray through
    Ray Train (see ray_train.py).
    """

    name = "ray"

    def __init__(self, workers: int = 2, window: int | None = None,
                 address: str | None = None, working_dir: str | None = None) -> None:
        super().__init__(workers, window)
        import ray  # imported here: the engine is an adapter, loaded only when chosen

        self._ray = ray
        self._session: Path | None = None  # the local Ray's temp folder, if we start it
        if not ray.is_initialized():
            runtime_env: dict[str, Any] | None = None
            if address:  # a cluster's workers do not inherit this process's environment
                runtime_env = {"env_vars": worker_environment(),
                               **({"working_dir": working_dir} if working_dir else {})}
            if address is None and not os.environ.get("RAY_ADDRESS"):  # a Ray of our own:
                # its sockets and logs go where we can remove them
                self._session = scratch_dir("ray")
            ray.init(address=address, num_cpus=None if address else workers,
                     include_dashboard=False,
                     # Ray's own warnings (token authentication, …) only with -v
                     logging_level=logging.WARNING if output.verbose else logging.ERROR,
                     # the workers' output (Ray Train's and TensorFlow's lines, a user's
                     # prints) relayed with Ray's own prefixes: only with -v
                     log_to_driver=output.verbose,
                     runtime_env=runtime_env,
                     _temp_dir=str(self._session) if self._session else None)
        self._aborted = False
        # train `workers: N` runs on this Ray through Ray Train (the executor hands it to
        # driver stages in their StageContext)
        self.launcher = RayTrainLauncher()
        # Ray runs a task again when its worker dies or its node is lost (max_retries counts
        # only such system failures); a user function that raises is a result (StageFailure),
        # never an exception, so it is not retried. A block is released in its place as ever.
        self._remote = ray.remote(num_cpus=1)(_run)
        self._task_refs: dict[int, Any] = {}
        self._blocks: dict[Any, tuple[MapTask, Block]] = {}  # by task ref: what it runs

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        return run_windowed(self, task, blocks, self, ordered=ordered)

    def submit(self, task: MapTask, block: Block) -> Any:
        key = id(task)  # put the task in the object store once, not once per block
        if key not in self._task_refs:
            self._task_refs = {key: self._ray.put(task)}
        ref = self._remote.options(max_retries=task.retries).remote(self._task_refs[key], block)
        self._blocks[ref] = (task, block)
        return ref

    def wait(self, handles: list[Any]) -> list[tuple[Any, BlockResult]]:
        ready: list[Any] = []
        while not ready:  # in short waits, so that a cancelled run stops at once
            if self._aborted:
                raise Cancelled("the run was cancelled")
            ready, rest = self._ray.wait(handles, num_returns=1, timeout=ABORT_POLL_SECONDS)
        if rest:  # collect everything else already finished, without waiting
            more, _ = self._ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return [(ref, self._result(ref)) for ref in ready]

    def _result(self, ref: Any) -> BlockResult:
        task, block = self._blocks.pop(ref)
        try:
            result: BlockResult = self._ray.get(ref)
        except (self._ray.exceptions.WorkerCrashedError, self._ray.exceptions.NodeDiedError):
            return poisoned(task.stage, block, task.retries + 1)  # Ray's retries are spent
        return result

    def cancel(self, handles: list[Any]) -> None:
        """Nothing: the blocks in flight (at most the window) finish and are dropped.

        `ray.cancel` races with a task's completion inside Ray's core worker and can abort
        the driver ("Check failed: it != submissible_tasks_.end() Tried to complete task
        that was not pending"; ray-project/ray#54846, still in Ray 2.60). It did so here in
        CI, after a failing block. Letting a few blocks finish is the safe trade.
        """
        for ref in handles:
            self._blocks.pop(ref, None)

    def abort(self) -> None:
        self._aborted = True  # the waits end; close() then stops Ray and its workers

    def close(self) -> None:
        """Stop the Ray this runner started (and remove its folder); leave a cluster be."""
        if self._session is not None:
            self._ray.shutdown()
            shutil.rmtree(self._session, ignore_errors=True)
            self._session = None
