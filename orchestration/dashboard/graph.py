"""The pipeline as a graph on the run page: stages as boxes by status, records on the edges."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.dashboard.units import count, significant
from seqline.orchestration.store.statuses import RAN

__all__ = ["LAYOUTS", "LOOKS", "graph", "node_words"]

# Two layouts of the same boxes, in SVG user units (1 unit = 1 CSS px at full size):
# `across` (stages left to right) for wide screens, `down` (top to bottom) for phones and for
# pipelines too long to go across. Boxes are wide enough for ~17 characters of 12 px text;
# a gap holds an edge's label, "99,999 out" in 11 px text (60 px) across, two lines down.
LAYOUTS = {
    "across": {"box_w": 140, "box_h": 46, "gap_main": 66, "gap_cross": 14},
    "down": {"box_w": 230, "box_h": 40, "gap_main": 36, "gap_cross": 14},
}
PAD = 6  # room around the boxes, for their outlines
# How a box is drawn (node_words), in the legend's order, with the legend's words.
LOOKS = {"ran": "ran (its status' colour)", "reused": "reused",
         "because-failure": "stopped or not run: another stage failed",
         "notrun": "not run (cancelled, or not yet)"}
# Wider than this, `across` would shrink its text below ~9 px on a 800 px screen: such a
# pipeline is drawn `down` at every width.
ACROSS_MAX_WIDTH = 1200
# Characters of text that fit a box's width: 12 px bold names ~7.2 px per character, 11 px
# notes ~6.2 (system-ui); longer ones end in "…" and the box's tooltip holds the whole.
NAME_PX, NOTE_PX = 7.2, 6.2


def graph(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """Boxes and edges for the run page's SVG, from the run's stage rows (run_view's, with
    `not_run` added: page_data._add_figures).

    A stage's layer is one after the stage it reads (`source`, the plan's, kept with its
    row); a stage reading files starts a layer 0. A stage reads one stage, so every edge
    joins neighbouring layers and runs in the gap between them: it never crosses a box.
    An edge carries the records that left the stage it starts from (that stage's "out") and
    those the stage it enters took in (its "in"), as the table's columns say them: one
    number when they are the same, both, named, when they are not (batching's 1,461 records
    out became training's 1,155 windows in), see _labels.

    Example: stages read → features (1,461 out of read, 1,461 into features) give boxes at
    layers 0 and 1 and one edge {"from": "read", "to": "features", "label": "1,461",
    "labels": ["1,461"], "title": "read → features: 1,461 records"}.

    Returns:
        {"nodes": [{name, status, look, words, brief, title, layer, pos}], "edges": [{from, to,
        label, labels, title, look}], "across": layout | None (too wide), "down": layout,
        "legend": the
        looks drawn, with their words ([{look, words}], LOOKS' order)}; a layout is
        {"width", "height", "boxes": {name: {x, y, w, h}}, "paths": [{d, label_x, label_y,
        label_ys, anchor}]} (paths in the order of `edges`).
    """
    by_name = {s["name"]: s for s in stages}
    layer: dict[str, int] = {}
    nodes, edges = [], []
    per_layer: dict[int, int] = {}
    for stage in stages:
        source = stage.get("source")
        at = layer[source] + 1 if source in layer else 0
        layer[stage["name"]] = at
        pos = per_layer.get(at, 0)
        per_layer[at] = pos + 1
        words, look = node_words(stage)
        nodes.append({"name": stage["name"], "status": stage["status"], "look": look,
                      "words": words, "brief": _brief(stage), "title": _title(stage, words),
                      "layer": at, "pos": pos})
        if source in by_name:
            labels, title = _labels(by_name[source], stage)
            edges.append({"from": source, "to": stage["name"], "labels": labels,
                          "label": " / ".join(labels), "title": title,
                          "look": "notrun" if look in ("notrun", "because-failure") else look})
    across = _layout(nodes, edges, "across")
    return {"nodes": nodes, "edges": edges, "down": _layout(nodes, edges, "down"),
            "across": across if across["width"] <= ACROSS_MAX_WIDTH else None,
            "legend": [{"look": look, "words": words} for look, words in LOOKS.items()
                       if any(n["look"] == look for n in nodes)]}


def node_words(stage: dict[str, Any]) -> tuple[str, str]:
    """A box's second line (its status; a running stage held back by one block says which
    seq) and how it is drawn: `ran` (solid, its status' colour: a stage a cancel stopped is
    cancelled's), `reused` (dashed outline), `because-failure` (hatched, outlined in the
    failure's colour: stopped, or not run, because another stage failed), `notrun`
    (hatched: a cancel came before it started, or not yet).

    Example: a skipped stage whose `not_run` is {"because": "failure", "short": "not run:
    features failed"} -> ("not run: features failed", "because-failure"); a cancelled one
    in a cancelled run -> ("stopped: the run was cancelled", "ran").
    """
    status = stage["status"]
    not_run = stage.get("not_run")
    if not_run:
        if not_run["because"] == "failure":
            return not_run["short"], "because-failure"
        return not_run["short"], "ran" if status == "cancelled" else "notrun"
    if status == "cached":
        return "reused", "reused"
    if status in ("skipped", "pending"):
        return "not run" if status == "skipped" else "pending", "notrun"
    blocked = stage.get("blocked")
    if blocked:  # a running stage whose output waits on one block
        return f"blocked on seq {count(blocked['seq'])}", "ran"
    return str(status), "ran"


def _brief(stage: dict[str, Any]) -> str | None:
    """A cascade's words when "not run: features failed" does not fit its box: "↳ features
    failed" (the hatch and the red outline say the rest; the tooltip says it all); a cancel's:
    "↳ cancelled" for a stage it stopped at work, "↳ not run" for one that did nothing."""
    not_run = stage.get("not_run") or {}
    if not_run.get("because") == "failure" and not_run.get("stage"):
        return f"↳ {not_run['stage']} failed"
    if not_run.get("because") == "cancel":
        return "↳ cancelled" if not_run.get("verb") == "stopped" else "↳ not run"
    return None


def _title(stage: dict[str, Any], words: str) -> str:
    """The box's tooltip: its whole name, its state and why (the store's reason); a stage a
    failure or a cancel stopped: its reason, which says both ("stopped after 2.05 s: …")."""
    why = stage.get("why") or stage.get("reason")
    if why and stage.get("not_run"):
        return f"{stage['name']}: {why}"
    return f"{stage['name']}: {words}" + (f" ({why})" if why and why != words else "")


def _labels(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], str]:
    """An edge's labels (one or two lines) and its tooltip, from the stage it leaves (`a`)
    and the stage it enters (`b`).

    Example: batches (1,461 out) → model (1,155 in) -> (["1,461 out", "1,155 in"],
    "batches → model: 1,461 records out of batches; model took in 1,155"); read → examples,
    1,461 both -> (["1,461"], "read → examples: 1,461 records"); into a stage that did not run
    -> (["1,461 out"], "…: 1,461 records out of read; examples did not take any in").
    """
    out, took = _out(a), _taken(b)
    head = f"{a['name']} → {b['name']}"
    if out is None and took is None:
        return [], head
    if out == took:
        return [_short(out)], f"{head}: {count(out)} records"
    words = [f"{count(out)} records out of {a['name']}"] if out is not None else []
    words.append(f"{b['name']} took in {count(took)}" if took is not None
                 else f"{b['name']} did not take any in")
    labels = ([f"{_short(out)} out"] if out is not None else []) + \
        ([f"{_short(took)} in"] if took is not None else [])
    return labels, f"{head}: {'; '.join(words)}"


def _out(stage: dict[str, Any]) -> int | None:
    """The records a stage passed on, as its table's "out" column shows them (None before it
    commits: while it runs, or when it failed)."""
    if stage["status"] not in (*RAN, "cached"):
        return None
    out: int | None = stage.get("records_out")
    return out


def _taken(stage: dict[str, Any]) -> int | None:
    """The records a stage took in, as its table's "in" column shows them (the newest
    sample's records done while it runs); None for a stage that did not run."""
    if stage["status"] not in (*RAN, "cached"):
        return None
    done: int | None = stage.get("records_in")
    if done is None:
        done = (stage.get("live") or {}).get("records_done")
    return done


def _short(value: int | None) -> str:
    """A count that fits an edge's gap: in full below 100,000 ("99,999"), else to 3 digits
    ("146k", "1.46M"); the edge's tooltip holds it in full."""
    if value is None or abs(value) < 100_000:
        return count(value)
    number, unit = (value / 1e6, "M") if abs(value) >= 1e6 else (value / 1e3, "k")
    return f"{significant(number)}{unit}"


def _layout(nodes: list[dict[str, Any]], edges: list[dict[str, Any]],
            direction: str) -> dict[str, Any]:
    """Where every box and edge goes: layers along the main axis (x across, y down), stages
    of one layer side by side along the other."""
    size = LAYOUTS[direction]
    w, h, main, cross = size["box_w"], size["box_h"], size["gap_main"], size["gap_cross"]
    across = direction == "across"
    boxes = {}
    for n in nodes:
        step_main = (w if across else h) + main
        step_cross = (h if across else w) + cross
        a, b = PAD + n["layer"] * step_main, PAD + n["pos"] * step_cross
        boxes[n["name"]] = {"x": a if across else b, "y": b if across else a, "w": w, "h": h,
                            "name": _fit(n["name"], w, NAME_PX),
                            "words": _fit(n["words"] if n["brief"] is None or _fits(
                                n["words"], w, NOTE_PX) else n["brief"], w, NOTE_PX)}
    paths = [_path(boxes[e["from"]], boxes[e["to"]], across) for e in edges]
    right = max((b["x"] + b["w"] for b in boxes.values()), default=0)
    bottom = max((b["y"] + b["h"] for b in boxes.values()), default=0)
    return {"width": round(right + PAD), "height": round(bottom + PAD), "boxes": boxes,
            "paths": paths}


def _path(a: dict[str, Any], b: dict[str, Any], across: bool) -> dict[str, Any]:
    """An edge from box `a` to box `b` (the next layer) as an SVG curve, and where its
    labels go (`label_y`: one label's, `label_ys`: two labels'): across, from a's right side
    to b's left, labelled above the line ("out" above, "in" below it); down, from a's bottom
    to b's top, labelled right of it ("out" over "in")."""
    if across:
        x1, y1, x2, y2 = a["x"] + a["w"], a["y"] + a["h"] / 2, b["x"], b["y"] + b["h"] / 2
        mid = (x1 + x2) / 2
        d = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"
        return {"d": d, "label_x": mid, "label_y": min(y1, y2) - 5,
                "label_ys": [min(y1, y2) - 5, max(y1, y2) + 14], "anchor": "middle"}
    x1, y1, x2, y2 = a["x"] + a["w"] / 2, a["y"] + a["h"], b["x"] + b["w"] / 2, b["y"]
    mid = (y1 + y2) / 2
    d = f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2}"
    return {"d": d, "label_x": max(x1, x2) + 8, "label_y": mid + 4,
            "label_ys": [mid - 2, mid + 11], "anchor": "start"}


def _fits(text: str, width: float, per_char: float) -> bool:
    return len(text) <= max(int((width - 16) / per_char), 4)


def _fit(text: str, width: float, per_char: float) -> str:
    """`text` cut to what fits `width` (less 16 units of padding), ending in "…" if cut."""
    room = max(int((width - 16) / per_char), 4)
    return text if len(text) <= room else text[:room - 1] + "…"
