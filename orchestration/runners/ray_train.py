"""Training on several workers through Ray Train: the `Launcher` the Ray runner hands to train."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from seqline.orchestration.processes import scratch_dir
from seqline.pipeline.errors import SeqlineError, StageError

__all__ = ["RayTrainLauncher"]


class RayTrainLauncher:
    """Runs `work(rank, workers)` on N Ray Train workers with TensorflowTrainer.

    Ray Train starts one worker actor per slot (1 CPU each, so on a cluster of 1-CPU nodes one
    per node), sets TF_CONFIG in each for MultiWorkerMirroredStrategy, and runs the loop.
    Whatever each worker's `work` returns is handed to a small results actor that the driver
    owns, and comes back through Ray's object store: no disk is shared with the driver, and
    the chief's artifacts (model, checkpoints, logs) travel as bytes. Ray Train's own
    `storage_path` is a scratch folder here: nothing is reported to it (no Ray checkpoints;
    the stage keeps its own), so it only holds Ray Train's run state.

    Example: `RayTrainLauncher()(work, 2)` on a two-node cluster -> [work(0, 2), work(1, 2)],
    one computed on each node.
    """

    def __call__(self, work: Callable[[int, int], Any], workers: int,
                 stage: str) -> list[Any]:
        import ray
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.tensorflow import TensorflowTrainer

        results: Any = ray.remote(num_cpus=0)(_Results).remote()  # Ray's handle types are loose
        storage = scratch_dir("ray-train")
        trainer = TensorflowTrainer(
            _loop, train_loop_config={"work": work, "results": results},
            scaling_config=ScalingConfig(num_workers=workers, use_gpu=False),
            # A worker's failure is the stage's failure: the executor retries stages, and a
            # user's error (a bad label) would only fail again.
            run_config=RunConfig(storage_path=str(storage),
                                 failure_config=FailureConfig(max_failures=0)))
        try:
            try:
                trainer.fit()
            except Exception as exc:
                # a worker's own error (with stage and seq) says more than Ray Train's wrapper
                failure = ray.get(results.failure.remote())
                if failure is not None:
                    raise failure from None
                first = next((line for line in str(exc).splitlines() if line.strip()), "")
                raise StageError(f"stage {stage!r}: training on {workers} Ray Train workers "
                                 f"failed: {type(exc).__name__}: {first.strip()} (run with -v "
                                 "for Ray's own lines)", stage=stage) from exc
            returned: list[Any] = ray.get(results.returned.remote(workers, stage))
            return returned
        finally:
            ray.kill(results)
            shutil.rmtree(storage, ignore_errors=True)


def _loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: run the work, hand its return value (or error) to the driver."""
    import ray
    import ray.train

    context = ray.train.get_context()
    rank, workers = context.get_world_rank(), context.get_world_size()
    results = config["results"]
    try:
        value = config["work"](rank, workers)
    except SeqlineError as exc:
        ray.get(results.fail.remote(exc))
        raise
    ray.get(results.put.remote(rank, value))


class _Results:
    """The workers' return values by rank, and the first seqline error one of them raised."""

    def __init__(self) -> None:
        self._values: dict[int, Any] = {}
        self._failure: SeqlineError | None = None

    def put(self, rank: int, value: Any) -> None:
        self._values[rank] = value

    def fail(self, exc: SeqlineError) -> None:
        self._failure = self._failure or exc

    def failure(self) -> SeqlineError | None:
        return self._failure

    def returned(self, workers: int, stage: str) -> list[Any]:
        missing = [r for r in range(workers) if r not in self._values]
        if missing:
            raise StageError(f"stage {stage!r}: Ray Train workers {missing} finished without "
                             "a result.", stage=stage)
        return [self._values[r] for r in range(workers)]
