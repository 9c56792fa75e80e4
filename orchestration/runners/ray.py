"""The Ray runner: one Ray task per block, on a local Ray or a cluster (`address`)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqline.orchestration.environment import worker_environment
from seqline.orchestration.events import Subscriber
from seqline.orchestration.processes import remove_scratch, scratch_dir
from seqline.orchestration.runners.base import Runner, poisoned, retry_after_death, run_windowed
from seqline.orchestration.runners.forked import PRELOAD
from seqline.orchestration.runners.ray_train import RayTrainLauncher
from seqline.pipeline.blocks import Block
from seqline.pipeline.errors import (
    RESUME,
    Cancelled,
    SeqlineError,
    disk_full,
    disk_full_message,
)
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["RayNotStarted", "RayRunner"]

# How far past its temp folder a local Ray puts its sockets:
# /session_2026-11-24_22-54-21_553245_12345/sockets/plasma_store, with room to spare.
RAY_SOCKET_DEPTH = 72
# Below this free space, a local Ray that did not start is blamed on its temp folder's disk
# (its GCS and raylet write their logs and port files there; making the folder itself takes
# no space), above it on load. A margin, not a measure.
RAY_MIN_FREE_MIB = 64
# Tasks kept in the object store at once: more than the stages of a run that map blocks.
KEPT_TASKS = 16
ABORT_POLL_SECONDS = 0.25  # how often a wait for blocks checks whether the run was cancelled
# How long a cluster's address may take to accept a connection before it is said unreachable.
PROBE_SECONDS = 10.0
PRELOAD_SECONDS = 10.0  # the longest a run waits for its workers' imports before its stages
# How every "Ray did not start" line ends.
FINISH = f"then finish the run with {RESUME}."


class RayNotStarted(SeqlineError):
    """`ray.init` failed: a local Ray's GCS did not come up (a full disk under its temp
    folder, a machine too loaded), or the cluster at `address` did not answer. Its error is
    chained; the message says where Ray was and how to finish the run.

    Example: "Ray did not start: RuntimeError: Timed out waiting for file /tmp/seqline-ray-7-
    ab/session_…/gcs_server_port_…; its temp folder /tmp/seqline-ray-7-ab has 0 MiB free:
    free space there or set TMPDIR to a folder with room, then finish the run with `seqline
    run … --resume --run-id ID`."
    """

    @classmethod
    def of(cls, error: BaseException, address: str | None,
           session: Path | None) -> RayNotStarted | None:
        """The one-line error for what ray.init raised; None for an interrupt or an exit
        (Ctrl-C, SIGTERM), which go on as they are."""
        if not isinstance(error, Exception):
            return None
        full = disk_full(error)
        if full is not None:  # (its message says how to finish the run)
            return cls(f"Ray did not start: {disk_full_message(full, session or '.')}")
        lines = str(error).strip().splitlines()
        what = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
        if session is None:  # a cluster's: --ray-address or $RAY_ADDRESS (it answered)
            token = "" if os.environ.get("RAY_AUTH_MODE") else (
                "; a cluster started with token authentication needs RAY_AUTH_MODE=token "
                "(and its token) here too")
            return cls(f"Ray did not start: {what} (the cluster at "
                       f"{address or os.environ.get('RAY_ADDRESS')}, whose port answers, did "
                       f"not let this driver join{token}). Check how it was started, {FINISH}")
        try:
            free = shutil.disk_usage(session).free / 2**20
        except OSError:
            free = 0.0
        why = (f"its temp folder {session} has {free:,.0f} MiB free: free space there or set "
               "TMPDIR to a folder with room" if free < RAY_MIN_FREE_MIB else
               "the machine may have been too loaded for Ray to start in time (set "
               "RAY_gcs_server_port_wait_time_s to wait longer)")
        return cls(f"Ray did not start: {what}; {why}, {FINISH}")


def _unreachable(address: str) -> str | None:
    """Why nothing answers at a cluster's `host:port` (or `ray://host:port`), or None if
    something does (or the address is not of that form: `auto`). Ray itself tries a wrong
    address for as long as it is left to (minutes, its C++ client logging every 30 s)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or "/" in host:
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), PROBE_SECONDS).close()
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    return None


def _run(task: MapTask, block: Block) -> BlockResult:
    return task(block)


def _preload(modules: list[str]) -> None:
    for name in modules:
        # only sooner: a module a block needs and cannot import fails that block, named
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


@dataclass(eq=False)  # a handle: hashed by identity, as the windowed loop keys by it
class _Attempt:
    """One block of one stage, as long as it is in flight: its current task and attempt."""

    task: MapTask
    block: Block
    ref: Any  # the Ray ObjectRef of the attempt running now
    attempt: int = 1


class RayRunner(Runner):
    """Each block is a Ray task (1 CPU); Ray's object store carries the Arrow buffers.

    Locally, Ray starts with `workers` CPUs. With `address` (e.g. "ray://head:10001" or "auto")
    it joins a cluster; the pipeline's folder is shipped as the job's working_dir so that user
    modules import on every node. `launcher` runs train `workers: N` on the same Ray through
    Ray Train (see ray_train.py).
    """

    name = "ray"

    def __init__(self, workers: int = 2, window: int | None = None,
                 address: str | None = None, working_dir: str | None = None,
                 verbose: bool = False, publish: Subscriber | None = None) -> None:
        super().__init__(workers, window, publish)
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
                self._session = scratch_dir("ray", socket_depth=RAY_SOCKET_DEPTH)
            cluster = address or os.environ.get("RAY_ADDRESS")
            if cluster and (unreachable := _unreachable(cluster)) is not None:
                raise RayNotStarted(f"Ray did not start: the cluster at {cluster} cannot be "
                                    f"reached ({unreachable}). Check that it is up and that "
                                    "its address and port are right (`ray status` on its "
                                    f"head), {FINISH}")
            try:
                ray.init(address=address, num_cpus=None if address else workers,
                         include_dashboard=False,
                         # Ray's own warnings (token authentication, …) only with -v
                         logging_level=logging.WARNING if verbose else logging.ERROR,
                         # the workers' output (Ray Train's and TensorFlow's lines, a user's
                         # prints) relayed with Ray's own prefixes: only with -v
                         log_to_driver=verbose,
                         runtime_env=runtime_env,
                         _temp_dir=str(self._session) if self._session else None)
            except BaseException as exc:
                # Ray did not start (its GCS timed out under load or on a full disk), or a
                # SIGTERM came while it started (ray.init makes SIGTERM an exit): no one
                # would close() this runner, and its folder would outlive the driver (soak
                # finding 7). A failure is said in one line (soak finding 8), not a traceback.
                failed = RayNotStarted.of(exc, address, self._session)  # before close()
                self.close()
                if failed is None:
                    raise
                raise failed from exc
        self._aborted = False
        # train `workers: N` runs on this Ray through Ray Train (the executor hands it to
        # driver stages in their StageContext)
        self.launcher = RayTrainLauncher()
        # A task runs once in Ray (max_retries=0): when its worker dies or its node is lost,
        # the runner runs the block again itself, as the local runner does, so that each
        # retry is counted and said. A user function that raises is a result (StageFailure),
        # never an exception, so it is not retried. A block is released in its place as ever.
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run)
        # Each worker imports what a block needs (tfx-bsl's coders, seqline's components:
        # ~0.7 s of CPU) before the first stage starts, not in its first block: as the local
        # and Beam runners' workers fork from a server that imported them (runners/forked.py).
        # A stage's seconds are then its work on every runner, not Ray's start-up (row 6 of
        # benchmarks/RESULTS.md: the second worker's imports were a quarter of its stage).
        # Bounded: on a busy cluster the tasks may queue, and blocks can wait for workers.
        preload = ray.remote(num_cpus=1)(_preload)
        ray.wait([preload.remote(PRELOAD) for _ in range(workers)], num_returns=workers,
                 timeout=PRELOAD_SECONDS)
        # Each task put in the object store once, not once per block; the task is kept with
        # its ref, so that its id is not reused by another task while the entry stands.
        self._task_refs: dict[int, tuple[MapTask, Any]] = {}
        self._lost = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                      ray.exceptions.ObjectLostError)

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        return run_windowed(self, task, blocks, self, ordered=ordered)

    def submit(self, task: MapTask, block: Block) -> _Attempt:
        return _Attempt(task, block, self._start(task, block))

    def _start(self, task: MapTask, block: Block) -> Any:
        kept = self._task_refs.get(id(task))
        if kept is None or kept[0] is not task:
            if len(self._task_refs) >= KEPT_TASKS:  # the oldest goes: its stage has ended
                del self._task_refs[next(iter(self._task_refs))]
            kept = self._task_refs[id(task)] = (task, self._ray.put(task))
        # Named for its stage and block: Ray titles the worker's process with it while it
        # runs ("ray::features:block-12" in `ps`) and lists the task under it in its own tools.
        named = self._remote.options(name=f"{task.stage}:block-{block.index}")
        return named.remote(kept[1], block)

    def wait(self, handles: list[_Attempt]) -> list[tuple[_Attempt, BlockResult]]:
        by_ref = {handle.ref: handle for handle in handles}
        while True:  # in short waits, so that a cancelled run stops at once
            if self._aborted:
                raise Cancelled("the run was cancelled")
            ready, rest = self._ray.wait(list(by_ref), num_returns=1,
                                         timeout=ABORT_POLL_SECONDS)
            if rest and ready:  # collect everything else already finished, without waiting
                ready += self._ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            finished = [(by_ref[ref], self._result(by_ref.pop(ref))) for ref in ready]
            for handle, result in finished:
                if result is None:  # run again: wait for its new task too
                    by_ref[handle.ref] = handle
            if done := [(h, r) for h, r in finished if r is not None]:
                return done

    def _result(self, handle: _Attempt) -> BlockResult | None:
        """The block's result; None when its worker died and it was started again."""
        try:
            result: BlockResult = self._ray.get(handle.ref)
        except self._lost:
            if handle.attempt > handle.task.retries:
                return poisoned(handle.task.stage, handle.block, handle.attempt)
            retry_after_death(self, handle.task, handle.block, handle.attempt)
            handle.attempt += 1
            handle.ref = self._start(handle.task, handle.block)
            return None
        return result

    def cancel(self, handles: list[Any]) -> None:
        """Nothing: the blocks in flight (at most the window) finish and are dropped.

        `ray.cancel` races with a task's completion inside Ray's core worker and can abort
        the driver ("Check failed: it != submissible_tasks_.end() Tried to complete task
        that was not pending"; ray-project/ray#54846, still in Ray 2.60). It did so here in
        CI, after a failing block. Letting a few blocks finish is the safe trade.
        """

    def abort(self) -> None:
        self._aborted = True  # the waits end; close() then stops Ray and its workers

    def close(self) -> None:
        """Stop the Ray this runner started (and remove its folder); leave a cluster be."""
        if self._session is not None:
            _stop_autoscaler(self._ray)
            self._ray.shutdown()
            remove_scratch(self._session)
            self._session = None


def _stop_autoscaler(ray: Any) -> None:
    """Kill the autoscaler monitor of a Ray we started, at once.

    `ray.shutdown` asks each of its processes to exit and gives each a second; the monitor
    (there is nothing to autoscale on one machine) never exits in that second (Ray 2.60), so
    every local run waited a second more to end. Killed first, it is found gone. Ray's own
    node handle is private: where it is not as here, shutdown simply takes that second."""
    with contextlib.suppress(Exception):
        ray._private.worker._global_node.kill_monitor(check_alive=False)
