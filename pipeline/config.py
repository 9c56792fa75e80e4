"""Loading a pipeline file (YAML) into a validated PipelineSpec, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.params import PARAMS_CONFIG, FieldLines, describe_errors, did_you_mean
from seqline.pipeline.specs import ComponentSpec, PipelineSpec, StageSpec

__all__ = ["PipelineFile", "as_file", "StageEntry", "build_pipeline", "load_pipeline", "make_stage",
           "parse_pipeline"]


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _mapping(value: Any) -> Any:
    return {} if value is None else value  # `params:` with nothing under it


class StageEntry(BaseModel):
    """One entry of `stages:`; its `params` are checked by the component's own model."""

    model_config = PARAMS_CONFIG

    name: str = Field(min_length=1, description="Unique in the file; names the artifact folder.")
    component: str = Field(description="ingest, tfrecord_write, preprocess, batching, train or "
                                       "evaluate.")
    params: Annotated[dict[str, Any], BeforeValidator(
        _mapping, json_schema_input_type=dict[str, Any] | None)] = Field(default_factory=dict)
    inputs: Annotated[list[str], BeforeValidator(
        _listed, json_schema_input_type=list[str] | str)] = Field(
        default_factory=list, description="The earlier stage whose stored records this stage "
                                          "reads; default: the stage before it.")
    errors: ErrorBudget | None = Field(None, description="This stage's error budget; default: "
                                                         "the file's.")
    cache: bool = Field(True, description="false: always recompute this stage.")
    retries: int | None = Field(None, ge=0, le=10, description=(
        "Times a block whose worker process died (killed, out of memory, a crash in native "
        "code) runs again on a fresh worker; default: the file's `retries`."))
    retry_user_errors: int = Field(0, ge=0, le=10, description=(
        "Times a call of the stage's function that raised is tried again, for functions "
        "that call flaky services; default 0: the first exception fails the block."))
    profile: bool = Field(True, description=(
        "false: no data profile (profile.json: per column counts, nulls, moments, quantiles, "
        "top values, drift) of this stage's output records."))


class PipelineFile(BaseModel):
    """A pipeline file: its name, its stages in order, and a default error budget."""

    model_config = PARAMS_CONFIG

    name: str | None = Field(None, description="Default: the file's name without .yaml.")
    stages: list[dict[str, Any]] = Field(min_length=1, description="The stages, in order.")
    errors: ErrorBudget | None = Field(None, description=(
        "Bad records a stage may set aside as dead letters; default: none (the first fails "
        "the run)."))
    retries: int = Field(3, ge=0, le=10, description=(
        "Times a block whose worker process died runs again, for every stage that does not "
        "say otherwise."))


def load_pipeline(path: Path | str, components: Mapping[str, ComponentSpec]) -> PipelineSpec:
    """Read and validate a pipeline file against the components that exist.

    Raises:
        ConfigError: with the file, the line, the stage and the field, what was expected,
            what was found and the fix.
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
    data, lines = _read_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with `name:` and a non-empty list "
                          "`stages:`; see the README for a pipeline file.")
    top = _validated(PipelineFile, data, source, lines, source)
    stages = [_stage(raw, i, lines, source, top, components)
              for i, raw in enumerate(top.stages)]
    return build_pipeline(top.name or Path(source).stem, stages, base_dir, components,
                          source=source, errors=top.errors)


def make_stage(name: str, component: str, params: Mapping[str, Any] | BaseModel | None,
               components: Mapping[str, ComponentSpec], *, where: str | None = None,
               lines: FieldLines | None = None, **fields: Any) -> StageSpec[Any]:
    """A stage with its parameters checked by its component's model.

    Raises:
        ConfigError: unknown component (with "did you mean"), or bad parameters.
    """
    where = where or f"stage {name!r}"
    spec = components.get(component)
    if spec is None:
        raise ConfigError(f"{where}: unknown component {component!r}."
                          f"{did_you_mean(component, components)} Components: "
                          f"{', '.join(components)}.")
    if isinstance(params, BaseModel):
        if not isinstance(params, spec.params):
            raise ConfigError(f"{where}: component {component!r} takes "
                              f"{spec.params.__name__}, not {type(params).__name__}.")
        typed = params
    else:
        typed = spec.params.model_validate(dict(params or {}),
                                           context={"where": where, "lines": lines or {}})
    return StageSpec(name, component, typed, **fields)


def build_pipeline(name: str, stages: Sequence[StageSpec[Any]], base_dir: Path,
                   components: Mapping[str, ComponentSpec], *, source: str = "<pipeline>",
                   errors: ErrorBudget | None = None) -> PipelineSpec:
    """Check the stages as a whole (names, inputs, order) and against the world.

    Shared by pipeline files and the Python API, so both give the same messages.
    """
    _check_names(stages, source)
    spec = PipelineSpec(name, tuple(stages), Path(base_dir), errors)
    for stage in spec.stages:
        component = components[stage.component]
        if (component.reads == "files") != (stage is spec.stages[0]):
            raise ConfigError(
                f"{source}: {stage.where}: component {stage.component!r} "
                + ("reads files, so it must be the first stage." if component.reads == "files"
                   else "needs input blocks: put an `ingest` stage first."))
        if component.validate:
            try:
                component.validate(stage, spec.base_dir)
            except ConfigError as exc:
                raise ConfigError(f"{source}: {exc}") from exc
        _check_inputs(spec, stage, components, source)
    return spec


def _read_yaml(text: str, source: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: malformed YAML{where}: {exc.problem}. "
                          "Fix the syntax there (indentation, a missing ':' or quote).") from exc
    lines: dict[tuple[str, ...], int] = {}
    _key_lines(root, (), lines)
    return data, lines


def _key_lines(node: yaml.Node | None, path: tuple[str, ...],
               lines: dict[tuple[str, ...], int]) -> None:
    """Record the 1-based line of every key and list item, by its path of names and indices."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[(*path, str(key.value))] = key.start_mark.line + 1
            _key_lines(value, (*path, str(key.value)), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, str(i))] = item.start_mark.line + 1
            _key_lines(item, (*path, str(i)), lines)


def _validated(model: type[BaseModel], data: Any, where: str, lines: FieldLines,
               source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, model, where, lines)) from None


def _stage(raw: Any, i: int, lines: dict[tuple[str, ...], int], source: str,
           top: PipelineFile, components: Mapping[str, ComponentSpec]) -> StageSpec[Any]:
    line = lines.get(("stages", str(i)))
    prefix = ("stages", str(i))
    own = {k[2:]: v for k, v in lines.items() if k[:2] == prefix}
    where = f"{source}: stage #{i + 1}" + (f" (line {line})" if line else "")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with `name:` and `component:`.")
    entry = _validated(StageEntry, raw, where, own, source)
    where = f"{source}: stage {entry.name!r}" + (f" (line {line})" if line else "")
    params_lines = {k[1:]: v for k, v in own.items() if k[:1] == ("params",)}
    return make_stage(entry.name, entry.component, entry.params, components, where=where,
                      lines=params_lines, inputs=tuple(entry.inputs), line=line,
                      errors=entry.errors if "errors" in raw else top.errors,
                      cache=entry.cache,
                      retries=top.retries if entry.retries is None else entry.retries,
                      retry_user_errors=entry.retry_user_errors, profile=entry.profile)


def _check_inputs(spec: PipelineSpec, stage: StageSpec[Any],
                  components: Mapping[str, ComponentSpec], source: str) -> None:
    """A stage reads the stage before it (streamed) or an earlier stage's stored records."""
    if not stage.inputs:
        return
    if len(stage.inputs) > 1:
        raise ConfigError(f"{source}: {stage.where}: reads {list(stage.inputs)}; a stage reads "
                          "one input. Merge inputs in ingest (several `paths`).")
    position = spec.stages.index(stage)
    named = spec.stage(stage.inputs[0])
    if named is spec.stages[position - 1] or components[named.component].stores_records:
        return
    raise ConfigError(
        f"{source}: {stage.where}: reads {named.name!r}, which is not the stage before it and "
        f"keeps no records ({named.component} streams them on). Read a stage that writes "
        "TFRecords (tfrecord_write, preprocess), or move this stage right after it.")


def _check_names(stages: Sequence[StageSpec[Any]], source: str) -> None:
    seen: dict[str, StageSpec[Any]] = {}
    for stage in stages:
        parts = PurePosixPath(stage.name).parts
        if (not parts or parts[0] == "/" or ".." in parts or "\\" in stage.name
                or any(ord(c) < 32 for c in stage.name)):
            raise ConfigError(
                f"{source}: {stage.where}: a stage name names its artifact folder, so it cannot "
                "be absolute, contain '..', a backslash or control characters. Rename it, e.g. "
                "'features'.")
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


def as_file(spec: PipelineSpec) -> dict[str, Any]:
    """The pipeline as a pipeline file holds it (for `to_yaml`): defaults left out."""
    data: dict[str, Any] = {"name": spec.name}
    if spec.errors is not None:
        data["errors"] = spec.errors.model_dump(exclude_defaults=True)
    data["stages"] = [_stage_entry(s, spec.errors) for s in spec.stages]
    return data


def _stage_entry(stage: StageSpec[Any], default: ErrorBudget | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": stage.name, "component": stage.component}
    params = stage.params.model_dump(mode="json", exclude_unset=True)
    if params:
        entry["params"] = params
    if stage.inputs:
        entry["inputs"] = list(stage.inputs)
    if stage.errors is not None and stage.errors != default:
        entry["errors"] = stage.errors.model_dump(exclude_defaults=True)
    if not stage.cache:
        entry["cache"] = False
    if stage.retries != 3:
        entry["retries"] = stage.retries
    if stage.retry_user_errors:
        entry["retry_user_errors"] = stage.retry_user_errors
    if not stage.profile:
        entry["profile"] = False
    return entry
