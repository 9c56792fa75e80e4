"""An epoch's batches as a picture: each batch's seq range at its place in the epoch, so that
a gap or a step back in the order training took them stands out (a table of first and last
seqs hides one in its pages)."""

from __future__ import annotations

from typing import Any

__all__ = ["batch_order"]

WIDTH, HEIGHT, PAD = 1000, 140, 4  # the SVG's viewBox; the browser scales it to the page
# An epoch of more batches is drawn in groups of consecutive batches (the group's lowest first
# and highest last seq), flagged if any batch in it breaks the order: a few thousand rects
# at most, whatever the epoch.
MAX_BARS = 1000


def batch_order(batches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The picture of one epoch's batches (the train audit's `first`/`last` seq per batch).

    A batch goes on from the one before when its first seq is the next after that one's
    last. It steps back when its first seq is not past the last one's (a record seen again
    or out of order), and leaves a gap when seqs are skipped (held out for evaluation by a
    hash split, or missing).

    Example: seqs 0-31, 32-63, 70-90, 80-99 -> ok, ok, gap, back.

    Returns:
        {"width", "height", "bars": [{"index", "first", "last", "kind", "x", "y", "w", "h"}],
        "gaps", "backs", "first", "last", "batches"}; None without batches.
    """
    if not batches:
        return None
    kinds = ["ok"] + [_kind(before, now) for before, now in zip(batches, batches[1:], strict=False)]
    low, high = min(b["first"] for b in batches), max(b["last"] for b in batches)
    span, n = max(high - low, 1), len(batches)
    group = -(-n // MAX_BARS)
    bars = []
    for start in range(0, n, group):
        chunk, flags = batches[start:start + group], kinds[start:start + group]
        first, last = min(b["first"] for b in chunk), max(b["last"] for b in chunk)
        top = PAD + (high - last) / span * (HEIGHT - 2 * PAD)
        bottom = PAD + (high - first) / span * (HEIGHT - 2 * PAD)
        width = max(len(chunk) / n * WIDTH * 0.8, 0.5)  # a fifth of a slot apart
        bars.append({"index": start, "first": first, "last": last,
                     "kind": "back" if "back" in flags else "gap" if "gap" in flags else "ok",
                     "x": round(start / n * WIDTH, 2), "w": round(width, 2),
                     "y": round(top, 2), "h": round(max(bottom - top, 1.5), 2)})
    return {"width": WIDTH, "height": HEIGHT, "bars": bars, "gaps": kinds.count("gap"),
            "backs": kinds.count("back"), "first": low, "last": high, "batches": n}


def _kind(before: dict[str, Any], now: dict[str, Any]) -> str:
    if now["first"] <= before["last"]:
        return "back"
    return "gap" if now["first"] > before["last"] + 1 else "ok"
