"""The run plan: before anything runs, which stages run, which are reused or kept, which fuse
into one engine job and how each is fed, with the reason for each, as one immutable value."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import seqline
from seqline.orchestration.cache import (
    cache_hits,
    cache_parts,
    intact_committed,
    key_of,
    output_elsewhere,
)
from seqline.orchestration.key_changes import changes
from seqline.orchestration.preflight import check_before_work
from seqline.orchestration.run_options import RunOptions
from seqline.pipeline.artifacts import read_run_record, run_dir
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import (
    ComponentSpec,
    DriverSpec,
    MapSpec,
    PipelineSpec,
    SourceSpec,
    StageSpec,
)
from seqline.pipeline.storage import Folder, shown

__all__ = ["DAMAGED", "KEPT", "Action", "Kind", "RunPlan", "Step", "Takes", "plan_run"]

# Why a resumed run keeps a stage: also how the run store tells a kept stage, whose row is
# the earlier attempt's (succeeded), from one this attempt ran.
KEPT = "kept: the earlier attempt committed it"

# What a step does now: run the stage; reuse the output of an earlier run with the same cache
# key; keep what this run's earlier attempt committed (--resume).
Action = Literal["run", "reuse", "keep"]
# What kind of stage it is: reads files itself; maps blocks on the workers; runs on the driver.
Kind = Literal["source", "map", "driver"]
# Where a stage's input comes from:
#   files:     it reads files itself (ingest);
#   belt:      blocks handed over by the stage before it, as they are made;
#   feed:      an earlier stage's stored shards, read as they are written;
#   artifacts: what earlier stages stored or announced (a plan, a model), read by the stage.
Takes = Literal["files", "belt", "feed", "artifacts"]
# Engines whose map stages are batch jobs: a map stage after one that passes every record on
# runs inside that stage's job (decisions/0040). Elsewhere stages stream into each other.
FUSING_RUNNERS = ("beam",)
# The reason of a kept stage whose files no longer match their commit's checksums.
DAMAGED = "its committed output changed"


@dataclass(frozen=True)
class Step:
    """One stage's place in the run: what it does now and why, what it reads, what it hands on.

    `after`: it starts once that stage has committed (one-by-one runs). `waits_for_all`: once
    every stage before it has committed (a driver stage that does not follow the line).
    `follows_line`: it follows feeds and announced plans while they grow. `fused_after`: a map
    stage run inside the engine job of that earlier stage. `reused_from` / `folder`: the run
    and committed folder of a reused or kept stage; `stale`: a committed folder to remove
    before the stage runs again (damaged, or a stage that stores nothing but must feed one).
    """

    stage: str
    component: str
    kind: Kind
    action: Action
    reason: str
    source: str | None
    takes: Takes
    gives_belt: bool = False
    after: str | None = None
    waits_for_all: bool = False
    follows_line: bool = False
    fused_after: str | None = None
    reused_from: str | None = None
    took: float | None = None
    folder: Folder | None = field(default=None, compare=False)
    stale: bool = False
    cache_key: str | None = field(default=None, compare=False)
    key_parts: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def runs(self) -> bool:
        return self.action == "run"


@dataclass(frozen=True)
class RunPlan:
    """Every step of a run, in pipeline order, decided before it starts."""

    run_id: str
    pipeline: str
    options: RunOptions
    steps: tuple[Step, ...]

    def step(self, stage: str) -> Step:
        return next(s for s in self.steps if s.stage == stage)

    @property
    def running(self) -> list[Step]:
        return [s for s in self.steps if s.runs]

    def summary(self) -> str:
        """One line: "2 of 6 stages on ray; 4 reused from run first" (or "kept" from the
        earlier attempt, with --resume)."""
        line = f"{len(self.running)} of {len(self.steps)} stages on {self.options.runner}"
        reused = [s for s in self.steps if s.action == "reuse"]
        if reused:
            sources = sorted({s.reused_from or "" for s in reused})
            line += f"; {len(reused)} reused from run {', '.join(sources)}"
        kept = sum(s.action == "keep" for s in self.steps)
        if kept:
            line += f"; {kept} kept from the earlier attempt"
        return line

    def as_json(self) -> dict[str, Any]:
        """What `seqline run --dry-run --json` prints."""
        return {"run_id": self.run_id, "pipeline": self.pipeline,
                "runner": self.options.runner, "steps": [{
                    "stage": s.stage, "component": s.component, "kind": s.kind,
                    "action": s.action, "reason": s.reason, "reused_from": s.reused_from,
                    "fused_after": s.fused_after, "source": s.source, "takes": s.takes,
                } for s in self.steps]}


def plan_run(spec: PipelineSpec, options: RunOptions, components: Mapping[str, ComponentSpec[Any]],
             *, run_id: str, root: Folder, store: Any | None) -> RunPlan:
    """Decide every step of a run. Reads the root and the run store; writes nothing.

    Args:
        spec: the validated pipeline.
        options: how the run goes (runner, overlap, cache, resume).
        components: the component of each stage, by name.
        run_id: the run's id (with --resume, the run to finish).
        root: the artifact root.
        store: the run store, or None when there is none yet (nothing is then cached).

    Raises:
        ConfigError: resuming a run that is not there, or reusing a run id that is; a stage
            that cannot run on the runner (its component's check_runner); a stage whose
            parameters name what a sample of its records does not have (preflight.py).

    Example: the demo run again with batching's window length 14 -> 21 reuses ingest,
    tfrecord_write and preprocess from the first run, runs batching because "params changed
    (window.length 14 → 21)", and train and evaluate because "upstream `batches` runs".
    """
    folder = run_dir(root, run_id)
    _check_run_id(folder, run_id, options.resume, store)
    parts = cache_parts(spec, components, seqline_version=seqline.__version__,
                        inputs=_files_of(components), root=root)
    keys = {name: key_of(p) for name, p in parts.items()}
    kept, damaged = intact_committed(spec, folder, store) if options.resume else ({}, {})
    hits = cache_hits(spec, keys, store, root) if options.cache and not options.resume else {}
    missed = next((s.name for s in spec.stages if s.name not in hits), None)
    reusable = runnable_committed(spec, components, set(kept) | set(hits))
    connected = connections(spec, components, overlap=options.overlap, committed=reusable)
    fused = _fused(spec, components, connected) \
        if options.overlap and options.runner in FUSING_RUNNERS else {}
    steps = []
    for stage, conn in zip(spec.stages, connected, strict=True):
        hit = hits.get(stage.name)
        action: Action = "keep" if stage.name in kept and stage.name in reusable else \
            "reuse" if hit is not None and stage.name in reusable else "run"
        why = _why(spec, stage, action, options, store, parts, missed, kept, damaged, hit, root)
        origin: tuple[str | None, float | None, Folder | None] = (None, None, None)
        if action == "keep":
            origin = (run_id, None, kept[stage.name])
        elif action == "reuse" and hit is not None:
            origin = (hit.run_id, hit.seconds, hit.folder)
        steps.append(Step(
            stage.name, stage.component, _kind(components[stage.component]), action, why,
            conn.source, conn.takes, conn.gives_belt, conn.after, conn.waits_for_all,
            conn.follows_line, fused.get(stage.name), *origin,
            stale=action == "run" and (stage.name in kept or stage.name in damaged),
            cache_key=keys[stage.name], key_parts=parts[stage.name]))
    for stage, step in zip(spec.stages, steps, strict=True):
        check = components[stage.component].check_runner
        if step.runs and check is not None:
            check(stage, options.runner)
    check_before_work(spec, steps, components)
    return RunPlan(run_id, spec.name, options, tuple(steps))


def _kind(component: ComponentSpec[Any]) -> Kind:
    """A step's kind is its component's type: the one rule per shape of component."""
    if isinstance(component, SourceSpec):
        return "source"
    return "map" if isinstance(component, MapSpec) else "driver"


def _files_of(components: Mapping[str, ComponentSpec[Any]]) -> Any:
    def files(stage: StageSpec[Any], base_dir: Any) -> list[str]:
        component = components[stage.component]
        return component.files(stage, base_dir) if isinstance(component, SourceSpec) else []
    return files


def _check_run_id(folder: Folder, run_id: str, resume: bool, store: Any | None) -> None:
    """The run id names a run to finish (--resume), or none yet: before anything is made.

    A run the store has but whose folder never told it (its driver killed while Ray started,
    a disk full as it wrote run.json) committed nothing: resuming it runs it afresh under
    its id, so a scheduled fire time still gets its run."""
    exists = (folder / "run.json").exists()
    if resume and not exists and store is not None and store.run_exists(run_id):
        return
    if resume and not exists:
        raise ConfigError(f"no run {run_id!r} to resume under {shown(folder.parent)}; check "
                          "--run-id and --root (see `seqline runs list`).")
    if not resume and exists:
        succeeded = read_run_record(folder).get("status") == "succeeded"
        finish = "" if succeeded else ", or add --resume (resume=True) to finish it"
        raise ConfigError(f"run id {run_id!r} is already used under {shown(folder.parent)}; "
                          "choose another --run-id (run_id= in Python), or none for a fresh "
                          f"one{finish}.")


def _why(spec: PipelineSpec, stage: StageSpec[Any], action: Action, options: RunOptions,
         store: Any | None, parts: Mapping[str, Mapping[str, Any]], missed: str | None,
         kept: Mapping[str, Folder], damaged: Mapping[str, str], hit: Any, root: Folder) -> str:
    """Why the stage runs, or where its output comes from, in one line. `missed`: the first
    stage the cache had no intact output for (every stage after it runs)."""
    if action == "keep":
        return KEPT
    if action == "reuse":
        return f"reused from run {hit.run_id} (took {hit.seconds:.2f} s)"
    readers = [s.name for s in spec.stages if _source(spec, s) == stage.name]
    if stage.name in kept or hit is not None:  # committed, but its blocks are needed again
        return f"runs again to feed `{readers[0]}`: it stores no records to reuse"
    if stage.name in damaged:
        return f"{DAMAGED}: {damaged[stage.name]}"
    if options.resume:
        return "the earlier attempt did not commit it"
    if not options.cache:
        return "--no-cache"
    if not stage.cache:
        return "cache: false in the pipeline"
    if store is None:
        return "no run store yet"
    previous = store.last_stage_run(spec.name, stage.name)
    changed = changes(previous["key_parts"], parts[stage.name]) \
        if previous and previous.get("key_parts") else []
    if changed:
        return "; ".join(changed)
    if stage.name != missed:  # after the first miss: it reads what runs now
        return f"upstream `{_source(spec, stage)}` runs"
    if previous is None:
        return "no earlier run of this stage"
    if not previous.get("key_parts"):
        return f"run {previous['run_id']} recorded no cache key to compare with"
    if previous["cache_key"] == key_of(parts[stage.name]):
        away = output_elsewhere(previous["cache_key"], store, root)
        return f"the output of run {previous['run_id']} is under another root ({away})" \
            if away else f"the output of run {previous['run_id']} is gone or changed on disk"
    return f"upstream `{_source(spec, stage)}` changed since run {previous['run_id']}"


def _source(spec: PipelineSpec, stage: StageSpec[Any]) -> str | None:
    i = spec.stages.index(stage)
    return stage.inputs[0] if stage.inputs else spec.stages[i - 1].name if i else None


def connections(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]], *,
         overlap: bool = True, committed: Collection[str] = ()) -> list[Step]:
    """How every stage of `spec` connects, in order (the plan's steps without their actions).

    Args:
        spec: the pipeline.
        components: the component of each stage, by name.
        overlap: run as an assembly line (True) or each stage after the one before has
            committed (False; ingest still streams into the stage after it, storing nothing).
        committed: stages reused or kept: they are not run, only reported.

    Example: ingest -> tfrecord_write -> batching -> train gives ingest a belt to
    tfrecord_write, tfrecord_write a belt to batching, and train `artifacts` following the line.
    """
    steps: list[Step] = []
    for i, stage in enumerate(spec.stages):
        component = components[stage.component]
        previous = spec.stages[i - 1].name if i else None
        source = _source(spec, stage)
        kind = _kind(component)
        if stage.name in committed:
            steps.append(Step(stage.name, stage.component, kind, "reuse", "", source,
                              "artifacts"))
            continue
        gives = _gives_belt(spec, components, i, committed) and (
            overlap or isinstance(component, SourceSpec))
        takes = _takes(component, source, steps)
        after = None if overlap or takes == "belt" or previous is None else previous
        live = isinstance(component, DriverSpec) and component.live
        steps.append(Step(
            stage.name, stage.component, kind, "run", "", source, takes, gives_belt=gives,
            after=after,
            waits_for_all=kind == "driver" and takes == "artifacts" and not live,
            follows_line=live and takes == "artifacts"))
    return steps


def _takes(component: ComponentSpec[Any], source: str | None, before: list[Step]) -> Takes:
    if isinstance(component, SourceSpec) or source is None:
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
    for stage in spec.stages:
        source = _source(spec, stage)
        if stage.name not in keep and source in keep \
                and components[spec.stage(source).component].writes == "stream":
            keep.discard(source)
    return keep


def _fused(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]],
           steps: list[Step]) -> dict[str, str]:
    """The map stages that run inside the engine job of an earlier stage: name -> the stage
    whose job it is.

    Where each stage is a batch job (Beam), a stage taking the blocks of one that passes on
    every record as it came (tfrecord_write) runs in that stage's job: each block goes through
    both in one bundle, and the two stages run at the same time instead of one job after the
    other (decisions/0040). The same records and shards result.
    """
    heads: dict[str, str] = {}
    for before, step in zip(steps, steps[1:], strict=False):
        previous = components[spec.stage(before.stage).component]
        component = components[step.component]
        if (step.takes == "belt" and step.source == before.stage and before.runs
                and isinstance(previous, MapSpec) and previous.passes_every_record
                and isinstance(component, MapSpec) and not component.cuts_blocks):
            heads[step.stage] = heads.get(before.stage, before.stage)
    return heads
