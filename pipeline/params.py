"""Typed stage parameters: one frozen pydantic model per component, errors in seqline's words."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from seqline.pipeline.errors import ConfigError

__all__ = ["PARAMS_CONFIG", "FieldLines", "StageParams", "describe_errors", "did_you_mean",
           "one_of"]

# Frozen: a stage's parameters are part of its cache key and must not change after loading.
# extra="forbid": a misspelt parameter is an error, not silently ignored. strict: YAML has
# types, so "32" is not a batch size (an int is still accepted where a float is expected).
# defer_build: a model's validator is built when it first validates, not at import: a run
# builds only its own components' (every import of the components cost 28 ms before).
PARAMS_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True,
                           serialize_by_alias=True, protected_namespaces=(), defer_build=True)

FieldLines = Mapping[tuple[str, ...], int]
"""1-based line of each key under a stage's `params:`, by its path (for messages)."""


class StageParams(BaseModel):
    """Base of every component's parameters: validation errors become one ConfigError.

    A validation context may say where the parameters come from: `where` (e.g. "p.yaml:
    stage 'batches' (line 12)") and `lines` (FieldLines), so that each message names the
    file, the line, the stage and the field. Without one (the Python API), messages name
    the component's parameter model.
    """

    model_config = PARAMS_CONFIG

    @model_validator(mode="wrap")
    @classmethod
    def _in_our_words(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            context = info.context or {}
            raise ConfigError(describe_errors(
                exc, cls, context.get("where") or cls.__name__, context.get("lines") or {},
                field_label="parameter")) from None


def describe_errors(exc: ValidationError, model: type[BaseModel], where: str,
                    lines: FieldLines, field_label: str = "key") -> str:
    """One self-contained line per problem: where, the field, expected, found, a hint.

    Example: `p.yaml: stage 'batches' (line 12), parameter split (line 16): expected 'tail'
    or 'hash', found 'tial'. Did you mean 'tail'?`
    """
    seen: set[tuple[str, ...]] = set()
    messages = []
    for error in exc.errors(include_url=False):
        # "[key]": pydantic's mark for a bad dict key; the key itself is the step before it
        loc = tuple(str(p) for p in error["loc"] if p != "[key]")
        if loc in seen:  # one message per field (a union reports each of its members)
            continue
        seen.add(loc)
        line = _line_of(loc, lines)
        place = f"{where}, {field_label} {'.'.join(loc)}" if loc else where
        place += f" (line {line})" if line and loc else ""
        messages.append(f"{place}: {_explain(error, model, field_label)}")
    return "\n".join(messages)


def _line_of(loc: tuple[str, ...], lines: FieldLines) -> int | None:
    for end in range(len(loc), 0, -1):  # the field's own line, else its nearest parent's
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _explain(error: Any, model: type[BaseModel], field_label: str) -> str:
    kind, found = error["type"], error.get("input")
    if kind == "extra_forbidden":
        return _unknown(error["loc"], model, field_label)
    if kind == "missing":
        return f"a required {field_label} is missing; add it."
    expected = re.sub(r"^(Input should be|Value error,)\s*", "", error["msg"]).rstrip(".")
    expected = re.sub(r" or instance of \w+$", "", expected)  # pydantic's words, not YAML's
    text = f"expected {expected}, found {found!r}"
    choices = (error.get("ctx") or {}).get("choices") or (
        re.findall(r"'([^']*)'", expected) if kind in ("literal_error", "enum") else [])
    if choices and isinstance(found, str):
        text += "." + did_you_mean(found, choices)
    return text if text.endswith((".", "?")) else text + "."


def _unknown(loc: Sequence[Any], model: type[BaseModel], field_label: str) -> str:
    """'unknown parameter. Did you mean …? Known: …' for a key the model at its place lacks."""
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return f"unknown {field_label}."
    names = sorted(f.alias or n for n, f in owner.model_fields.items())
    return (f"unknown {field_label}.{did_you_mean(str(loc[-1]), names)} "
            f"Known: {', '.join(names)}.")


def _model_at(model: type[BaseModel], path: Sequence[Any]) -> type[BaseModel] | None:
    """The model that validates the mapping at `path` (field names and dict keys) in `model`."""
    current: Any = model
    for part in path:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next((f for n, f in current.model_fields.items()
                          if part in (n, f.alias)), None)
            if field is None:
                return None
            current = _unwrap(field.annotation)
        elif get_origin(current) in (dict, Mapping):
            current = _unwrap(get_args(current)[1])  # a dict's key is any name: step over it
        else:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X; anything else as it is."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (UnionType, Union) and len(args) == 1:
        return args[0]
    return annotation


def one_of(value: str, choices: Sequence[str], expected: str) -> PydanticCustomError:
    """The error for a value that is none of `choices`: `expected` says what would do, and the
    message ends with the closest choice ("did you mean")."""
    return PydanticCustomError("unknown_choice", expected, {"choices": list(choices)})


def did_you_mean(word: str, choices: Mapping[str, Any] | Sequence[str]) -> str:
    """' Did you mean 'x'?' for the closest choice, or '' when nothing is close."""
    hint = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {hint[0]!r}?" if hint else ""
