"""How the stages of a run are connected: a pure function from the pipeline to one record each."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from seqline.pipeline.specs import ComponentSpec, PipelineSpec, StageSpec

__all__ = ["Takes", "Wiring", "wire"]

# Where a stage's input comes from:
#   files:     it reads files itself (ingest);
#   belt:      blocks handed over by the stage before it, as they are made;
#   feed:      an earlier stage's stored shards, read as they are written;
#   artifacts: what earlier stages stored or announced (a plan, a model), read by the stage.
Takes = Literal["files", "belt", "feed", "artifacts"]


@dataclass(frozen=True)
class Wiring:
    """One stage's place in the line: what it reads, from where, and what it hands on.

    `after`: the stage starts once that one has committed (one-by-one runs). `waits_for_all`:
    it starts once every stage before it has committed (a driver stage that is not live).
    `reused`: a resumed run committed it already; it only reports.
    """

    stage: str
    source: str | None
    takes: Takes
    gives_belt: bool = False
    after: str | None = None
    waits_for_all: bool = False
    follows_line: bool = False  # gets the line: follows feeds and announced plans while they grow
    reused: bool = False


def wire(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]], *,
         overlap: bool = True, committed: Collection[str] = ()) -> list[Wiring]:
    """The wiring of every stage of `spec`, in order.

    Args:
        spec: the pipeline.
        components: the component of each stage, by name.
        overlap: run as an assembly line (True) or each stage after the one before has
            committed (False; ingest still streams into the stage after it, storing nothing).
        committed: stages a resumed run has committed; they are not run again.

    Example: ingest -> tfrecord_write -> batching -> train gives ingest a belt to
    tfrecord_write, tfrecord_write a belt to batching, and train `artifacts` following the line.
    """
    wirings: list[Wiring] = []
    for i, stage in enumerate(spec.stages):
        component = components[stage.component]
        previous = spec.stages[i - 1].name if i else None
        source = stage.inputs[0] if stage.inputs else previous
        if stage.name in committed:
            wirings.append(Wiring(stage.name, source, "artifacts", reused=True))
            continue
        gives = _gives_belt(spec, components, i, committed) and (
            overlap or component.reads == "files")
        takes = _takes(component, source, wirings)
        after = None if overlap or takes == "belt" or previous is None else previous
        wirings.append(Wiring(
            stage.name, source, takes, gives_belt=gives, after=after,
            waits_for_all=component.runs_on == "driver" and takes == "artifacts"
            and not component.live,
            follows_line=component.live and takes == "artifacts"))
    return wirings


def _takes(component: ComponentSpec[Any], source: str | None, before: list[Wiring]) -> Takes:
    if component.reads == "files" or source is None:
        return "files"
    if not component.takes_stream:
        return "artifacts"
    # A belt goes only to the stage right after the one that fills it.
    handed = bool(before) and before[-1].stage == source and before[-1].gives_belt
    return "belt" if handed else "feed"


def _gives_belt(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]], i: int,
                committed: Collection[str]) -> bool:
    """Whether stage i's blocks go straight to the next stage (it reads them, as they come)."""
    stage: StageSpec[Any] = spec.stages[i]
    if i + 1 >= len(spec.stages) or components[stage.component].writes not in ("stream",
                                                                               "records"):
        return False
    after = spec.stages[i + 1]
    reads = after.inputs[0] if after.inputs else stage.name
    return (reads == stage.name and after.name not in committed
            and components[after.component].takes_stream)


def runnable_committed(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]],
                       committed: Collection[str]) -> set[str]:
    """Of the stages committed earlier (resumed or cached), those that need not run again.

    A stage that stores nothing but passes its blocks on (ingest) must run again when a
    stage reading it runs: its blocks exist only while it runs.

    Example: ingest committed, tfrecord_write not: both run.
    """
    keep = set(committed)
    for i, stage in enumerate(spec.stages):
        source = stage.inputs[0] if stage.inputs else spec.stages[i - 1].name if i else None
        if stage.name not in keep and source in keep \
                and components[spec.stage(source).component].writes == "stream":
            keep.discard(source)
    return keep
