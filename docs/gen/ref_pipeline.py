"""Write reference/pipeline.md: every field of a pipeline file, from the JSON Schema that
`seqline schema` prints (itself generated from the components' typed models), so the page
cannot disagree with what a pipeline file is checked against.
"""

from __future__ import annotations

import json
from typing import Any

import mkdocs_gen_files

from seqline.components import COMPONENTS
from seqline.components.schema import pipeline_schema
from seqline.pipeline.specs import DriverSpec, SourceSpec

STAGE_TITLE = {name: "".join(p.title() for p in name.split("_")) + "Stage" for name in COMPONENTS}


def anchor(model: str) -> str:
    return model.lower()


def kind(prop: dict[str, Any]) -> str:
    """The field's type in a pipeline file's words: YAML types, choices, links to models."""
    if "$ref" in prop:
        model = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{model}](#{anchor(model)})"
    if "anyOf" in prop:
        parts = [kind(p) for p in prop["anyOf"]]
        return " or ".join(dict.fromkeys(parts))
    if "oneOf" in prop:
        return "stage (see [every stage](#every-stage) and its component's section)"
    if "const" in prop:
        return f"`{prop['const']}`"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    t = prop.get("type")
    if t == "array":
        return f"list of {kind(prop.get('items', {}))}"
    if t == "object":
        values = prop.get("additionalProperties")
        if isinstance(values, dict):
            return f"mapping of name to {kind(values)}"
        return "mapping"
    if t == "null":
        return "null"
    if "pattern" in prop:
        return f"{t} matching `{prop['pattern']}`"
    return {"integer": "integer", "number": "number", "string": "string",
            "boolean": "boolean"}.get(t or "", t or "any")


def bounds(prop: dict[str, Any]) -> str:
    """Bounds of the field or of its non-null alternative (`x: int >= 1 or null`)."""
    found = []
    for p in [prop, *prop.get("anyOf", [])]:
        for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                          ("exclusiveMaximum", "<"), ("minLength", "length ≥"),
                          ("minItems", "items ≥")):
            if key in p:
                found.append(f"{sign} {p[key]}")
    return ", ".join(dict.fromkeys(found))


def default(prop: dict[str, Any], required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in prop:
        return "—"
    return f"`{json.dumps(prop['default'])}`"


def cell(text: str) -> str:
    """One table cell: one line, pipes escaped, `__seq__` not read as bold."""
    return " ".join(text.split()).replace("|", "\\|").replace("__", "\\_\\_")


def table(model: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    required = set(model.get("required", []))
    rows = ["| field | type | default | bounds | description |", "| --- | --- | --- | --- | --- |"]
    for name, prop in sorted(model.get("properties", {}).items()):
        if name in skip:
            continue
        rows.append(f"| `{name}` | {kind(prop)} | {default(prop, name in required)} | "
                    f"{bounds(prop)} | {cell(prop.get('description', ''))} |")
    return rows


def page() -> str:
    schema = pipeline_schema()
    defs = schema["$defs"]
    out = ["# Pipeline file", "",
           "Generated from the JSON Schema of pipeline files (`seqline schema`, shipped as "
           "`components/pipeline.schema.json`), which is generated from each component's "
           "typed parameter model: this page, the schema and the checks a pipeline file "
           "gets when it loads are one source. A wrong type, an unknown field or a value "
           "out of bounds stops the run before anything starts (exit 2), naming the file, "
           "the stage, the field and their lines.", "",
           "Editors check a file as you type with one line at its top:", "",
           "```yaml", "# yaml-language-server: $schema=PATH/TO/pipeline.schema.json", "```", "",
           "## The file", "", cell(schema.get("description", "")), "", *table(schema), "",
           "## Every stage", "",
           "Fields every stage takes, whatever its component; `params` is the component's "
           "own model, below.", "",
           *table(defs[STAGE_TITLE["ingest"]], skip=("component", "params")), ""]
    for name, spec in COMPONENTS.items():
        entry = defs[STAGE_TITLE[name]]
        params = entry["properties"]["params"]
        ref = (params.get("$ref") or next(p["$ref"] for p in params["anyOf"] if "$ref" in p))
        model_name = ref.rsplit("/", 1)[-1]
        model = defs[model_name]
        runs = ("on the driver" if isinstance(spec, DriverSpec) else
                "on the driver, or in ranges of its files on the engine's workers (`parallel`)"
                if isinstance(spec, SourceSpec) else "on the engine's workers")
        live = isinstance(spec, DriverSpec) and spec.live
        out += [f"## {name}", "", f"`component: {name}` — {cell(spec.doc)}", "",
                f"Reads {spec.reads}, writes {spec.writes}; runs {runs}"
                + ("; starts alongside the stages before it." if live else "."), "",
                f"### {model_name} {{#{anchor(model_name)}}}", "",
                cell(model.get("description", "")), "", *table(model), ""]
    shown = {STAGE_TITLE[n] for n in COMPONENTS} | {
        d.rsplit("/", 1)[-1] for d in json.dumps(schema).split('"') if d.startswith("#/$defs/")}
    nested = sorted(n for n in defs if n in shown and not n.endswith("Stage")
                    and n not in out_models(defs))
    out += ["## Nested models", ""]
    for model_name in nested:
        model = defs[model_name]
        out += [f"### {model_name} {{#{anchor(model_name)}}}", "",
                cell(model.get("description", "")), "", *table(model), ""]
    return "\n".join(out)


def out_models(defs: dict[str, Any]) -> set[str]:
    """The components' own parameter models (shown under their component)."""
    return {spec.params.__name__ for spec in COMPONENTS.values()}


with mkdocs_gen_files.open("reference/pipeline.md", "w") as f:
    f.write(page())
mkdocs_gen_files.set_edit_path("reference/pipeline.md", "gen/ref_pipeline.py")
