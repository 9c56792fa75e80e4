"""The assembly line as a timeline: one bar per stage, its waits shaded, the bottleneck named."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["bottleneck", "timeline"]

WIDTH = 1000  # the SVG's viewBox width; the browser scales it to the page
ROW = 22  # pixels per stage row
LABEL = 150  # room on the left for stage names
# A second in which a stage spent more than half its time waiting is drawn as waiting:
# finer shading would follow the sampler's jitter, not the stage.
WAIT_SHARE = 0.5


def timeline(run: dict[str, Any], samples: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """Bars and shaded waits for the run page's SVG, in viewBox units.

    Args:
        run: `queries.run_page`'s object (stages with t0/t1).
        samples: `Dashboard.series` keyed by stage name (cumulative waits over time).

    Returns:
        {"width", "height", "label", "rows": [{name, status, x, w, y, waits: [{x, w, side}]}],
        "ticks": [{x, text}]}.
    """
    start = run["t0"]
    end = run["t1"] or max([time.time()] + [s["t1"] or 0 for s in run["stages"]])
    span = max(end - start, 1e-3)
    scale = (WIDTH - LABEL) / span

    def x(t: float) -> float:
        return round(LABEL + (min(max(t, start), end) - start) * scale, 1)

    rows = []
    for i, stage in enumerate(run["stages"]):
        t0, t1 = stage["t0"], stage["t1"] or (end if stage["status"] == "running" else None)
        row: dict[str, Any] = {"name": stage["name"], "status": stage["status"], "y": i * ROW,
                               "x": 0.0, "w": 0.0, "waits": []}
        if t0 is not None and t1 is not None:
            row["x"], row["w"] = x(t0), max(round(x(t1) - x(t0), 1), 1.0)
            row["waits"] = [{"x": x(a), "w": max(round(x(b) - x(a), 1), 0.5), "side": side}
                            for a, b, side in _waits(samples.get(stage["name"]))]
        rows.append(row)
    ticks = [{"x": x(start + span * k / 4), "text": f"{span * k / 4:.1f} s"} for k in range(5)]
    return {"width": WIDTH, "height": len(rows) * ROW + 18, "label": LABEL, "rows": rows,
            "ticks": ticks}


def _waits(columns: dict[str, list[Any]] | None) -> list[tuple[float, float, str]]:
    """Intervals (start, end, side) where the stage mostly waited on its input or output."""
    if not columns or len(columns["t"]) < 2:
        return []
    spans: list[tuple[float, float, str]] = []
    t, w_in, w_out = columns["t"], columns["waited_input"], columns["waited_output"]
    for i in range(1, len(t)):
        dt = t[i] - t[i - 1]
        if dt <= 0:
            continue
        d_in = (w_in[i] or 0) - (w_in[i - 1] or 0)
        d_out = (w_out[i] or 0) - (w_out[i - 1] or 0)
        side = "input" if d_in / dt > WAIT_SHARE else "output" if d_out / dt > WAIT_SHARE \
            else None
        if side is None:
            continue
        if spans and spans[-1][2] == side and spans[-1][1] == t[i - 1]:
            spans[-1] = (spans[-1][0], t[i], side)  # one shaded stretch, not a comb
        else:
            spans.append((t[i - 1], t[i], side))
    return spans


def bottleneck(stages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stage that was busy longest: the one the others waited for.

    In an assembly line every stage lasts about as long as the line; the slowest one is the
    stage that waited least, so busy time = seconds − waited on input − waited on output.

    Returns:
        {"name", "busy", "seconds"} or None when no stage has finished work to compare.
    """
    best = None
    for s in stages:
        if s["status"] == "cached" or s["seconds"] is None:
            continue
        busy = s["seconds"] - (s["waited_input"] or 0) - (s["waited_output"] or 0)
        if best is None or busy > best["busy"]:
            best = {"name": s["name"], "busy": round(busy, 2), "seconds": round(s["seconds"], 2)}
    return best
