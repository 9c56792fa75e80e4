"""Loading a pipeline file (YAML) into a validated PipelineSpec, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import ComponentSpec, PipelineSpec, StageSpec, did_you_mean

__all__ = ["load_pipeline", "parse_pipeline"]

STAGE_KEYS = ("name", "component", "params", "inputs", "errors")
PIPELINE_KEYS = ("name", "stages", "errors")


def load_pipeline(path: Path | str, components: Mapping[str, ComponentSpec]) -> PipelineSpec:
    """Read and validate a pipeline file against the components that exist.

    Raises:
        ConfigError: with the file, the line where it helps, what was expected and the fix.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read pipeline file {path}: {exc.strerror}. "
                          "Check the path given to `seqline run`.") from exc
    return parse_pipeline(text, path.resolve().parent, components, source=str(path))


def parse_pipeline(text: str, base_dir: Path, components: Mapping[str, ComponentSpec],
                   *, source: str = "<pipeline>") -> PipelineSpec:
    """Parse pipeline YAML; `base_dir` is where relative paths and user modules are found."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: malformed YAML{where}: {exc.problem}. "
                          "Fix the syntax there (indentation, a missing ':' or quote).") from exc
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list) or not data["stages"]:
        raise ConfigError(f"{source}: expected a mapping with `name:` and a non-empty list "
                          "`stages:`; see the README for a pipeline file.")
    for key in data:
        if key not in PIPELINE_KEYS:
            raise ConfigError(f"{source}: unknown top-level key {key!r}."
                              f"{did_you_mean(str(key), list(PIPELINE_KEYS))} A pipeline file "
                              f"has: {', '.join(PIPELINE_KEYS)}.")
    default_budget = ErrorBudget.parse(data.get("errors"), f"{source}: errors")
    lines = _stage_lines(root)
    stages = tuple(_stage(raw, i, lines, source, default_budget)
                   for i, raw in enumerate(data["stages"]))
    _check_names(stages, source)
    spec = PipelineSpec(str(data.get("name") or Path(source).stem), stages, base_dir)
    for stage in spec.stages:
        component = components.get(stage.component)
        if component is None:
            raise ConfigError(
                f"{source}: {stage.where}: unknown component {stage.component!r}."
                f"{did_you_mean(stage.component, components)} Components: "
                f"{', '.join(components)}.")
        if (component.kind == "source") != (stage is spec.stages[0]):
            raise ConfigError(
                f"{source}: {stage.where}: component {stage.component!r} "
                + ("reads files, so it must be the first stage." if component.kind == "source"
                   else "needs input blocks: put an `ingest` stage first."))
        if component.validate:
            component.validate(stage, base_dir)
        else:
            component.params_with_defaults(stage)
        _check_inputs(spec, stage, components, source)
    return spec


def _check_inputs(spec: PipelineSpec, stage: StageSpec,
                  components: Mapping[str, ComponentSpec], source: str) -> None:
    """A stage reads the stage before it (streamed) or an earlier stage's stored records."""
    if not stage.inputs:
        return
    if len(stage.inputs) > 1:
        raise ConfigError(f"{source}: {stage.where}: reads {list(stage.inputs)}; a stage reads "
                          "one input. Merge inputs in ingest (several `paths`).")
    position = spec.stages.index(stage)
    named = spec.stage(stage.inputs[0])
    if named is spec.stages[position - 1] or components[named.component].writes_records:
        return
    raise ConfigError(
        f"{source}: {stage.where}: reads {named.name!r}, which is not the stage before it and "
        f"keeps no records ({named.component} streams them on). Read a stage that writes "
        "TFRecords (tfrecord_write, preprocess), or move this stage right after it.")


def _stage(raw: Any, i: int, lines: list[int | None], source: str,
           default_budget: ErrorBudget | None) -> StageSpec:
    line = lines[i] if i < len(lines) else None
    where = f"{source}: stage #{i + 1}" + (f" (line {line})" if line else "")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with `name:` and `component:`.")
    for key in raw:
        if key not in STAGE_KEYS:
            hint = did_you_mean(str(key), list(STAGE_KEYS))
            raise ConfigError(f"{where}: unknown key {key!r}.{hint} "
                              f"A stage has: {', '.join(STAGE_KEYS)}.")
    for key in ("name", "component"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f"{where}: `{key}:` is missing or not a string.")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: `params:` must be a mapping, got {type(params).__name__}.")
    inputs = raw.get("inputs") or []
    inputs = [inputs] if isinstance(inputs, str) else inputs
    budget = ErrorBudget.parse(raw["errors"], f"{where}: errors") if "errors" in raw \
        else default_budget
    return StageSpec(raw["name"], raw["component"], params, tuple(inputs), line, budget)


def _check_names(stages: tuple[StageSpec, ...], source: str) -> None:
    seen: dict[str, StageSpec] = {}
    for stage in stages:
        if stage.name in seen:
            raise ConfigError(
                f"{source}: duplicate stage name {stage.name!r} ({seen[stage.name].where} and "
                f"line {stage.line}). Stage names must be unique: they name artifact folders.")
        for name in stage.inputs:
            if name not in seen:
                raise ConfigError(
                    f"{source}: {stage.where}: input {name!r} is not an earlier stage."
                    f"{did_you_mean(name, seen)} Stages run in file order.")
        seen[stage.name] = stage


def _stage_lines(root: yaml.Node | None) -> list[int | None]:
    """1-based line of each stage entry, for messages (composed nodes keep their marks)."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "stages" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
