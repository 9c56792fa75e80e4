"""Two runs side by side, showing only what differs unless asked: whole runs (`/runs/A/compare`)
and one stage of each (`/runs/A/stages/S/compare`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException

from seqline.orchestration.cache import NOT_IN_FOLDER
from seqline.orchestration.dashboard import files
from seqline.orchestration.dashboard.context import Dashboard
from seqline.orchestration.dashboard.units import duration
from seqline.orchestration.divergence import first_batch, first_divergences
from seqline.orchestration.key_changes import changes

__all__ = ["SHOW_SAME", "compare_view", "flat", "run_compare_view"]

# What the run table compares, in the words of the run page.
RUN_FACTS = ("status", "pipeline", "pipeline_file", "fingerprint", "runner", "trigger",
             "started", "seconds", "seqline_version")
STAGE_FACTS = ("status", "seconds", "records_in", "records_out", "filtered", "dead_lettered",
               "waited_input", "waited_output", "cached_from")
# Rows read as durations: the same when they read the same (0.0023 s and 0 s are "0.00 s").
SECONDS = ("seconds", "run seconds", "waited_input", "waited_output")
# The address's switch that shows the rows the two runs share (hidden by default, as
# mlflow#10477 asks: a comparison shows what differs).
SHOW_SAME = ("same", "shown")


def run_compare_view(dash: Dashboard, run_id: str, other: str | None,
                     query: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run `run_id` (A) against `other` (B; default the pipeline's run before A).

    Every row says whether it is the same in both (`same`); the page shows those only with
    `?same=shown` (`toggle`: the address that flips it, `hidden`: how many it hides).
    A stage's `code` row is its user code's modules and digests, from its cache key's parts;
    `changes` says why its cache key differs, from B to A, in the plan's words ("function
    source changed (features.py)").

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
    parts = [dash.reader.key_parts(run["run_id"]) for run in (a, b)]
    verdicts = [files.verify_of(dash.root, run["run_id"]) for run in (a, b)]
    params = [{f"{s['name']}.{k}": v for s in run["stages"] for k, v in flat(s["params"]).items()}
              | {f"options.{k}": v for k, v in flat(run["options"] or {}).items()}
              for run in (a, b)]
    ok = [None if v is None else v["ok"] for v in verdicts]
    facts = [*_rows(RUN_FACTS, a, b), _row("verify", ok[0], ok[1])]
    diffed = _pairs(*params)
    stages = [_stage(n, by_name[0].get(n), by_name[1].get(n), parts[0].get(n), parts[1].get(n))
              for n in names]
    metrics = _metrics(by_name)
    divergence = _divergence(dash, a["run_id"], b["run_id"])
    hidden = sum(r["same"] for r in (*facts, *diffed, *metrics)) + \
        sum(f["same"] for s in stages for f in s["facts"]) + \
        sum(d.identical for d in divergence["stages"]) + \
        bool(divergence["stages"] and not divergence["batch"])
    return {"a": a, "b": b, "facts": facts, "params": diffed, "stages": stages,
            "verify": verdicts, "metrics": metrics, "divergence": divergence,
            **_toggle(query or {}, hidden)}


def compare_view(dash: Dashboard, run_id: str, name: str, other: str,
                 query: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Two runs' same stage side by side: status, durations, counts, metrics, code and
    parameters (each row `same` or not, as run_compare_view's), and the curves.

    Raises:
        HTTPException: 404 when either run or the stage in either is unknown.
    """
    sides = []
    for rid in (run_id, other):
        run = dash.found(dash.reader.run_page, rid)
        stage = next((s for s in run["stages"] if s["name"] == name), None)
        if stage is None:
            raise HTTPException(404, f"no stage {name!r} in run {rid!r}")
        sides.append({"run": run, "stage": stage,
                      "parts": dash.reader.key_parts(rid).get(name)})
    (a, b), (pa, pb) = (s["stage"] for s in sides), (s["parts"] for s in sides)
    rows = [_row(key, a.get(key), b.get(key), kind) for key, kind in (
        ("status", "status"), ("seconds", "seconds"), ("records_in", "count"),
        ("records_out", "count"), ("filtered", "count"), ("dead_lettered", "count"),
        ("waited_input", "seconds"), ("waited_output", "seconds"))]
    rows.insert(2, _row("run seconds", sides[0]["run"]["seconds"], sides[1]["run"]["seconds"],
                        "seconds"))
    metrics = [(s["stage"].get("evaluation") or {}).get("metrics") or {} for s in sides]
    rows += [_row(m, metrics[0].get(m), metrics[1].get(m), "metric")
             for m in sorted(metrics[0].keys() | metrics[1].keys())]
    rows.append(_row("code", _code(pa), _code(pb), "text"))
    params = _pairs(flat(a["params"]), flat(b["params"]))
    return {"sides": sides, "stage": name, "rows": rows, "params": params,
            "changes": _changes(pa, pb, a, b),
            **_toggle(query or {}, sum(r["same"] for r in (*rows, *params)))}


def _stage(name: str, a: dict[str, Any] | None, b: dict[str, Any] | None,
           parts_a: dict[str, Any] | None, parts_b: dict[str, Any] | None) -> dict[str, Any]:
    facts = _rows(STAGE_FACTS, a or {}, b or {})
    facts.append(_row("code", _code(parts_a), _code(parts_b)))
    return {"name": name, "a": a, "b": b, "facts": facts,
            "changes": _changes(parts_a, parts_b, a, b)}


def _code(parts: dict[str, Any] | None) -> str | None:
    """A stage's user code as its cache key saw it: each module of the pipeline's folder
    with the start of its source digest. Installed modules (numpy, ...) are in the key by
    name only: their versions are the environment's, and the module importing them says
    when they come or go.

    Example: {"code": {"features": "3f2a9c1e…", "numpy": NOT_IN_FOLDER}} -> "features.py
    3f2a9c1e"; a stage without user code -> None.
    """
    code = {m: d for m, d in ((parts or {}).get("code") or {}).items() if d != NOT_IN_FOLDER}
    if not code:
        return None
    return ", ".join(f"{module.replace('.', '/')}.py {digest[:8]}"
                     for module, digest in sorted(code.items()))


def _changes(parts_a: dict[str, Any] | None, parts_b: dict[str, Any] | None,
             a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """Why the stage's cache key differs, from B to A (the plan's words); [] when the keys
    are equal or either side lacks its parts (a store before revision 5)."""
    if not parts_a or not parts_b or (a or {}).get("cache_key") == (b or {}).get("cache_key"):
        return []
    upstream = (parts_a.get("reads") or {}).get("stage")
    if not upstream or parts_a.get("reads") == parts_b.get("reads"):
        return changes(parts_b, parts_a) or ["its cache key differs"]
    return [*changes(parts_b, parts_a), f"its input changed (upstream `{upstream}` ran again)"]


def _toggle(query: Mapping[str, str], hidden: int) -> dict[str, Any]:
    """Whether the rows the runs share are shown, how many that is, and the address (this
    one, its other parameters kept) that shows or hides them."""
    shown = query.get(SHOW_SAME[0]) == SHOW_SAME[1]
    kept = {k: v for k, v in query.items() if k != SHOW_SAME[0]}
    flipped = kept if shown else {**kept, SHOW_SAME[0]: SHOW_SAME[1]}
    return {"show_same": shown, "hidden": hidden, "toggle": "?" + urlencode(flipped)}


def _row(key: str, a: Any, b: Any, kind: str = "") -> dict[str, Any]:
    """One compared value: the same when A and B are equal, durations and metrics when they
    read the same on the page."""
    shown = {"seconds": duration, "metric": lambda v: f"{v:.4g}" if isinstance(v, float) else v}
    same = a == b or (kind in shown and shown[kind](a) == shown[kind](b))
    return {"key": key, "a": a, "b": b, "same": same, "kind": kind}


def _rows(keys: tuple[str, ...], a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    return [_row(k, a.get(k), b.get(k), "seconds" if k in SECONDS else "") for k in keys]


def _pairs(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat parameters of A and B, every key of either, in order."""
    return [_row(k, a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())]


def _divergence(dash: Dashboard, run_a: str, run_b: str) -> dict[str, Any]:
    """The first record (per stored stage) and the first training batch where A and B differ."""
    stages = first_divergences(dash.root, run_a, run_b)
    seq = next((s.seq for s in stages if not s.identical), None)
    return {"stages": stages, "batch": first_batch(dash.root, run_a, run_b, seq)}


def _metrics(by_name: list[dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per evaluated stage and metric: A's and B's value, and the blessing of each."""
    rows = []
    for name in [*by_name[0], *(n for n in by_name[1] if n not in by_name[0])]:
        evals = [(side.get(name) or {}).get("evaluation") or {} for side in by_name]
        if not any(evals):
            continue
        rows.append({"stage": name, **_row("blessed", evals[0].get("blessed"),
                                           evals[1].get("blessed"))})
        for metric in sorted({*(evals[0].get("metrics") or {}), *(evals[1].get("metrics") or {})}):
            rows.append({"stage": name, **_row(metric, (evals[0].get("metrics") or {}).get(metric),
                                               (evals[1].get("metrics") or {}).get(metric))})
    return rows


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"window": {"length": 14}} -> {"window.length": 14}: nested parameters, diffable."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}
