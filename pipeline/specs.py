"""Component, stage and pipeline specs: what a pipeline is, independent of any engine."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import pyarrow as pa
from pydantic import BaseModel

from seqline.pipeline.blocks import Block
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.params import did_you_mean
from seqline.pipeline.storage import Folder

__all__ = ["ComponentSpec", "DriverSpec", "Launcher", "Line", "MapSpec", "PipelineSpec", "Reads",
           "Sample", "SourceSpec", "StageContext", "StageResult", "StageSpec", "Writes",
           "did_you_mean"]

P = TypeVar("P", bound=BaseModel)

# What a component reads: files (a source), a stream of blocks (the stage before it, or an
# earlier stage's stored records re-streamed), a batching plan, or a trained model.
Reads = Literal["files", "stream", "plan", "model"]
# What it writes: blocks passed on (nothing stored but dead letters), stored TFRecords (also
# passed on), a plan, a model, an evaluation.
Writes = Literal["stream", "records", "plan", "model", "evaluation"]


@dataclass(frozen=True)
class Sample:
    """The first records a stage would read, before anything runs, and the stage that made
    them (named in messages): what a component's `preview` checks its parameters against."""

    stage: str
    records: pa.RecordBatch


@dataclass(frozen=True)
class StageSpec(Generic[P]):
    """One stage of a pipeline: a unique name, a component and its typed parameters."""

    name: str
    component: str
    params: P
    inputs: tuple[str, ...] = ()
    # 1-based line in the pipeline file, for messages only: not part of what the stage is
    line: int | None = field(default=None, compare=False)
    errors: ErrorBudget | None = None  # None: the first bad record fails the run
    cache: bool = True  # False: always recompute, even when an equal stage run is stored
    # System faults: a block whose worker died runs again on a fresh one, this many times.
    retries: int = 3
    # The user function's own exceptions: each call is tried again this many times (flaky
    # services); 0: the first exception is the block's failure.
    retry_user_errors: int = 0
    # False: no data profile (profile.json) for this stage's output records.
    profile: bool = True

    @property
    def where(self) -> str:
        # (the pipeline file's line: an error may name an input file's line beside it)
        return f"stage {self.name!r}" + (f" (line {self.line} of the pipeline file)"
                                          if self.line else "")


@dataclass(frozen=True)
class PipelineSpec:
    """A validated pipeline: its stages in order and the folder user code is imported from."""

    name: str
    stages: tuple[StageSpec[Any], ...]
    base_dir: Path
    errors: ErrorBudget | None = None  # the file's top-level budget, for to_yaml

    def stage(self, name: str) -> StageSpec[Any]:
        return next(s for s in self.stages if s.name == name)


class Line(Protocol):
    """The running stages of an assembly line, as a driver stage may consult them."""

    def feed(self, stage: str) -> ShardFeed:
        """Stage `stage`'s stored records, growing while it runs (see ShardFeed)."""

    def announced(self, stage: str) -> Any:
        """What `stage` announced before finishing (batching: its plan); waits for it.

        None if the stage finished without announcing (e.g. it was committed by an earlier
        attempt of a resumed run): read its manifest instead.
        """

    def committed(self, stage: str) -> Folder:
        """Wait until `stage` has committed; its folder. Raises if it failed."""


class Launcher(Protocol):
    """Runs one function on several training workers of an engine (Ray Train, for one).

    `work(rank, workers)` runs once per worker, in the worker's own process (perhaps on
    another node), with the environment tf.distribute's MultiWorkerMirroredStrategy reads
    (TF_CONFIG) already set; `work` must be picklable. What each call returns comes back to
    the caller in rank order, so artifacts travel back to the driver without a shared disk.
    `stage` names the stage in a failure.
    """

    def __call__(self, work: Callable[[int, int], Any], workers: int,
                 stage: str) -> list[Any]:
        """Each worker's return value, by rank."""


@dataclass(frozen=True)
class StageContext:
    """Where a driver stage (batching, train, evaluate) runs: its run, inputs and output folder.

    Driver stages run in the driver process and write into `out_dir`, renamed into place on
    commit. Alone (`line` None) they read committed artifacts of the run. In an assembly line
    they may start before their input is complete: batching consumes its input's `blocks` as
    they stream past and `announce`s its plan; train follows the plan's records as they are
    stored, through `line`.
    """

    run: Folder  # <root>/runs/<run_id>: a local folder, or a Location on an object store
    out_dir: Path
    source: str  # the stage read: `inputs:` or the stage before
    base_dir: Path  # the pipeline file's folder, where user modules are imported from
    pipeline: str
    blocks: Iterable[Block] | None = None
    announce: Callable[[Any], None] | None = None
    line: Line | None = None
    # Where a stage may run work on several workers (train `workers: N`); None: the runner has
    # no such engine, and the stage runs in the driver only.
    launcher: Launcher | None = None
    # Told the records a driver stage has consumed so far (train: examples fed, over all
    # epochs), for its live rows/s, the seconds it waited for input so far where it measures
    # them itself (train: its steps' waits, told as each epoch ends), and the records of its
    # input taken so far (train: its largest epoch; it is a stopped stage's records in).
    progress: Callable[[int, float | None, int], None] | None = None

    @property
    def root(self) -> Folder:
        return self.run.parent.parent


@dataclass(frozen=True)
class StageResult:
    """What a driver stage hands back: its manifest's own entries and its accounting."""

    manifest: dict[str, Any]
    records_in: int
    waited_input: float | None = None  # seconds it waited for input, when it measured them


@dataclass(frozen=True, kw_only=True)
class ComponentSpec(Generic[P]):
    """A component's contract, TFX-style: parameters, what it reads and writes.

    Its kind is its type: a `SourceSpec` reads files, a `MapSpec` maps blocks on the
    workers, a `DriverSpec` runs on the driver; each has a `run` of its own signature. The
    planner, the executor, `verify` and the CLI learn everything they need here, never from a
    component's name. `validate` checks the typed parameters against the world (files exist,
    user functions import) when the pipeline is built. `verify(run_dir, manifest, problems)`
    re-derives what the stage claims from the stored records (`seqline verify`). `version`
    changes when the component's output for the same input changes: it is in every cache key.
    """

    name: str
    params: type[P]
    reads: Reads
    writes: Writes
    # Heavy libraries it imports in the driver process (the CLI keeps TensorFlow's start-up
    # lines out of the run's output when a stage imports it).
    driver_imports: tuple[str, ...] = ()
    validate: Callable[[StageSpec[P], Path], None] | None = None
    verify: Callable[[Path, dict[str, Any], list[str]], None] | None = None
    # What else its output depends on, beyond its input and parameters, for its cache key:
    # depends_on(root, pipeline name, stage) (evaluate: the baseline it compares with).
    depends_on: Callable[[Path, str, StageSpec[P]], Any] | None = None
    # Its output for a sample of its input, before anything runs (as Ray Data's `schema()`
    # runs the first block): preview(stage, base_dir, sample) -> the records the stages
    # after it would read (ingest: its first block; preprocess: the function's answer), or
    # None when it cannot tell. It raises ConfigError for a mismatch it can see there
    # (batching: a feature not in the records). None here: it passes its input on as it is.
    preview: Callable[[StageSpec[P], Path, Sample | None], pa.RecordBatch | None] | None = None
    # check_runner(stage, runner name): raises ConfigError, before any stage runs, for what
    # the stage cannot do on that runner (train `workers: N` needs Ray).
    check_runner: Callable[[StageSpec[P], str], None] | None = None
    version: str = "1"
    doc: str = ""

    @property
    def stores_records(self) -> bool:
        """Its artifact holds its output records (TFRecord shards) that later stages can read."""
        return self.writes == "records"

    @property
    def takes_stream(self) -> bool:
        """It consumes blocks as the stage before it passes them on."""
        return self.reads == "stream"


@dataclass(frozen=True, kw_only=True)
class SourceSpec(ComponentSpec[P]):
    """Reads files itself, on the driver: `run(stage, base_dir, map_blocks)` yields its
    blocks, in source order, handing ranges of large files to the runner's workers through
    `map_blocks`. `files(stage, base_dir)`: the files it reads (for its cache key)."""

    run: Callable[[StageSpec[P], Path, Any], Iterator[Any]]
    files: Callable[[StageSpec[P], Path], list[str]]
    reads: Reads = "files"


@dataclass(frozen=True, kw_only=True)
class MapSpec(ComponentSpec[P]):
    """Maps blocks on the workers: `run(stage, base_dir, out_dir)` is a MapTask a runner
    ships to its workers, which write the stage's shards into out_dir."""

    run: Callable[[StageSpec[P], Path, Folder], Any]
    reads: Reads = "stream"
    # Its output is its input, record for record and block for block (tfrecord_write): where
    # stages are batch jobs (Beam), the stage after it can run in the same job (fused: map_fused).
    passes_every_record: bool = False
    # It cuts its input into blocks of its own size (tfrecord_write: one per shard), so it
    # cannot run inside the job of the stage before it.
    cuts_blocks: bool = False


@dataclass(frozen=True, kw_only=True)
class DriverSpec(ComponentSpec[P]):
    """Runs on the driver: `run(stage, StageContext) -> StageResult` (batching, train,
    evaluate); `live`: it starts alongside the stages before it (batching takes the stream as
    it passes, train follows the stored shards) instead of once they have all committed."""

    run: Callable[[StageSpec[P], StageContext], StageResult]
    live: bool = False
