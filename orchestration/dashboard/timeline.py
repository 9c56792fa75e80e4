"""The assembly line as a timeline: one bar per stage in five states, the bottleneck named."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

from seqline.orchestration.plan import KEPT
from seqline.orchestration.store.statuses import RAN

__all__ = ["NARROW", "RAN", "STATES", "WIDE", "Layout", "bottleneck", "timeline", "wait_spans"]


@dataclass(frozen=True)
class Layout:
    """A timeline's size in viewBox units: its width, the room for stage names on its left
    (and the characters of a name that fit), the room a note takes, the ticks wanted."""

    width: int
    label: int
    name_chars: int
    note_units: int
    ticks: int


# Wide screens: scaled to the page, 640 px at the least (it scrolls in its box below that):
# names of 22 characters, a note of ~50 characters of 11 px italic, 4-9 ticks.
WIDE = Layout(width=1000, label=150, name_chars=22, note_units=320, ticks=8)
# Phones: drawn about 1:1 in a 400 px page's 380 px, so nothing scrolls and a short stage's
# bar is on the screen (at 640 px it sat past the phone's edge, right of a run's set-up):
# names of 11 characters, ~35 of a note, 2-4 ticks.
NARROW = Layout(width=380, label=84, name_chars=11, note_units=210, ticks=3)
ROW = 22  # pixels per stage row
# Sampling intervals narrower than this many viewBox units are drawn together: an hour-long
# run's 3,600 seconds would otherwise be thousands of slivers no screen can show.
MIN_UNITS = 2.0
# A reused stage lasts about 0 s now: drawn this wide so that it can be seen at all.
MARK_UNITS = 4.0
# The narrowest bar: a stage of 10 ms in a run of 3 s (a read failing on its first block)
# would be 3 units of WIDE, 2 px where it is 640 px wide; 8 units are 5 px there, 8 on a phone.
MIN_BAR_UNITS = 8.0
# The five states a stage's time is drawn in, and the words the legend and tooltips use.
STATES = {"working": "working", "input": "waiting on input",
          "output": "waiting on output (backpressure)", "reused": "reused (not run now)",
          "notrun": "not run"}


def timeline(run: dict[str, Any], samples: dict[str, dict[str, list[Any]]],
             layout: Layout = WIDE) -> dict[str, Any]:
    """Bars, waits and notes for the run page's SVG, in viewBox units of `layout`.

    A resumed run's timeline is its last attempt's, from when it was resumed; the stages the
    earlier attempt committed are marks there, as reused ones.

    A stage that ran is a `working` bar from its start to its end (its tooltip says its
    recorded seconds, as its table row, see _bar_seconds), with the seconds it waited
    on input or on output drawn over it (`wait_spans`); a cancelled one too, for the time it
    ran, with its reason beside it ("stopped after 1.20 s: …"); a reused stage is a `reused`
    mark and its reason; a skipped stage (it did nothing) only its reason.

    Args:
        run: `RunReader.run_page`'s object (stages with t0/t1).
        samples: `Dashboard.series` keyed by stage name (cumulative waits over time).
        layout: WIDE (the default) or NARROW.

    Returns:
        {"width", "height", "label", "rows": [{name, label, status, y, bar: {x, w, state,
        seconds} | None, waits: [{x, w, state, seconds}], note: {x, anchor, text} | None,
        because: "failure" | "cancel" | None (why it did not run)}],
        "ticks": [{x, text, anchor}], "states": {state: words}, "starts": {stage: t0},
        "span": seconds} (the charts start each stage's steps at its start, and show the
        run's span).
    """
    start = run["t0"]
    end = run["t1"] or max([time.time()] + [s["t1"] or 0 for s in run["stages"]])
    span = max(end - start, 1e-3)
    scale = (layout.width - layout.label) / span

    def x(t: float) -> float:
        return round(layout.label + (min(max(t, start), end) - start) * scale, 1)

    ended = run["status"] not in ("queued", "running")
    rows = []
    for i, stage in enumerate(run["stages"]):
        t0, t1 = stage["t0"], stage["t1"] or (end if stage["status"] == "running" else None)
        not_run = stage.get("not_run") or {}
        name = stage["name"]
        row: dict[str, Any] = {"name": name, "status": stage["status"], "y": i * ROW,
                               "label": name if len(name) <= layout.name_chars
                               else name[:layout.name_chars - 1] + "…",
                               "bar": None, "waits": [], "note": None,
                               "because": not_run.get("because")}
        state = _state(stage["status"], ended)
        if run.get("resumed") and stage.get("reason") == KEPT:
            state = "reused"  # committed by the earlier attempt: a mark, as a reused stage
        if state == "reused":
            t0 = t1 = stage["t1"] or stage["t0"]  # now-seconds, about 0: a mark
        # a skipped stage did nothing: no bar, even where its thread started and waited
        if t0 is not None and t1 is not None and state not in (None, "notrun"):
            width = max(round(x(t1) - x(t0), 1), MARK_UNITS if state == "reused"
                        else MIN_BAR_UNITS)
            row["bar"] = {"x": min(x(t0), layout.width - width), "w": width, "state": state,
                          "seconds": _bar_seconds(stage, state, t0, t1)}
            if state != "reused":
                spans = wait_spans(t0, t1, samples.get(stage["name"]), stage, MIN_UNITS / scale)
                row["waits"] = [{"x": x(a), "w": max(round(x(b) - x(a), 1), 0.5),
                                 "state": side, "seconds": round(b - a, 3)}
                                for a, b, side in spans if b - a >= 5e-4]  # 0.000 s: none
        note = _note(stage, state)
        if note:
            row["note"] = _placed(note, row["bar"], layout)
        rows.append(row)
    ticks = [{"x": x(start + at), "text": f"{at:.{places}f} s",
              "anchor": "end" if x(start + at) > layout.width - 20 else "start"}
             for at, places in _ticks(span, layout.ticks)]
    starts = {s["name"]: s["t0"] for s in run["stages"] if s["t0"] is not None}
    return {"width": layout.width, "height": len(rows) * ROW + 18, "label": layout.label,
            "rows": rows,
            "ticks": ticks, "states": STATES, "starts": starts, "span": round(span, 3)}


def _bar_seconds(stage: dict[str, Any], state: str, t0: float, t1: float) -> float | None:
    """What a bar's tooltip says: the stage's recorded seconds, as its table row and the
    terminal say them (its end minus its start can differ: 0.035 s, "0.04 s", for a stage
    of 0.0347 s, "0.03 s"); a running stage has none recorded yet: its start to now (a
    reused stage without any: none)."""
    if stage["seconds"] is not None and stage["status"] != "running":
        return float(stage["seconds"])
    return None if state == "reused" else round(max(t1 - t0, 0.0), 3)


def _state(status: str, ended: bool) -> str | None:
    """The state a stage's bar is drawn in (None: no bar, e.g. pending in a live run)."""
    if status in RAN:
        return "working"
    if status == "cached":
        return "reused"
    if status == "skipped" or (status == "pending" and ended):
        return "notrun"
    return None


def _placed(text: str, bar: dict[str, Any] | None, layout: Layout) -> dict[str, Any]:
    """Where a note goes: right of its bar, else inside a wide bar, else left of it."""
    right = bar["x"] + bar["w"] if bar else layout.label
    room = layout.note_units
    if right < layout.width - room:
        return {"x": right + 6, "anchor": "start", "text": text}
    if bar and (bar["w"] >= room or bar["x"] - layout.label < room):
        return {"x": bar["x"] + 6, "anchor": "start", "text": text}
    return {"x": bar["x"] - 6 if bar else layout.label, "anchor": "end", "text": text}


def _ticks(span: float, wanted: int = 8) -> list[tuple[float, int]]:
    """Round tick positions (seconds from the start) and their decimals: a 1, 2 or 5 step
    giving about `wanted` ticks (4 to 9 for 8), e.g. 12.7 s -> 0, 2, 4, … 12; 0.47 s -> 0.0,
    0.1, … 0.4."""
    raw = span / wanted
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    places = max(0, -math.floor(math.log10(step)))
    return [(k * step, places) for k in range(int(span / step + 1e-9) + 1)]


def _note(stage: dict[str, Any], state: str | None) -> str | None:
    """What a stage that did not run now, or not to the end, says beside its row: the
    store's reason (else page_data's `not_run`: that another stage's failure stopped it, or
    a cancel)."""
    if stage["status"] == "cancelled":
        return str(stage.get("reason") or (stage.get("not_run") or {}).get("short")
                   or "cancelled")
    if state not in ("reused", "notrun"):
        return None
    reason = stage.get("reason") or (stage.get("not_run") or {}).get("short")
    if reason:
        return str(reason)
    if state == "reused":
        return f"reused from run {stage['cached_from']}" if stage.get("cached_from") \
            else "reused"
    return "not run"


def wait_spans(t0: float, t1: float, columns: dict[str, list[Any]] | None,
               totals: dict[str, Any], min_seconds: float = 0.0
               ) -> list[tuple[float, float, str]]:
    """Where a stage waited on its input or output, from its cumulative wait counters.

    Each sampling interval waited as much as the counters grew in it; the interval from the
    last sample to the stage's end as much as the stage row's totals add. A wait is counted
    when it ends, so growth larger than its interval belongs to the intervals before it
    (the wait was under way): it is moved back, latest first. The drawn waits therefore add
    up to the totals the table shows. Within an interval the waits are placed next to the
    same state in the neighbouring intervals, so a 9 s wait is one stretch, not a comb.

    Example: samples at t0+1 s (waited_input 0.0) and t0+2 s (0.0), the row's total 2.5 s
    and its end at t0+3 s -> [(t0+0.5, t0+3.0, "input")].

    Args:
        t0: the stage's start (Unix seconds).
        t1: its end, or now for a running stage.
        columns: its samples as chart columns (t, waited_input, waited_output), or None.
        totals: the stage's row: `waited_input`/`waited_output` (None while it runs).
        min_seconds: intervals shorter than this are drawn together.

    Returns:
        (start, end, "input" | "output") spans in time order.
    """
    points = _cumulative(t0, t1, columns, totals)
    intervals = _spill_back(points)
    return _layout(_bucketed(intervals, min_seconds))


def _cumulative(t0: float, t1: float, columns: dict[str, list[Any]] | None,
                totals: dict[str, Any]) -> list[tuple[float, float, float]]:
    """(t, waited on input, waited on output) from the start (0, 0) to the last known."""
    points = [(t0, 0.0, 0.0)]
    columns = columns or {}
    for t, w_in, w_out in zip(columns.get("t") or [], columns.get("waited_input") or [],
                              columns.get("waited_output") or [], strict=False):
        last = points[-1]
        points.append((min(max(t, last[0]), t1), max(w_in or 0.0, last[1]),
                       max(w_out or 0.0, last[2])))
    if totals.get("waited_input") is not None or totals.get("waited_output") is not None:
        last = points[-1]
        points.append((max(t1, last[0]), max(totals.get("waited_input") or 0.0, last[1]),
                       max(totals.get("waited_output") or 0.0, last[2])))
    return points


def _spill_back(points: list[tuple[float, float, float]]) -> list[list[float]]:
    """Per interval [start, end, waited on input, on output], no interval over-full: what
    does not fit moves to the intervals before it."""
    intervals = [[a[0], b[0], b[1] - a[1], b[2] - a[2]]
                 for a, b in itertools.pairwise(points)]
    carry_in = carry_out = 0.0
    for interval in reversed(intervals):
        room = interval[1] - interval[0]
        want_in, want_out = interval[2] + carry_in, interval[3] + carry_out
        interval[2] = min(want_in, room)
        interval[3] = min(want_out, room - interval[2])
        carry_in, carry_out = want_in - interval[2], want_out - interval[3]
    return [i for i in intervals if i[1] > i[0]]


def _bucketed(intervals: list[list[float]], min_seconds: float) -> list[list[float]]:
    """Consecutive intervals joined until each lasts at least `min_seconds`."""
    buckets: list[list[float]] = []
    for start, end, w_in, w_out in intervals:
        if buckets and buckets[-1][1] - buckets[-1][0] < min_seconds:
            last = buckets[-1]
            last[1], last[2], last[3] = end, last[2] + w_in, last[3] + w_out
        else:
            buckets.append([start, end, w_in, w_out])
    return buckets


def _layout(buckets: list[list[float]]) -> list[tuple[float, float, str]]:
    """Each bucket cut into working / input / output parts, waits merged across buckets."""
    spans: list[tuple[float, float, str]] = []
    previous = None
    for i, (start, _end, _w_in, _w_out) in enumerate(buckets):
        parts = _parts(buckets[i])
        following = buckets[i + 1] if i + 1 < len(buckets) else None
        coming = max(_parts(following).items(), key=lambda p: p[1])[0] if following else None
        order = sorted(parts, key=lambda s: 0 if s == previous else 2 if s == coming else 1)
        t = start
        for state in order:
            if parts[state] <= 1e-9:
                continue
            a, t = t, t + parts[state]
            previous = state
            if state == "working":
                continue
            if spans and spans[-1][2] == state and abs(spans[-1][1] - a) < 1e-6:
                spans[-1] = (spans[-1][0], t, state)
            else:
                spans.append((a, t, state))
    return spans


def _parts(bucket: list[float]) -> dict[str, float]:
    start, end, w_in, w_out = bucket
    return {"input": w_in, "output": w_out, "working": end - start - w_in - w_out}


def bottleneck(stages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stage that was busy longest: the one the others waited for.

    In an assembly line every stage lasts about as long as the line; the slowest one is the
    stage that waited least, so busy time = seconds − waited on input − waited on output.
    Only stages that ran in this run count (not reused, skipped or pending ones, nor those a
    resumed run kept from its earlier attempt), and only with some busy time: "slowest: x
    (busy 0.00 s of 0.00 s)" names nothing.

    Returns:
        {"name", "busy", "seconds"} or None when no stage ran long enough to compare.
    """
    best = None
    for s in stages:
        if s["status"] not in RAN or s["seconds"] is None or s.get("reason") == KEPT:
            continue
        busy = s["seconds"] - (s["waited_input"] or 0) - (s["waited_output"] or 0)
        # busy enough to read as more than "0.00 s" (a 3 ms read failing on its first block)
        if busy >= 0.005 and (best is None or busy > best["busy"]):
            best = {"name": s["name"], "busy": round(busy, 2), "seconds": round(s["seconds"], 2)}
    return best
