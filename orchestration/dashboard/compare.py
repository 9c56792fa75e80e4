"""Two whole runs side by side: parameters, stages, verify and evaluation (`/runs/A/compare`)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException

from seqline.orchestration.dashboard import files
from seqline.orchestration.dashboard.context import Dashboard
from seqline.orchestration.divergence import first_batch, first_divergences

__all__ = ["flat", "run_compare_view"]

# What the run table compares, in the words of the run page.
RUN_FACTS = ("status", "pipeline", "pipeline_file", "fingerprint", "runner", "trigger",
             "started", "seconds", "seqline_version")
STAGE_FACTS = ("status", "seconds", "records_in", "records_out", "filtered", "dead_lettered",
               "waited_input", "waited_output", "cached_from")


def run_compare_view(dash: Dashboard, run_id: str, other: str | None) -> dict[str, Any]:
    """Run `run_id` (A) against `other` (B; default the pipeline's run before A).

    Raises:
        HTTPException: 404 when either run is unknown, or A has no earlier run to compare
            with and none was named.
    """
    a = dash.found(dash.reader.run_page, run_id)
    other = other or dash.reader.previous_run(run_id)
    if not other:
        raise HTTPException(404, "no earlier run of this pipeline to compare with; "
                                 "name one with ?with=RUN_ID")
    b = dash.found(dash.reader.run_page, other)
    names = [s["name"] for s in a["stages"]]
    names += [s["name"] for s in b["stages"] if s["name"] not in names]
    by_name = [{s["name"]: s for s in run["stages"]} for run in (a, b)]
    params_a = {f"{s['name']}.{k}": v for s in a["stages"] for k, v in flat(s["params"]).items()}
    params_b = {f"{s['name']}.{k}": v for s in b["stages"] for k, v in flat(s["params"]).items()}
    params_a.update({f"options.{k}": v for k, v in flat(a["options"] or {}).items()})
    params_b.update({f"options.{k}": v for k, v in flat(b["options"] or {}).items()})
    return {
        "a": a, "b": b,
        "facts": _rows(RUN_FACTS, a, b),
        "params": [{"key": k, "a": params_a.get(k), "b": params_b.get(k),
                    "same": params_a.get(k) == params_b.get(k)}
                   for k in sorted(params_a.keys() | params_b.keys())],
        "stages": [{"name": n, "a": by_name[0].get(n), "b": by_name[1].get(n),
                    "facts": _rows(STAGE_FACTS, by_name[0].get(n) or {}, by_name[1].get(n) or {})}
                   for n in names],
        "verify": [files.verify_of(dash.root, r["run_id"]) for r in (a, b)],
        "metrics": _metrics(by_name),
        "divergence": _divergence(dash, a["run_id"], b["run_id"]),
    }


def _divergence(dash: Dashboard, run_a: str, run_b: str) -> dict[str, Any]:
    """The first record (per stored stage) and the first training batch where A and B differ."""
    stages = first_divergences(dash.root, run_a, run_b)
    seq = next((s.seq for s in stages if not s.identical), None)
    return {"stages": stages, "batch": first_batch(dash.root, run_a, run_b, seq)}


def _rows(keys: tuple[str, ...], a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "a": a.get(k), "b": b.get(k), "same": a.get(k) == b.get(k)} for k in keys]


def _metrics(by_name: list[dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per evaluated stage and metric: A's and B's value, and the blessing of each."""
    rows = []
    for name in [*by_name[0], *(n for n in by_name[1] if n not in by_name[0])]:
        evals = [(side.get(name) or {}).get("evaluation") or {} for side in by_name]
        if not any(evals):
            continue
        rows.append({"stage": name, "key": "blessed", "a": evals[0].get("blessed"),
                     "b": evals[1].get("blessed")})
        for metric in sorted({*(evals[0].get("metrics") or {}), *(evals[1].get("metrics") or {})}):
            rows.append({"stage": name, "key": metric,
                         "a": (evals[0].get("metrics") or {}).get(metric),
                         "b": (evals[1].get("metrics") or {}).get(metric)})
    return rows


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"window": {"length": 14}} -> {"window.length": 14}: nested parameters, diffable."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}
