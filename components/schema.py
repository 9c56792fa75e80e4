"""The JSON Schema of pipeline files, generated from the components' parameter models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, TypeAdapter, create_model

from seqline.components import COMPONENTS
from seqline.pipeline.config import PipelineFile, StageEntry
from seqline.pipeline.params import PARAMS_CONFIG

__all__ = ["SCHEMA_FILE", "pipeline_schema", "schema_text"]

SCHEMA_FILE = Path(__file__).with_name("pipeline.schema.json")
"""The schema as shipped with the package; `seqline schema` prints the same."""


def pipeline_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of a pipeline file: every stage's `params` checked by its
    component's model, chosen by `component` (editors complete and check as you type).

    Example: a stage `{name: b, component: batching, params: {split: tial}}` is flagged at
    `split`: "tial" is not one of "tail", "hash".
    """
    entries = tuple(_entry(name, spec.params) for name, spec in COMPONENTS.items())
    stage = Annotated[Union[entries], Field(discriminator="component")]  # type: ignore[valid-type]  # noqa: UP007, E501 - built at run time
    fields = {name: (info.annotation, info) for name, info in PipelineFile.model_fields.items()}
    fields["stages"] = (list[stage], Field(min_length=1, description="The stages, in order."))
    model = create_model("Pipeline", __config__=PARAMS_CONFIG,
                         __doc__=PipelineFile.__doc__, **fields)  # type: ignore[call-overload]
    schema = TypeAdapter(model).json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "seqline pipeline file", **schema}


def _entry(component: str, params: type[BaseModel]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name, info in StageEntry.model_fields.items():
        fields[name] = (info.annotation, info)
    required = any(f.is_required() for f in params.model_fields.values())
    fields["component"] = (Literal[component], Field(description=COMPONENTS[component].doc))
    fields["params"] = (params, ...) if required else (params | None, None)
    title = "".join(part.title() for part in component.split("_")) + "Stage"
    return create_model(title, __config__=PARAMS_CONFIG, **fields)  # type: ignore[call-overload]


def schema_text() -> str:
    return json.dumps(pipeline_schema(), indent=2, sort_keys=True) + "\n"
