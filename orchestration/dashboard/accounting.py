"""A stage's record accounting as its page states it: in, out, filtered, dead-lettered and in
flight, and whether they add up (records_in + exploded = records_out + filtered + dead_lettered)."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.dashboard.units import count

__all__ = ["accounting"]


def accounting(stage: dict[str, Any]) -> dict[str, Any] | None:
    """Whether a stage's counts (the store's, from its events) add up, in words.

    DESIGN's accounting: records_in + exploded = records_out + filtered + dead_lettered;
    explode's extra rows are counted apart (one row in, three out, adds 2 to exploded). A
    committed stage's records in flight are what that leaves over: 0, or the records the
    counts lose (negative: more out than in). A running stage's counts are known only when it
    commits: it has its records in so far and its blocks in flight. A stage that ended
    without committing (failed, stopped) has only its records in.

    Example: in 1,461, out 1,400, nothing filtered -> {"state": "unbalanced", "in_flight": 61,
    "words": "does not add up: in 1,461 + exploded 0 ≠ out 1,400 + filtered 0 +
    dead-lettered 0: 61 records unaccounted for"}.

    Returns:
        {"state": "balanced" | "unbalanced" | "running" | "uncommitted", "in_flight": records
        (None while running), "in_flight_blocks": blocks (running only), "words"}; None for
        a stage with no records to count (not run, pending).
    """
    status, got = stage["status"], stage.get("records_in")
    if status == "running":
        live = stage.get("live") or {}
        blocks = live.get("in_flight")
        return {"state": "running", "in_flight": None, "in_flight_blocks": blocks,
                "words": f"running: {count(live.get('records_done') or 0)} records in so far"
                         + (f", {count(blocks)} blocks in flight" if blocks else "")
                         + "; out, filtered and dead-lettered are counted when it commits"}
    if got is None:
        return None
    if stage.get("records_out") is None:
        return {"state": "uncommitted", "in_flight": got, "in_flight_blocks": None,
                "words": f"ended without committing its output: {count(got)} records taken "
                         "in, none of them accounted for"} if got else None
    parts = {k: stage.get(k) or 0 for k in ("exploded", "records_out", "filtered",
                                             "dead_lettered")}
    left = got + parts["exploded"] - parts["records_out"] - parts["filtered"] \
        - parts["dead_lettered"]
    sides = (f"in {count(got)} + exploded {count(parts['exploded'])}",
             f"out {count(parts['records_out'])} + filtered {count(parts['filtered'])} + "
             f"dead-lettered {count(parts['dead_lettered'])}")
    if left == 0:
        return {"state": "balanced", "in_flight": 0, "in_flight_blocks": None,
                "words": f"adds up: {sides[0]} = {sides[1]}"}
    lost = f"{count(left)} records unaccounted for" if left > 0 else \
        f"{count(-left)} more records out than came in"
    return {"state": "unbalanced", "in_flight": left, "in_flight_blocks": None,
            "words": f"does not add up: {sides[0]} ≠ {sides[1]}: {lost}"}
