"""Head-of-line blocking as a stage's samples tell it: the watermark, and the block it waits for."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.dashboard.units import count, duration

__all__ = ["blocked", "head_of_line"]

# The stage page's watermark chart, in SVG user units (the browser scales it to the page).
CHART_W, CHART_H = 600, 120
LEFT = 64  # room for the seq axis' labels, e.g. "1,000,000"


def blocked(stage: dict[str, Any]) -> dict[str, Any] | None:
    """A running stage's block that holds finished results back now (its newest sample),
    with the run page's words for it; None when nothing waits on one.

    Example: a sample with blocker_seq 1024, blocker_worker "pid 812", blocker_attempt 1 and
    blocker_seconds 4.2 -> {"seq": 1024, …, "text": "blocked on seq 1,024 (pid 812, attempt
    1, 4.20 s)"}.
    """
    live = stage.get("live") or {}
    if stage["status"] != "running" or live.get("blocker_seq") is None:
        return None
    found = {"seq": live["blocker_seq"], "block": live.get("blocker_block"),
             "worker": live.get("blocker_worker"), "attempt": live.get("blocker_attempt"),
             "seconds": live.get("blocker_seconds"), "held": live.get("held_records")}
    where = ", ".join(p for p in (found["worker"] or "worker not known",
                                  f"attempt {found['attempt']}" if found["attempt"] else "",
                                  duration(found["seconds"])) if p)
    return {**found, "text": f"blocked on seq {count(found['seq'])} ({where})"}


def head_of_line(stage: dict[str, Any], columns: dict[str, list[Any]]) -> dict[str, Any] | None:
    """The stage page's head of line: its state in the newest sample, the longest hold seen,
    and the watermark against the highest seq done over time. None for a stage whose samples
    have none (a driver stage, Beam's batch jobs, a run recorded before revision 6).

    Returns:
        {"now": {watermark, seq_done, lag, held_records, held_bytes, held_blocks, blocker:
        blocked() or None}, "longest": {seq, block, worker, attempt, seconds} | None,
        "chart": {width, height, left, watermark, seq_done (polyline points), ticks (seq
        axis), times (time axis)} | None (fewer than 2 samples)}.
    """
    marks = columns.get("watermark") or []
    if not any(v is not None for v in [*marks, *(columns.get("seq_done") or [])]):
        return None
    live = stage.get("live") or {}
    mark, done = live.get("watermark"), live.get("seq_done")
    now = {"watermark": mark, "seq_done": done,
           "lag": done - mark if done is not None and mark is not None else None,
           "held_records": live.get("held_records"), "held_bytes": live.get("held_bytes"),
           "held_blocks": live.get("reorder_held"), "blocker": blocked(stage)}
    return {"now": now, "longest": _longest(columns), "chart": _chart(columns)}


def _longest(columns: dict[str, list[Any]]) -> dict[str, Any] | None:
    """The block that held the others back longest, as sampled (a hold shorter than the
    sampling interval may go unseen)."""
    seconds = columns.get("blocker_seconds") or []
    best = max(range(len(seconds)), key=lambda i: seconds[i] or 0.0, default=None)
    if best is None or not seconds[best]:
        return None
    return {k: (columns.get(f"blocker_{k}") or [None] * len(seconds))[best]
            for k in ("seq", "block", "worker", "attempt", "seconds")}


def _chart(columns: dict[str, list[Any]]) -> dict[str, Any] | None:
    """Polylines of the watermark and of the highest seq done over the samples that have
    them, each in steps (a sample's value holds until the next: the watermark stays flat
    while a block holds the others back, then jumps); None below two such samples."""
    times = columns.get("t") or []
    series = {k: columns.get(k) or [None] * len(times) for k in ("watermark", "seq_done")}
    known = [i for i, t in enumerate(times)
             if any(series[k][i] is not None for k in series)]
    if len(known) < 2:
        return None
    top = max([v for vs in series.values() for v in vs if v is not None] or [1]) or 1
    t0, t1 = times[known[0]], times[known[-1]]
    span = max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return round(LEFT + (t - t0) / span * (CHART_W - LEFT - 4), 1)

    def y(v: float) -> float:
        return round(CHART_H - 20 - v / top * (CHART_H - 28), 1)

    lines = {}
    for name, values in series.items():
        points: list[str] = []
        for i in known:
            if values[i] is None:
                continue
            if points:  # a step: flat until this sample
                points.append(f"{x(times[i])},{points[-1].split(',')[1]}")
            points.append(f"{x(times[i])},{y(values[i])}")
        lines[name] = " ".join(points)
    return {"width": CHART_W, "height": CHART_H, "left": LEFT, **lines,
            "ticks": [{"y": y(v), "text": count(v)} for v in (0, top)],
            "times": [{"x": x(t0), "text": "0 s", "anchor": "start"},
                      {"x": x(t1), "text": duration(t1 - t0), "anchor": "end"}]}
