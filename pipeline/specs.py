"""Component, stage and pipeline specs: what a pipeline is, independent of any engine."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from seqline.pipeline.blocks import Block
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.feed import ShardFeed

__all__ = ["REQUIRED", "ComponentSpec", "Line", "PipelineSpec", "StageContext", "StageSpec",
           "did_you_mean"]

REQUIRED = object()
"""Marks a parameter without a default in `ComponentSpec.parameters`."""


@dataclass(frozen=True)
class StageSpec:
    """One stage of a pipeline file: a unique name, a component and its parameters."""

    name: str
    component: str
    params: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    line: int | None = None  # 1-based line in the pipeline file, for messages
    errors: ErrorBudget | None = None  # None: the first bad record fails the run

    @property
    def where(self) -> str:
        return f"stage {self.name!r}" + (f" (line {self.line})" if self.line else "")


@dataclass(frozen=True)
class PipelineSpec:
    """A validated pipeline: its stages in order and the folder user code is imported from."""

    name: str
    stages: tuple[StageSpec, ...]
    base_dir: Path

    def stage(self, name: str) -> StageSpec:
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

    def committed(self, stage: str) -> Path:
        """Wait until `stage` has committed; its folder. Raises if it failed."""


@dataclass(frozen=True)
class StageContext:
    """Where a driver stage (batching, train, evaluate) runs: its run, inputs and output folder.

    Driver stages run in the driver process and write into `out_dir`, renamed into place on
    commit. Alone (`line` None) they read committed artifacts of the run. In an assembly line
    they may start before their input is complete: batching consumes its input's `blocks` as
    they stream past and `announce`s its plan; train follows the plan's records as they are
    stored, through `line`.
    """

    run: Path  # <root>/runs/<run_id>
    out_dir: Path
    source: str  # the stage read: `inputs:` or the stage before
    base_dir: Path  # the pipeline file's folder, where user modules are imported from
    pipeline: str
    blocks: Iterator[Block] | None = None
    announce: Callable[[Any], None] | None = None
    line: Line | None = None

    @property
    def root(self) -> Path:
        return self.run.parent.parent


@dataclass(frozen=True)
class ComponentSpec:
    """A component's contract, TFX-style: its parameters and kind, apart from its executor.

    `kind` says how a runner drives it: a `source` makes blocks, a `map` turns blocks into
    blocks in parallel, a `driver` runs in the driver on committed artifacts. `validate`
    checks parameters against the world (files exist, user functions import) when the
    pipeline is built, before anything runs.
    """

    name: str
    kind: Literal["source", "map", "driver"]
    parameters: Mapping[str, Any]
    validate: Callable[[StageSpec, Path], None] | None = None
    # The engine-agnostic work: a source's read_blocks(stage, base_dir) -> Iterator[BlockResult],
    # a map's make_task(stage, base_dir, out_dir) -> MapTask that a runner ships to its
    # workers, which write the stage's files into out_dir; a driver's
    # run_stage(stage, StageContext) -> dict of results for its manifest.
    executor: Callable[..., Any] | None = None
    doc: str = ""
    writes_records: bool = False  # its artifact holds its output records (TFRecord shards)
    # A driver that runs alongside the stages before it (batching, train) rather than after
    # they have all committed; it gets `StageContext.blocks` / `.line` to do so.
    live: bool = False

    def params_with_defaults(self, stage: StageSpec) -> dict[str, Any]:
        """The stage's parameters, checked for unknown or missing names, with defaults filled."""
        for key in stage.params:
            if key not in self.parameters:
                raise ConfigError(
                    f"{stage.where}: component {self.name!r} has no parameter {key!r}."
                    f"{did_you_mean(key, self.parameters)} Its parameters: "
                    f"{', '.join(sorted(self.parameters))}.")
        missing = [k for k, v in self.parameters.items() if v is REQUIRED and k not in stage.params]
        if missing:
            raise ConfigError(
                f"{stage.where}: component {self.name!r} needs parameter(s) "
                f"{', '.join(missing)}; add them under `params:`.")
        return {k: stage.params.get(k, v) for k, v in self.parameters.items()}


def did_you_mean(word: str, choices: Mapping[str, Any] | list[str]) -> str:
    hint = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {hint[0]!r}?" if hint else ""
